// Relation files through the real binary: `infer` writes one, `check --relations`
// accepts it unchanged (exit 0), names the first changed tensor with its old and
// new relation (exit 5), and rejects a malformed file at line:col (exit 3). The
// committed relation files of the shipped examples are re-checked here, so a
// change in how a relation is found or rendered shows up as a failing test.
#include "Run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using shardproof::testing::example;
using shardproof::testing::runShardproof;
namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeAll(const fs::path &p, const std::string &text) { std::ofstream(p, std::ios::binary) << text; }

class RelationFile : public ::testing::Test {
protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) / ("shardproof-rel-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  // Runs `infer` on a shipped example and returns the file's text.
  std::string infer(const std::string &spec, const fs::path &out) {
    auto r = runShardproof("infer " + example(spec) + " -o " + out.string());
    EXPECT_EQ(r.exitCode, 0) << r.out;
    EXPECT_NE(r.out.find("wrote "), std::string::npos) << r.out;
    return readAll(out);
  }
};

} // namespace

TEST_F(RelationFile, InferThenCheckIsUnchanged) {
  fs::path file = dir / "mlp.relations.yaml";
  std::string text = infer("mlp_tp2.yaml", file);
  EXPECT_NE(text.find("shardproof_relations: 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("verdict: VERIFIED\n"), std::string::npos) << text;
  EXPECT_NE(text.find("{tensor: /fc1/MatMul_output_0, module: fc1, op: MatMul, status: matched, relation: "
                      "\"concat(/fc1/MatMul_output_0@0, /fc1/MatMul_output_0@1, axis=2)\"}"),
            std::string::npos)
      << text;
  // Constant nodes are left out on purpose (see docs/relation-files.md).
  EXPECT_EQ(text.find("op: Constant"), std::string::npos) << text;

  auto r = runShardproof("check " + example("mlp_tp2.yaml") + " --relations " + file.string());
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find(": unchanged"), std::string::npos) << r.out;
}

TEST_F(RelationFile, OutputIsByteIdenticalAcrossRunsAndDirectories) {
  std::string first = infer("gpt_tp2.yaml", dir / "a.yaml");
  std::string second = infer("gpt_tp2.yaml", dir / "b.yaml");
  EXPECT_EQ(first, second);
  // The same spec reached through another path: only file names are recorded.
  auto r = runShardproof("infer " + example("../examples/gpt_tp2.yaml") + " -q -o " + (dir / "c.yaml").string());
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_EQ(first, readAll(dir / "c.yaml"));
  EXPECT_EQ(first.find(SHARDPROOF_SOURCE_DIR), std::string::npos) << "absolute path in the file:\n" << first;
  EXPECT_FALSE(fs::exists(dir / "a.yaml.tmp")); // written via a temporary, which is gone
}

TEST_F(RelationFile, AnEditedRelationIsReportedWithOldAndNew) {
  fs::path file = dir / "mlp.relations.yaml";
  std::string text = infer("mlp_tp2.yaml", file);
  const std::string now = "concat(/act/Erf_output_0@0, /act/Erf_output_0@1, axis=2)";
  const std::string old = "sum(/act/Erf_output_0@0, /act/Erf_output_0@1)";
  size_t at = text.find(now);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, now.size(), old);
  // A later edit too: the report must name the first one in graph order.
  const std::string y = "relation: \"y@*\"";
  size_t yAt = text.find(y);
  ASSERT_NE(yAt, std::string::npos) << text;
  text.replace(yAt, y.size(), "relation: \"y@0\"");
  writeAll(file, text);

  auto r = runShardproof("check " + example("mlp_tp2.yaml") + " --relations " + file.string());
  EXPECT_EQ(r.exitCode, 5) << r.out;
  EXPECT_NE(r.out.find("first change: /act/Erf_output_0 (module act, Erf)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recorded: " + old), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("now:      " + now), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("also changed: y"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RELATIONS CHANGED"), std::string::npos) << r.out;
  // The first change points at its line in the file (line 16: 7 header lines, 5 inputs, 3 rows before).
  EXPECT_NE(r.out.find(file.string() + ":16:5"), std::string::npos) << r.out;

  auto q = runShardproof("check -q " + example("mlp_tp2.yaml") + " --relations " + file.string());
  EXPECT_EQ(q.exitCode, 5) << q.out;
  EXPECT_NE(q.out.find("RELATIONS CHANGED from " + file.string() + ": 2 changed, 0 added, 0 removed; first: "
                       "/act/Erf_output_0"),
            std::string::npos)
      << q.out;
}

TEST_F(RelationFile, AddedAndRemovedTensorsAreListed) {
  fs::path file = dir / "mlp.relations.yaml";
  std::string text = infer("mlp_tp2.yaml", file);
  // Drop the line of /act/Div_output_0 and record a tensor the reference does not have.
  size_t at = text.find("  - {tensor: /act/Div_output_0");
  ASSERT_NE(at, std::string::npos) << text;
  text.erase(at, text.find('\n', at) + 1 - at);
  text += "  - {tensor: /old/Gone_output_0, module: old, op: Relu, status: matched, relation: \"g@*\"}\n";
  writeAll(file, text);

  auto r = runShardproof("check " + example("mlp_tp2.yaml") + " --relations " + file.string());
  EXPECT_EQ(r.exitCode, 5) << r.out;
  EXPECT_NE(r.out.find("0 changed, 1 added, 1 removed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("added (not in the file): /act/Div_output_0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("removed (in the file, not in the reference now): /old/Gone_output_0"), std::string::npos)
      << r.out;
}

TEST_F(RelationFile, RefutedVerdictKeepsItsExitCode) {
  // Recorded from the correct MLP, checked against the buggy one: REFUTED (1)
  // wins over "relations changed" (5), and the diff is still shown.
  fs::path file = dir / "mlp.relations.yaml";
  infer("mlp_tp2.yaml", file);
  auto r = runShardproof("check " + example("mlp_bias_before_reduce.yaml") + " --no-table --relations " +
                         file.string());
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("first change: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recorded with verdict VERIFIED; the verdict now is REFUTED"), std::string::npos) << r.out;
}

TEST_F(RelationFile, MalformedFileIsBadInputAtLineAndColumn) {
  struct Case {
    const char *text;
    const char *mustSay;
  } cases[] = {
      {"shardproof_relations: 1\nrelations:\n  - {tensor: x, status: inptu, relation: \"x\"}\n",
       ":3:25: error: unknown status 'inptu'; did you mean 'input'?"},
      {"shardproof_relations: 1\nrelations:\n  - {tensor: x, stats: input, relation: \"x\"}\n",
       ":3:17: error: unknown key 'stats' in a relation entry; did you mean 'status'?"},
      {"shardproof_relations: 1\nrelations:\n  - {tensor: x, status: input, relation: \"x\"}\n"
       "  - {tensor: x, status: input, relation: \"x\"}\n",
       ":4:5: error: tensor 'x' is listed twice (first at line 3)"},
      {"shardproof_relations: 1\nrelations:\n\t- x\n", ":3:2: error: invalid YAML"},
      {"shardproof_relations: 2\nrelations: []\n", ":1:23: error: unsupported relation file version '2'"},
      {"relations: []\n", ":1:1: error: the relations file is missing 'shardproof_relations: 1'"},
  };
  fs::path file = dir / "bad.yaml";
  for (const Case &c : cases) {
    writeAll(file, c.text);
    auto r = runShardproof("check " + example("mlp_tp2.yaml") + " --relations " + file.string());
    EXPECT_EQ(r.exitCode, 3) << c.text << r.out;
    EXPECT_NE(r.out.find(file.string() + c.mustSay), std::string::npos) << "expected: " << c.mustSay << "\n" << r.out;
    // Rejected before the check runs: no verdict.
    EXPECT_EQ(r.out.find("VERIFIED"), std::string::npos) << r.out;
  }
  auto missing = runShardproof("check " + example("mlp_tp2.yaml") + " --relations " + (dir / "nope.yaml").string());
  EXPECT_EQ(missing.exitCode, 3) << missing.out;
  EXPECT_NE(missing.out.find("cannot read relations file"), std::string::npos) << missing.out;
}

TEST_F(RelationFile, InferNeedsAnOutputAndHelpExplainsIt) {
  auto r = runShardproof("infer " + example("mlp_tp2.yaml"));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("--output is required"), std::string::npos) << r.out;
  auto h = runShardproof("infer --help");
  EXPECT_EQ(h.exitCode, 0);
  EXPECT_NE(h.out.find("check SPEC --relations FILE"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("5  relations changed"), std::string::npos) << h.out;
}

// The relation files committed next to the shipped examples: each must still
// match. If one fails after a deliberate change in how relations are found or
// rendered, review the diff and regenerate it with
//   build/shardproof infer specs/examples/X.yaml -o specs/examples/X.relations.yaml
class Committed : public ::testing::TestWithParam<const char *> {};

TEST_P(Committed, StillMatches) {
  std::string spec = std::string(GetParam()) + ".yaml";
  std::string file = example(std::string(GetParam()) + ".relations.yaml");
  ASSERT_TRUE(fs::exists(file)) << file;
  auto r = runShardproof("check " + example(spec) + " --no-table --relations " + file);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find(": unchanged"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Examples, Committed, ::testing::Values("gpt_tp2", "llama_tp2"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });
