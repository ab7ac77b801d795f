// The YAML spec: a full good spec read field by field, and each mistake a user
// can make in it, reported at the right file:line:col.
#include "TestUtil.h"

#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>

using namespace shardproof;
using namespace shardproof::spec;
using namespace shardproof::spec::test;
using ::testing::HasSubstr;

namespace {

const char *kGoodSpec = R"yaml(shardproof: 1
reference: mlp_ref.onnx
implementation:
  world_size: 2
  ranks: mlp_rank{r}.onnx
symbols:
  batch: {min: 1}
  seq: {min: 1, max: 131072}
  d: {value: 8}
  free:
constraints: ["seq % 2 == 0", "vocab >= seq"]
inputs:
  x: replicated
  w1: {shard: 1}
  w2: {shard: 0, split: tensor_split}
  w3: {shard: -1, sizes: [4, "seq // 2"]}
  b2: partial
  e: {relation: "slice(concat(e@*, axis=0), axis=0, start=0, end=vocab)"}
  k: {replicated: true, as: "k_local"}
  c: {partial: true, as: "c_{r}"}
  g: {shard: 2, split: chunk, as: g_shard}
outputs:
  y: replicated
  z: "sum(p@*)"
)yaml";

const Placement &placementOf(const std::vector<std::pair<std::string, Placement>> &v,
                             const std::string &name) {
  for (auto &[n, p] : v)
    if (n == name)
      return p;
  ADD_FAILURE() << "no placement for " << name;
  static Placement none;
  return none;
}

