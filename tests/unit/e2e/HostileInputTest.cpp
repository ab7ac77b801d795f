// Hostile and broken inputs: each gets one clear message and exit 3, never a
// crash, a hang or a verdict, and never a half-written output file. The models
// are tiny ONNX graphs built here (y = Relu(x) on every rank) and then broken
// in one way each; BadInputTest.cpp holds the cases on the generated examples.
#include "HostileFixture.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

using shardproof::testing::example;
using shardproof::testing::RunResult;
namespace fs = std::filesystem;

using namespace shardproof::testing::hostile;

// The control: the tiny models as built here are fine, so each case below
// fails for its one broken part only.
TEST_F(Hostile, TheUnbrokenTinyModelsAreVerified) {
  models();
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 0) << r.out;
}

// --- ONNX files ---------------------------------------------------------------

TEST_F(Hostile, EmptyRankFileIsNotAModel) {
  models();
  write("rank1.onnx", "");
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "rank1.onnx: the file is empty");
}

TEST_F(Hostile, RandomBytesAreNotAModel) {
  // Random bytes sometimes parse as a protobuf of unknown fields: then the
  // model has no graph. Either way: the file named, exit 3.
  models();
  std::mt19937 gen(6);
  std::string junk;
  for (int i = 0; i < 4096; ++i)
    junk += static_cast<char>(gen() & 0xff);
  write("rank0.onnx", junk);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "rank0.onnx: ");
  EXPECT_TRUE(r.out.find("not an ONNX model") != std::string::npos || r.out.find("has no graph") != std::string::npos)
      << r.out;
}

TEST_F(Hostile, InitializerWithDimsNearInt64MaxIsRejectedNotAllocated) {
  // Used to crash: the loader reserved room for 2^63 - 1 elements before
  // looking at the data.
  Model m = relu();
  m.initializer("huge", {std::numeric_limits<int64_t>::max(), 2}, onnx::TensorProto::FLOAT);
  models(relu(), m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "rank1.onnx: initializer 'huge'");
  EXPECT_SAYS(r, "overflows");
}

TEST_F(Hostile, InputWhoseElementCountOverflowsInt64IsRejected) {
  Model m;
  m.input("x", {"4611686018427387904", "4"}).output("y", {"4611686018427387904", "4"});
  m.node("/act/Relu", "Relu", {"x"}, {"y"});
  models(m, m, m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "ref.onnx: tensor 'x'");
  EXPECT_SAYS(r, "overflows");
}

TEST_F(Hostile, NegativeSizeInAConstantReshapeShapeIsRejected) {
  // Reshape allows -1 ("infer this dim") and nothing below it.
  Model m;
  m.input("x", {"n"}).output("y", {"n"});
  auto &t = m.initializer("shape", {2}, onnx::TensorProto::INT64);
  t.add_int64_data(-2);
  t.add_int64_data(-1);
  m.node("/view/Reshape", "Reshape", {"x", "shape"}, {"y"});
  models(m, m, m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "error: reference model " + path("ref.onnx") +
                    ": node '/view/Reshape' (Reshape): the target shape has negative size -2 on axis 0");
}

TEST_F(Hostile, CyclicGraphNamesANodeOnTheCycle) {
  Model m;
  m.input("x", {"n"}).output("y", {"n"});
  m.node("/a/Add", "Add", {"x", "b"}, {"a"});
  m.node("/b/Relu", "Relu", {"a"}, {"b"});
  m.node("/c/Relu", "Relu", {"a"}, {"y"});
  models(relu(), m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "rank1.onnx: the graph has a cycle through node '/a/Add'");
}

TEST_F(Hostile, DanglingTensorNameSuggestsTheNearest) {
  Model m;
  m.input("x", {"n"}).output("y", {"n"});
  m.node("/act/Relu", "Relu", {"x_"}, {"y"});
  models(m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "rank0.onnx: node '/act/Relu' (Relu) reads 'x_', which no node, graph input or initializer defines");
  EXPECT_SAYS(r, "did you mean 'x'");
}

