// One test per class of unusable input: each gets one clear message and exit 3,
// never a crash and never a verdict. An unsupported operator is valid input we
// cannot reason about: UNKNOWN (exit 2) naming the node.
#include "Run.h"
#include "ScratchDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using shardproof::testing::example;
using shardproof::testing::runShardproof;
namespace fs = std::filesystem;

namespace {

// A scratch directory holding copies of the generated example models.
class BadInput : public shardproof::testing::ScratchDir {
protected:
  BadInput() : ScratchDir("bad") {}
  void SetUp() override {
    ScratchDir::SetUp();
    for (const char *m : {"mlp_ref.onnx", "mlp_tp2_rank0.onnx", "mlp_tp2_rank1.onnx"})
      fs::copy_file(example(m), dir / m, fs::copy_options::overwrite_existing);
  }

  std::string spec(const std::string &inputs, const std::string &extra = "") {
    return "shardproof: 1\nreference: mlp_ref.onnx\nimplementation:\n  world_size: 2\n"
           "  ranks: mlp_tp2_rank{r}.onnx\nsymbols:\n  batch: {min: 1}\n  seq: {min: 1}\n" +
           extra + "inputs:\n" + inputs + "outputs:\n  y: replicated\n";
  }
  const std::string goodInputs = "  x: replicated\n  w1: {shard: 1}\n  b1: {shard: 0}\n  w2: {shard: 0}\n"
                                 "  b2: replicated\n";
};

} // namespace

TEST_F(BadInput, MissingSpecFile) {
  auto r = runShardproof("check " + (dir / "nope.yaml").string());
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("nope.yaml"), std::string::npos) << r.out;
}