TEST(SpecLoader, GoodSpecReadsEveryField) {
  auto s = parseSpec(kGoodSpec, "/models/mlp/mlp.yaml");
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  EXPECT_EQ(s->path, "/models/mlp/mlp.yaml");
  EXPECT_EQ(s->dir, "/models/mlp");
  EXPECT_EQ(s->version, 1);
  EXPECT_EQ(s->reference, "/models/mlp/mlp_ref.onnx");
  EXPECT_EQ(s->referenceLoc.str(), "/models/mlp/mlp.yaml:2:12");
  EXPECT_EQ(s->worldSize, 2);
  EXPECT_EQ(s->rankPaths,
            (std::vector<std::string>{"/models/mlp/mlp_rank0.onnx", "/models/mlp/mlp_rank1.onnx"}));
  EXPECT_EQ(s->ranksLoc.line, 5);
  EXPECT_EQ(s->ranksLoc.col, 10);

  ASSERT_EQ(s->symbols.size(), 4u);
  EXPECT_EQ(s->symbols[0].name, "batch");
  EXPECT_EQ(s->symbols[0].min, 1);
  EXPECT_FALSE(s->symbols[0].max.has_value());
  EXPECT_EQ(s->symbols[1].name, "seq");
  EXPECT_EQ(s->symbols[1].max, 131072);
  EXPECT_EQ(s->symbols[1].loc.line, 8);
  EXPECT_EQ(s->symbols[2].value, 8);
  EXPECT_FALSE(s->symbols[2].min.has_value());
  EXPECT_EQ(s->symbols[3].name, "free"); // a bare name is an unbounded symbol
  EXPECT_FALSE(s->symbols[3].min || s->symbols[3].max || s->symbols[3].value);
  EXPECT_EQ(s->symbolTable().names, (std::vector<std::string>{"batch", "seq", "d", "free"}));

  ASSERT_EQ(s->constraints.size(), 2u);
  EXPECT_EQ(s->constraints[0].text, "seq % 2 == 0");
  EXPECT_EQ(s->constraints[0].loc.line, 11);
  EXPECT_EQ(s->constraints[0].loc.col, 15);
  EXPECT_EQ(evalWith(s->constraints[0].expr, {{"seq", 6}}).asBool(), true);
  EXPECT_EQ(evalWith(s->constraints[0].expr, {{"seq", 7}}).asBool(), false);
  // `vocab` is not declared: it may be an ONNX dim_param, checked later.
  EXPECT_TRUE(s->constraints[1].expr.mentions("vocab"));

  std::vector<std::string> inputNames;
  for (auto &[n, p] : s->inputs)
    inputNames.push_back(n);
  EXPECT_EQ(inputNames, (std::vector<std::string>{"x", "w1", "w2", "w3", "b2", "e", "k", "c", "g"}));

  const Placement &x = placementOf(s->inputs, "x");
  EXPECT_EQ(x.kind, Placement::Kind::Replicated);
  EXPECT_EQ(x.loc.line, 13);
  EXPECT_EQ(x.loc.col, 6);

  const Placement &w1 = placementOf(s->inputs, "w1");
  EXPECT_EQ(w1.kind, Placement::Kind::Shard);
  EXPECT_EQ(w1.axis, 1);
  EXPECT_EQ(w1.split, Placement::Split::Unspecified);

  const Placement &w2 = placementOf(s->inputs, "w2");
  EXPECT_EQ(w2.kind, Placement::Kind::Shard);
  EXPECT_EQ(w2.axis, 0);
  EXPECT_EQ(w2.split, Placement::Split::TensorSplit);

  const Placement &w3 = placementOf(s->inputs, "w3");
  EXPECT_EQ(w3.axis, -1); // stored as given; the checker normalises
  EXPECT_EQ(w3.split, Placement::Split::Sizes);
  ASSERT_EQ(w3.sizes.size(), 2u);
  EXPECT_EQ(w3.sizes[0].asInt(), 4);
  EXPECT_EQ(evalWith(w3.sizes[1], {{"seq", 10}}).asInt(), 5);

  EXPECT_EQ(placementOf(s->inputs, "b2").kind, Placement::Kind::Partial);

  const Placement &e = placementOf(s->inputs, "e");
  EXPECT_EQ(e.kind, Placement::Kind::Relation);
  ASSERT_TRUE(e.relation.has_value());
  EXPECT_EQ(e.relation->str(), "slice(concat(e@0, e@1, axis=0), axis=0, start=0, end=vocab)");
  EXPECT_EQ(e.relation->loc.line, 18);
  EXPECT_EQ(e.relation->loc.col, 18); // just inside the opening quote

  const Placement &k = placementOf(s->inputs, "k");
  EXPECT_EQ(k.kind, Placement::Kind::Replicated);
  EXPECT_EQ(k.as, "k_local");
  EXPECT_EQ(Spec::rankName("k", k, 1), "k_local");

  const Placement &c = placementOf(s->inputs, "c");
  EXPECT_EQ(c.kind, Placement::Kind::Partial);
  EXPECT_EQ(Spec::rankName("c", c, 0), "c_0");
  EXPECT_EQ(Spec::rankName("c", c, 1), "c_1");
  EXPECT_EQ(Spec::rankName("x", x, 1), "x"); // no `as`: same name

  const Placement &g = placementOf(s->inputs, "g");
  EXPECT_EQ(g.split, Placement::Split::Chunk);
  EXPECT_EQ(g.as, "g_shard");

  ASSERT_EQ(s->outputs.size(), 2u);
  EXPECT_EQ(s->outputs[0].first, "y");
  EXPECT_EQ(s->outputs[0].second.kind, Placement::Kind::Replicated);
  EXPECT_EQ(s->outputs[1].first, "z");
  EXPECT_EQ(s->outputs[1].second.kind, Placement::Kind::Relation);
  EXPECT_EQ(s->outputs[1].second.relation->str(), "sum(p@0, p@1)");
}

const char *kHeader = "shardproof: 1\nreference: ref.onnx\nimplementation:\n";

struct RanksCase {
  const char *specPath;
  const char *impl; // the implementation block
  std::vector<std::string> expected;
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const RanksCase &c, std::ostream *os) { *os << c.impl; }

class RanksForms : public ::testing::TestWithParam<RanksCase> {};