TEST_F(Hostile, NodeInADomainTheModelDoesNotImport) {
  Model m;
  m.input("x", {"n"}).output("y", {"n"});
  m.node("/act/Relu", "Relu", {"x"}, {"y"}, "com.evil");
  models(relu(), m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "rank1.onnx: node '/act/Relu' (Relu) is in domain 'com.evil', which the model does not import");
}

TEST_F(Hostile, OpsetVersionThatNoOnnxReleaseHasIsRejected) {
  Model m = relu();
  m.m.mutable_opset_import(0)->set_version(999);
  models(relu(), relu(), m);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "ref.onnx: imports opset 999 of the default ONNX domain");
}

// --- Rank graphs ----------------------------------------------------------------

TEST_F(Hostile, CollectivesInDifferentOrdersWouldDeadlock) {
  // Rank 0: AllReduce(a) then AllGather(b); rank 1 the other way round. On a
  // cluster both ranks block in different collectives: an error, not a proof.
  auto rank = [](bool reduceFirst) {
    Model m;
    m.opset("com.microsoft", 1);
    m.input("x", {"n"}).output("y", {"n"});
    m.node("/a/Relu", "Relu", {"x"}, {"a"});
    m.node("/b/Relu", "Relu", {"x"}, {"b"});
    auto reduce = [&] { m.node("/r/AllReduce", "AllReduce", {"a"}, {"ra"}, "com.microsoft"); };
    auto gather = [&] {
      auto &n = m.node("/g/AllGather", "AllGather", {"b"}, {"gb"}, "com.microsoft");
      auto *a = n.add_attribute();
      a->set_name("group_size");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(2);
    };
    if (reduceFirst) {
      reduce();
      gather();
    } else {
      gather();
      reduce();
    }
    m.node("/out/Relu", "Relu", {"x"}, {"y"});
    m.output("ra", {"n"}).output("gb", {"n"});
    return m;
  };
  models(rank(true), rank(false));
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "collectives differ across ranks");
  EXPECT_SAYS(r, "'/r/AllReduce'");
  EXPECT_SAYS(r, "'/g/AllGather'");
  EXPECT_SAYS(r, "deadlock");
}

TEST_F(Hostile, RanksListShorterThanWorldSize) {
  models();
  auto r = checkWith("  world_size: 2\n  ranks: rank{r}.onnx\n",
                     "  world_size: 4\n  ranks: [rank0.onnx, rank1.onnx]\n");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:5:10: error: 'ranks' lists 2 files but world_size is 4");
}

TEST_F(Hostile, RankFilesMissingForTheDeclaredWorldSize) {
  models();
  auto r = checkWith("world_size: 2", "world_size: 4");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:5:10: error: rank 2 model");
  EXPECT_SAYS(r, "rank2.onnx' does not exist");
}

// --- Spec YAML ----------------------------------------------------------------

TEST_F(Hostile, DuplicateYamlKeyIsAnErrorNotLastOneWins) {
  models();
  auto r = checkWith("  x: replicated\n", "  x: replicated\n  x: {shard: 0}\n");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:10:3: error: duplicate key 'x' in 'inputs' (first given at line 9)");
}

TEST_F(Hostile, WrongYamlTypeNamesWhatWasExpected) {
  models();
  auto r = checkWith("world_size: 2", "world_size: [2]");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:4:15: error: 'world_size' must be an integer, got a list");
}

TEST_F(Hostile, NegativeSymbolBoundIsRejected) {
  // Symbols are sizes: `min: -1` would let the check range over negative dims.
  models();
  auto r = checkWith("n: {min: 1}", "n: {min: -1}");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:7:12: error: symbol 'n': 'min' is -1, but a size cannot be negative");
}