TEST_F(BadInput, MissingRankModelNamesTheRank) {
  fs::remove(dir / "mlp_tp2_rank1.onnx");
  auto r = runShardproof("check " + write("s.yaml", spec(goodInputs)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
}

TEST_F(BadInput, CorruptOnnxNamesTheFile) {
  std::ofstream(dir / "mlp_ref.onnx", std::ios::trunc) << "this is not a protobuf \x01\x02\xff";
  auto r = runShardproof("check " + write("s.yaml", spec(goodInputs)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("mlp_ref.onnx"), std::string::npos) << r.out;
}

TEST_F(BadInput, TruncatedOnnx) {
  auto size = fs::file_size(dir / "mlp_tp2_rank0.onnx");
  fs::resize_file(dir / "mlp_tp2_rank0.onnx", size / 2);
  auto r = runShardproof("check " + write("s.yaml", spec(goodInputs)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("mlp_tp2_rank0.onnx"), std::string::npos) << r.out;
}

TEST_F(BadInput, YamlSyntaxErrorHasLineAndColumn) {
  std::string text = spec(goodInputs);
  text.replace(text.find("  w2: {shard: 0}"), 16, "  w2: {shard: 0");
  auto r = runShardproof("check " + write("s.yaml", text));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("s.yaml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(":1"), std::string::npos) << r.out; // line 1x
}

TEST_F(BadInput, UnknownTensorNameSuggestsTheClosest) {
  std::string inputs = goodInputs;
  inputs.replace(inputs.find("w2:"), 3, "w_2:");
  auto r = runShardproof("check " + write("s.yaml", spec(inputs)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("'w_2'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did you mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'w2'"), std::string::npos) << r.out;
}

TEST_F(BadInput, ReferenceInputWithoutPlacement) {
  std::string inputs = goodInputs;
  inputs.erase(inputs.find("  b2: replicated\n"), 17);
  auto r = runShardproof("check " + write("s.yaml", spec(inputs)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("'b2'"), std::string::npos) << r.out;
}

TEST_F(BadInput, WorldSizeMismatchWithTheModels) {
  std::string text = spec(goodInputs);
  text.replace(text.find("world_size: 2"), 13, "world_size: 3");
  auto r = runShardproof("check " + write("s.yaml", text));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("rank 2"), std::string::npos) << r.out;
}

TEST_F(BadInput, UnsatisfiableConstraintsAreRejectedNotVacuouslyVerified) {
  auto r = runShardproof("check " + write("s.yaml", spec(goodInputs, "constraints: [\"seq < 1\"]\n")));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("no size"), std::string::npos) << r.out;
}

TEST_F(BadInput, UnknownOperatorIsUnknownNamingTheNode) {
  for (const char *m : {"mlp_unknown_op_rank0.onnx", "mlp_unknown_op_rank1.onnx"})
    fs::copy_file(example(m), dir / m, fs::copy_options::overwrite_existing);
  std::string text = spec(goodInputs);
  text.replace(text.find("mlp_tp2_rank{r}"), 15, "mlp_unknown_op_rank{r}");
  auto r = runShardproof("check " + write("s.yaml", text));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find("UNKNOWN"), std::string::npos) << r.out;
  // The headline names the rank node where reasoning stopped and its module.
  EXPECT_NE(r.out.find("UNKNOWN at module act: rank 0 node '/act/Mystery' (shardproof::Mystery)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("counterexample"), std::string::npos) << "UNKNOWN has no counterexample\n" << r.out;
}

TEST_F(BadInput, InputPatternThatMatchesNothingIsAnError) {
  // A typo in a layer pattern must not silently place nothing.
  auto r = runShardproof("check " + write("s.yaml", spec(goodInputs + "  \"blocks.*.w\": replicated\n")));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("pattern 'blocks.*.w' matches no input"), std::string::npos) << r.out;
}

TEST_F(BadInput, TwoPatternsClaimingOneTensorAreAmbiguous) {
  std::string inputs = "  x: replicated\n  \"w*\": {shard: 1}\n  \"*1\": {shard: 0}\n  \"*2\": replicated\n";
  auto r = runShardproof("check " + write("s.yaml", spec(inputs)));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("matches both"), std::string::npos) << r.out;
}

TEST_F(BadInput, PatternsPlaceEveryMatchingWeight) {
  // w1/b1 by one pattern each side, exact names for the rest: same as goodInputs.
  std::string inputs = "  x: replicated\n  \"w1*\": {shard: 1}\n  \"b1*\": {shard: 0}\n  w2: {shard: 0}\n  b2: replicated\n";
  auto r = runShardproof("check " + write("s.yaml", spec(inputs)));
  EXPECT_EQ(r.exitCode, 0) << r.out;
}

// `elements:` lists every element of a 1-D tensor; a list of the wrong length
// is a spec mistake, named with the tensor's shape (exit 3), never a guess.
TEST_F(BadInput, ElementsOfTheWrongCountNameTheShape) {
  for (const char *m : {"varlen_ref.onnx", "varlen_ok.onnx"})
    fs::copy_file(example(m), dir / m, fs::copy_options::overwrite_existing);
  std::string text = "shardproof: 1\nreference: varlen_ref.onnx\nimplementation:\n  world_size: 1\n"
                     "  ranks: [varlen_ok.onnx]\nsymbols: {s1: {min: 1}, s2: {min: 1}, total: {min: 2}}\n"
                     "constraints: [\"total == s1 + s2\"]\ninputs:\n"
                     "  x1: \"slice(x@0, axis=0, start=0, end=s1)\"\n"
                     "  x2: \"slice(x@0, axis=0, start=s1, end=s1 + s2)\"\n"
                     "  cu_seqlens: {elements: [0, s1]}\n  wq: replicated\n  wk: replicated\n  wv: replicated\n"
                     "outputs:\n  y1: \"slice(y@0, axis=0, start=0, end=s1)\"\n"
                     "  y2: \"slice(y@0, axis=0, start=s1, end=s1 + s2)\"\n";
  auto r = runShardproof("check " + write("s.yaml", text));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("spec input 'cu_seqlens' lists 2 'elements', but its shape is [4]"), std::string::npos)
      << r.out;
}