TEST_P(RanksForms, ExpandToOnePathPerRank) {
  const RanksCase &c = GetParam();
  auto s = parseSpec(std::string(kHeader) + c.impl, c.specPath);
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  EXPECT_EQ(s->rankPaths, c.expected);
  EXPECT_EQ(s->worldSize, static_cast<int>(c.expected.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Forms, RanksForms,
    ::testing::Values(
        RanksCase{"/s/spec.yaml", "  world_size: 4\n  ranks: r{r}/m_{r}.onnx\n",
                  {"/s/r0/m_0.onnx", "/s/r1/m_1.onnx", "/s/r2/m_2.onnx", "/s/r3/m_3.onnx"}},
        RanksCase{"/s/spec.yaml", "  world_size: 2\n  ranks: [a.onnx, sub/b.onnx]\n",
                  {"/s/a.onnx", "/s/sub/b.onnx"}},
        RanksCase{"/s/spec.yaml", "  world_size: 2\n  ranks:\n    - ../x0.onnx\n    - /abs/x1.onnx\n",
                  {"/x0.onnx", "/abs/x1.onnx"}}, // `..` normalised; absolute kept
        RanksCase{"spec.yaml", "  world_size: 1\n  ranks: only.onnx\n", {"only.onnx"}},
        RanksCase{"cfg/spec.yaml", "  world_size: 2\n  ranks: m{r}.onnx\n",
                  {"cfg/m0.onnx", "cfg/m1.onnx"}}));

struct ErrCase {
  const char *name;
  std::string yaml;
  const char *message; // a substring of the message
  const char *where;   // "line:col", or "" to skip
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const ErrCase &c, std::ostream *os) { *os << c.name; }

std::string withImpl(const std::string &rest, int worldSize = 2) {
  return std::string(kHeader) + "  world_size: " + std::to_string(worldSize) +
         "\n  ranks: m{r}.onnx\n" + rest;
}

class SpecError : public ::testing::TestWithParam<ErrCase> {};

TEST_P(SpecError, IsReportedAtItsLocation) {
  const ErrCase &c = GetParam();
  auto s = parseSpec(c.yaml, "spec.yaml");
  std::string err = errorOf(std::move(s));
  ASSERT_FALSE(err.empty()) << "accepted:\n" << c.yaml;
  EXPECT_THAT(err, HasSubstr(c.message));
  if (*c.where) {
    EXPECT_THAT(err, HasSubstr(std::string("spec.yaml:") + c.where + ": error: "));
  }
}

// Lines 1-5 are the header and implementation block from withImpl().
INSTANTIATE_TEST_SUITE_P(
    Mistakes, SpecError,
    ::testing::Values(
        ErrCase{"UnknownTopLevelKey", withImpl("referense: x.onnx\n"),
                "unknown key 'referense' in the spec; did you mean 'reference'? (allowed keys: "
                "'shardproof', 'reference',",
                "6:1"},
        ErrCase{"GradsNotLikeParams", withImpl("grads: like_inputs\n"),
                "'grads' takes 'like_params' (each output grad:<p> placed like input <p>), got 'like_inputs'",
                "6:8"},
        ErrCase{"YamlSyntax", "shardproof: 1\nreference: [a, b\nimplementation: {}\n",
                "invalid YAML: end of sequence flow not found", "3:15"},
        ErrCase{"YamlBadIndent", "shardproof: 1\nreference: x\n  world_size: 2\n",
                "invalid YAML: illegal map value", "3:13"},
        ErrCase{"WorldSizeNotANumber",
                std::string(kHeader) + "  world_size: \"two\"\n  ranks: m{r}.onnx\n",
                "'world_size' must be an integer, got 'two'", "4:15"},
        ErrCase{"WorldSizeZero", std::string(kHeader) + "  world_size: 0\n  ranks: m.onnx\n",
                "'world_size' must be at least 1, got 0", "4:15"},
        ErrCase{"WorldSizeAbsurd", std::string(kHeader) + "  world_size: 100000000\n  ranks: m{r}\n",
                "larger than the supported maximum 65536", "4:15"},
        // Located at the '---' that starts the second document.
        ErrCase{"TwoYamlDocuments", withImpl("---\nshardproof: 1\n"), "holds more than one YAML document",
                "6:1"},
        ErrCase{"WorldSizeAList", std::string(kHeader) + "  world_size: [2]\n  ranks: m.onnx\n",
                "'world_size' must be an integer, got a list", "4:15"},
        ErrCase{"MinAboveMax", withImpl("symbols:\n  seq: {min: 8, max: 4}\n"),
                "symbol 'seq' has min 8 greater than max 4", "7:22"},
        ErrCase{"ValueOutsideBounds", withImpl("symbols:\n  seq: {min: 8, value: 4}\n"),
                "symbol 'seq' has value 4 outside its bounds", "7:24"},
        ErrCase{"UnknownSymbolKey", withImpl("symbols:\n  seq: {min: 1, maximum: 4}\n"),
                "unknown key 'maximum' in symbol 'seq'; did you mean 'max'?", "7:17"},
        ErrCase{"SymbolBoundNotInt", withImpl("symbols:\n  seq: {min: one}\n"),
                "symbol 'seq': 'min' must be an integer, got 'one'", "7:14"},
        ErrCase{"SymbolNotIdentifier", withImpl("symbols:\n  2seq: {min: 1}\n"),
                "symbol name '2seq' cannot be used in expressions", "7:3"},
        ErrCase{"DuplicateTopLevelKey", withImpl("inputs: {x: replicated}\ninputs: {y: partial}\n"),
                "duplicate key 'inputs' in the spec (first given at line 6)", "7:1"},
        ErrCase{"DuplicateInput", withImpl("inputs:\n  x: replicated\n  x: partial\n"),
                "duplicate key 'x' in 'inputs'", "8:3"},
        ErrCase{"MissingReference", "shardproof: 1\nimplementation: {world_size: 1, ranks: a.onnx}\n",
                "the spec is missing required key 'reference'", "1:1"},
        ErrCase{"MissingWorldSize", std::string(kHeader) + "  ranks: m{r}.onnx\n",
                "'implementation' is missing required key 'world_size'", "4:3"},
        ErrCase{"WrongVersion", "shardproof: 2\nreference: r.onnx\n",
                "unsupported spec format version 2", "1:13"},
        ErrCase{"EmptySpec", "", "the spec is empty", "1:1"},
        ErrCase{"NotAMap", "- a\n- b\n", "the spec must be a map, got a list", "1:1"},
        ErrCase{"UnknownImplementationKey",
                std::string(kHeader) + "  world_size: 2\n  rank: m{r}.onnx\n",
                "unknown key 'rank' in 'implementation'; did you mean 'ranks'?", "5:3"},
        ErrCase{"RanksListTooShort", std::string(kHeader) + "  world_size: 3\n  ranks: [a, b]\n",
                "'ranks' lists 2 files but world_size is 3", "5:10"},
        ErrCase{"RanksPatternWithoutR", std::string(kHeader) + "  world_size: 2\n  ranks: m.onnx\n",
                "has no '{r}'", "5:10"},
        ErrCase{"SizesCountMismatch", withImpl("inputs:\n  w: {shard: 0, sizes: [3, 3, 2]}\n"),
                "input 'w': 'sizes' has 3 entries but world_size is 2", "7:24"},
        ErrCase{"SizesBadExpr", withImpl("inputs:\n  w: {shard: 0, sizes: [3, \"n / 2\"]}\n"),
                "use '//'", "7:31"},
        ErrCase{"SplitTypo", withImpl("inputs:\n  w: {shard: 0, split: evn}\n"),
                "input 'w': unknown split 'evn'; did you mean 'even'?", "7:24"},
        ErrCase{"SplitConflictsWithSizes",
                withImpl("inputs:\n  w: {shard: 0, split: even, sizes: [1, 1]}\n"),
                "'split: even' conflicts with 'sizes'", "7:24"},
        ErrCase{"PadWithoutMultiple", withImpl("inputs:\n  w: {shard: 0, split: pad_to_multiple}\n"),
                "'split: pad_to_multiple' needs 'pad_to_multiple: M'", "7:24"},
        ErrCase{"PadConflictsWithSizes", withImpl("inputs:\n  w: {shard: 0, pad_to_multiple: 4, sizes: [1, 1]}\n"),
                "'pad_to_multiple' conflicts with 'sizes'", "7:17"},
        ErrCase{"PadMultipleBadExpr", withImpl("inputs:\n  w: {shard: 0, pad_to_multiple: \"4 +\"}\n"),
                "unexpected end of expression", "7:38"},
        ErrCase{"SplitWithoutShard", withImpl("inputs:\n  w: {replicated: true, split: even}\n"),
                "'split' only applies to {shard: K} placements", "7:25"},
        ErrCase{"ShardAxisNotInt", withImpl("inputs:\n  w: {shard: x}\n"),
                "'shard' (the axis) must be an integer, got 'x'", "7:14"},
        ErrCase{"UnknownPlacementKey", withImpl("inputs:\n  w: {shard: 0, spilt: even}\n"),
                "unknown key 'spilt' in placement of input 'w'; did you mean 'split'?", "7:17"},
        ErrCase{"TwoPlacementKinds", withImpl("inputs:\n  w: {shard: 0, partial: true}\n"),
                "input 'w' gives both 'shard' and 'partial'; choose one", "7:17"},
        ErrCase{"NoPlacementKind", withImpl("inputs:\n  w: {as: w_local}\n"),
                "input 'w' needs one of 'shard', 'replicated', 'partial' or 'relation'", "7:6"},
        ErrCase{"ReplicatedFalse", withImpl("inputs:\n  w: {replicated: false}\n"),
                "'replicated: false' is not a placement", "7:19"},
        ErrCase{"PlacementTypo", withImpl("outputs:\n  y: replicatd\n"),
                "unknown placement 'replicatd' for output 'y'; did you mean 'replicated'?", "7:6"},
        ErrCase{"BareShard", withImpl("inputs:\n  w: shard\n"), "'shard' needs an axis", "7:6"},
        ErrCase{"MissingPlacement", withImpl("inputs:\n  w:\n"),
                "input 'w' needs a placement", "7:3"},
        ErrCase{"AsWithRelation", withImpl("inputs:\n  w: {relation: \"sum(w@*)\", as: v}\n"),
                "'as' cannot be combined with 'relation'", "7:29"},
        ErrCase{"RelationKwargTypoInQuotes",
                withImpl("inputs:\n  e: {relation: \"concat(e@*, axs=0)\"}\n"),
                "unknown keyword argument 'axs' for concat()", "7:30"},
        ErrCase{"BareRelationRankOutOfRange", withImpl("outputs:\n  z: sum(p@0, p@2)\n"),
                "rank 2 out of range for world_size 2", "7:17"},
        ErrCase{"TopLevelStarNeedsACall", withImpl("outputs:\n  z: \"p@*\"\n"),
                "'p@*' at column 1 stands for 2 tensors", "7:7"},
        ErrCase{"ConstraintSyntax", withImpl("constraints: [\"seq % 2 = 0\"]\n"),
                "unexpected token '=' at column 9; use '==' to compare", "6:24"},
        ErrCase{"ConstraintNotACondition", withImpl("constraints:\n  - seq + 1\n"),
                "expected a condition", "7:5"},
        ErrCase{"ConstraintsNotAList", withImpl("constraints: \"seq > 0\"\n"),
                "'constraints' must be a list", "6:14"},
        ErrCase{"InputsNotAMap", withImpl("inputs: [x, y]\n"), "'inputs' must be a map, got a list",
                "6:9"},
        ErrCase{"ReferenceIsAMap", "shardproof: 1\nreference: {a: 1}\n",
                "'reference' must be a string, got a map", "2:12"},
        // A token-id range needs both ends: a silent default would be a guess.
        ErrCase{"ValuesWithoutMax", withImpl("inputs:\n  ids: {replicated: true, values: {min: 0}}\n"),
                "'values' needs both 'min' and 'max'", "7:35"},
        // Value bindings (a length passed as data) are replicated inputs.
        ErrCase{"ValueBindingWithShard", withImpl("inputs:\n  n: {value: seq, shard: 1}\n"),
                "'value' binds a replicated integer input; it cannot be combined with 'shard'", "7:7"},
        ErrCase{"EachWithoutMax", withImpl("inputs:\n  lengths: {each: {min: 1}}\n"),
                "'each' needs both 'min' and 'max'", "7:19"},
        ErrCase{"ValueBindingOnAnOutput", withImpl("outputs:\n  y: {value: seq}\n"),
                "value bindings ('values', 'value', 'fill', 'each', 'elements') describe inputs only", "7:6"},
        // Offsets given element by element (cu_seqlens).
        ErrCase{"ElementsNotAList", withImpl("inputs:\n  cu: {elements: seq}\n"),
                "'elements' must be a non-empty list of integer expressions", "7:18"},
        ErrCase{"ElementsEmpty", withImpl("inputs:\n  cu: {elements: []}\n"),
                "'elements' must be a non-empty list of integer expressions", "7:18"},
        ErrCase{"ElementsEntryNotAnExpression", withImpl("inputs:\n  cu: {elements: [0, {a: 1}]}\n"),
                "each entry of 'elements' must be an integer expression, got a map", "7:22"},
        ErrCase{"ElementsWithValue", withImpl("inputs:\n  cu: {elements: [0, seq], value: seq}\n"),
                "gives both 'value' and 'elements'; choose one", "7:8"}),
    [](const ::testing::TestParamInfo<ErrCase> &i) { return std::string(i.param.name); });

TEST(SpecLoader, ValueBindingsGiveTheElementsOfAnIntegerInput) {
  auto s = parseSpec(withImpl("inputs:\n  seq_len: {value: \"seq - 1\"}\n  lengths: {each: {min: 1, max: seq}}\n"),
                     "spec.yaml");
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  const Placement &v = placementOf(s->inputs, "seq_len");
  EXPECT_TRUE(v.valueBinding);
  EXPECT_TRUE(v.exactValue);
  EXPECT_EQ(v.kind, Placement::Kind::Replicated);
  ASSERT_TRUE(v.values.has_value());
  EXPECT_EQ(evalWith(v.values->first, {{"seq", 5}}).asInt(), 4);
  EXPECT_EQ(evalWith(v.values->second, {{"seq", 5}}).asInt(), 4);
  const Placement &e = placementOf(s->inputs, "lengths");
  EXPECT_TRUE(e.valueBinding);
  EXPECT_FALSE(e.exactValue); // each element its own unknown in [1, seq]
  EXPECT_EQ(evalWith(e.values->first, {{"seq", 5}}).asInt(), 1);
  EXPECT_EQ(evalWith(e.values->second, {{"seq", 5}}).asInt(), 5);
}

TEST(SpecLoader, ElementsGiveEachElementOfAnOffsetsTensor) {
  auto s = parseSpec(withImpl("inputs:\n  cu_seqlens: {elements: [0, seq, \"2 * seq\"]}\n"), "spec.yaml");
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  const Placement &c = placementOf(s->inputs, "cu_seqlens");
  EXPECT_TRUE(c.valueBinding);
  EXPECT_TRUE(c.exactValue);
  ASSERT_EQ(c.elements.size(), 3u);
  EXPECT_EQ(evalWith(c.elements[0], {{"seq", 5}}).asInt(), 0);
  EXPECT_EQ(evalWith(c.elements[1], {{"seq", 5}}).asInt(), 5);
  EXPECT_EQ(evalWith(c.elements[2], {{"seq", 5}}).asInt(), 10);
}

TEST(SpecLoader, DefaultsWhenOptionalSectionsAreAbsent) {
  auto s = parseSpec(withImpl(""), "spec.yaml");
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  EXPECT_EQ(s->dir, ".");
  EXPECT_EQ(s->reference, "ref.onnx");
  EXPECT_TRUE(s->symbols.empty());
  EXPECT_TRUE(s->constraints.empty());
  EXPECT_TRUE(s->inputs.empty());
  EXPECT_TRUE(s->outputs.empty());
}

TEST(SpecLoader, ErrorsAreUserErrors) {
  auto s = parseSpec("shardproof: 3\n", "spec.yaml");
  ASSERT_FALSE(bool(s));
  EXPECT_EQ(takeError(s.takeError()).kind, ErrorKind::User);
}

class TempDir {
public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("shardproof-spec-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path &path() const { return path_; }

private:
  std::filesystem::path path_;
};

TEST(SpecLoader, LoadsFromAFileAndResolvesPathsAgainstItsDirectory) {
  TempDir dir;
  std::filesystem::path file = dir.path() / "mlp.yaml";
  {
    std::ofstream out(file);
    out << kGoodSpec;
  }
  auto s = loadSpec(file.string());
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  EXPECT_EQ(s->path, file.string());
  EXPECT_EQ(s->dir, dir.path().string());
  EXPECT_EQ(s->reference, (dir.path() / "mlp_ref.onnx").string());
  EXPECT_EQ(s->rankPaths.at(1), (dir.path() / "mlp_rank1.onnx").string());
  EXPECT_EQ(s->inputs.size(), 9u);
}

TEST(SpecLoader, FileErrorsNameTheFile) {
  TempDir dir;
  std::filesystem::path file = dir.path() / "bad.yaml";
  {
    std::ofstream out(file);
    out << "shardproof: 1\nreference: r.onnx\nimplementaton: {}\n";
  }
  EXPECT_THAT(errorOf(loadSpec(file.string())),
              HasSubstr(file.string() + ":3:1: error: unknown key 'implementaton'"));
}

TEST(SpecLoader, MissingFileNamesThePath) {
  std::string missing = "/nonexistent/dir/spec.yaml";
  EXPECT_THAT(errorOf(loadSpec(missing)),
              HasSubstr("cannot read spec file '/nonexistent/dir/spec.yaml'"));
  TempDir dir;
  EXPECT_THAT(errorOf(loadSpec(dir.path().string())), HasSubstr("is a directory"));
}

} // namespace

// A training step: each gradient output sits where its parameter does, unless
// the spec places it itself.
TEST(SpecLoader, GradsLikeParamsPlacesEachGradientLikeItsParameter) {
  auto s = parseSpec(withImpl("grads: like_params\ninputs:\n  w: {shard: 1, split: even}\n  b: replicated\n"
                              "  e: {relation: \"concat(e@*, axis=0)\"}\n  k: {replicated: true, as: k_local}\n"
                              "outputs:\n  \"grad:b\": partial\n"),
                     "spec.yaml");
  ASSERT_TRUE(bool(s)) << errorOf(std::move(s));
  auto w = s->outputPlacement("grad:w");
  ASSERT_TRUE(bool(w) && w->has_value());
  EXPECT_EQ((*w)->kind, Placement::Kind::Shard);
  EXPECT_EQ((*w)->axis, 1);
  auto b = s->outputPlacement("grad:b"); // its own placement wins
  ASSERT_TRUE(bool(b) && b->has_value());
  EXPECT_EQ((*b)->kind, Placement::Kind::Partial);
  auto k = s->outputPlacement("grad:k"); // renamed on the ranks like its parameter
  ASSERT_TRUE(bool(k) && k->has_value());
  EXPECT_EQ((*k)->as, "grad:k_local");
  auto none = s->outputPlacement("grad:nothing");
  ASSERT_TRUE(bool(none));
  EXPECT_FALSE(none->has_value());
  auto e = s->outputPlacement("grad:e");
  EXPECT_THAT(errorOf(std::move(e)), HasSubstr("whose placement is a relation expression"));
}