TEST_F(Hostile, BinaryGarbageAsTheSpec) {
  models();
  auto r = run("check " + write("s.yaml", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:");
  EXPECT_SAYS(r, "error: ");
}

TEST_F(Hostile, DeeplyNestedYamlIsAnErrorNotAStackOverflow) {
  auto r = run("check " + write("s.yaml", "world_size: 2\nx: " + std::string(100000, '[')));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:2:");
  EXPECT_SAYS(r, "error: invalid YAML: nested more than 499 levels deep");
}

// Found by fuzzing: yaml-cpp 0.7's LoadAll loops forever, allocating as it
// goes, on a stray ',' at the top level; a one-character typo hung the check.
TEST_F(Hostile, StrayCommaAtTheTopLevelIsAnErrorNotAHang) {
  auto r = run("check " + write("s.yaml", ",\n" + spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:1:1: error: the spec file holds more than one YAML document");
}

TEST_F(Hostile, DeeplyNestedRelationIsAnErrorNotAStackOverflow) {
  models();
  std::string deep;
  for (int i = 0; i < 20000; ++i)
    deep += "sum(";
  auto r = checkWith("  y: replicated\n", "  y: \"" + deep + "y@0\"\n");
  EXPECT_EQ(r.exitCode, 3) << r.out.substr(0, 400);
  EXPECT_SAYS(r, "nested more than 200 levels deep");
}

// --- Relation expressions -------------------------------------------------------

TEST_F(Hostile, RelationNamingARankBeyondTheWorldSize) {
  models();
  auto r = checkWith("  y: replicated\n", "  y: \"sum(y@0, y@7)\"\n");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:11:18: error: rank 7 out of range for world_size 2");
}

TEST_F(Hostile, RelationNamingAnUnknownTensorSuggestsTheNearest) {
  models();
  auto r = checkWith("  y: replicated\n", "  y: \"yy@0\"\n");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:11:7: error: rank 0 has no tensor 'yy'; did you mean 'y'");
}

TEST_F(Hostile, RelationThatDoesNotParse) {
  models();
  auto r = checkWith("  y: replicated\n", "  y: \"concat(y@0, y@1, axis=\"\n");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "s.yaml:11:");
  EXPECT_SAYS(r, "error: ");
}

// --- Output files -----------------------------------------------------------------

TEST_F(Hostile, FailedRunLeavesExistingOutputFilesUntouched) {
  models();
  write("rank1.onnx", "garbage");
  write("report.json", "previous report\n");
  write("rel.yaml", "previous relations\n");
  std::string s = write("s.yaml", spec());
  auto c = run("check " + s + " --json " + path("report.json"));
  EXPECT_EQ(c.exitCode, 3) << c.out;
  auto i = run("infer " + s + " -o " + path("rel.yaml") + " --json " + path("report.json"));
  EXPECT_EQ(i.exitCode, 3) << i.out;
  EXPECT_EQ(read("report.json"), "previous report\n");
  EXPECT_EQ(read("rel.yaml"), "previous relations\n");
  for (auto &e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

TEST_F(Hostile, UnwritableOutputFailsBeforeTheCheck) {
  // A typo in the directory must not cost a long check first.
  models();
  auto r = run("check " + write("s.yaml", spec()) + " --json " + path("no-such-dir/report.json"));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "cannot write '" + path("no-such-dir/report.json") + "'");
  EXPECT_EQ(r.out.find("VERIFIED"), std::string::npos) << "no verdict before the error\n" << r.out;
}

// --- Solver limits and the command line ------------------------------------------

TEST_F(Hostile, ExhaustedTimeBudgetIsUnknownNamingTheBudget) {
  auto r = run("check " + example("mlp_tp2.yaml") + " --time-budget 0");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_SAYS(r, "UNKNOWN");
  EXPECT_SAYS(r, "time budget of 0 s");
}

TEST_F(Hostile, TinySolverTimeoutIsUnknownNamingTheObligationNeverAnInternalError) {
  // Used to end in exit 4 ("internal error: Z3: canceled") now and then: the
  // watchdog's interrupt could land after the query had returned and cancel
  // the next unrelated Z3 call.
  auto r = run("check " + example("gpt_tp2.yaml") + " --solver-timeout 0 -q");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_SAYS(r, "UNKNOWN: could not decide that ");
  EXPECT_SAYS(r, "solver timeout after 0 ms");
}

TEST_F(Hostile, NonNumericOrNegativeSolverLimitIsBadInput) {
  models();
  auto r = run("check " + write("s.yaml", spec()) + " --solver-timeout soon");
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "--solver-timeout = soon");
  auto b = run("check " + path("s.yaml") + " --time-budget -1");
  EXPECT_EQ(b.exitCode, 3) << b.out;
  EXPECT_SAYS(b, "--time-budget: must be a number of seconds, 0 or more; got '-1'");
}
