// Collectives as they appear in sequence-parallel code: AllGather before a
// replicated block, ReduceScatter after a row-parallel one, AllToAll between
// sequence and head sharding. Each correct use is VERIFIED for every size; the
// usual slips are REFUTED or rejected with both ranks named.
#include "GraphBuilder.h"
#include "SpecText.h"

#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::Verdict;

namespace {

constexpr int64_t D = 4;

spec::Spec parse(const std::string &yaml) { return shardproof::testing::parseSpecText(yaml, "c.yaml"); }

llvm::Expected<relation::Result> run(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &s) {
  return relation::verify(ref, ranks, s);
}

relation::Result check(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &s) {
  auto r = run(ref, ranks, s);
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : shardproof::toString(r.takeError()));
  return r ? *r : relation::Result{};
}

std::map<std::string, ir::Attribute> axis(int64_t a) { return {{"axis", GraphBuilder::intAttr(a)}}; }

ir::Graph linearRef() {
  GraphBuilder b("ref.onnx");
  b.input("x", {"seq", D}).input("w", {D, D});
  b.node("MatMul", {"x", "w"}, {"y"}, "/proj/MatMul").output("y");
  return b.build();
}

// Sequence parallel: x is split on seq; each rank gathers it before the matmul.
ir::Graph gatherRank(int r, int64_t gatherAxis) {
  GraphBuilder b("rank" + std::to_string(r) + ".onnx");
  b.input("x", {"half", D}).input("w", {D, D});
  b.node("AllGather", {"x"}, {"g"}, "/proj/AllGather", axis(gatherAxis), "com.microsoft");
  b.node("MatMul", {"g", "w"}, {"y"}, "/proj/MatMul").output("y");
  return b.build();
}

const char *kGatherSpec = R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {seq: {min: 2}, half: {min: 1}}
constraints: ["seq == 2 * half"]
inputs: {x: {shard: 0, split: even}, w: replicated}
outputs: {y: replicated}
)";

} // namespace

TEST(Collectives, AllGatherOfSequenceShardsIsVerified) {
  auto r = check(linearRef(), {gatherRank(0, 0), gatherRank(1, 0)}, parse(kGatherSpec));
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

TEST(Collectives, AllGatherOnTheWrongAxisIsRefuted) {
  // Gathering on the hidden axis gives [seq/2, 2*D]: the matmul no longer fits.
  auto r = check(linearRef(), {gatherRank(0, 1), gatherRank(1, 1)}, parse(kGatherSpec));
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  const relation::Failure &f = r.failures.front();
  EXPECT_EQ(f.module, "proj");
  EXPECT_NE(f.message.find("inner dims"), std::string::npos) << f.message << " / " << r.reason;
  EXPECT_TRUE(f.cex.has_value());
}

TEST(Collectives, RanksGatheringOnDifferentAxesAreRejectedNamingBoth) {
  auto r = run(linearRef(), {gatherRank(0, 0), gatherRank(1, 1)}, parse(kGatherSpec));
  ASSERT_FALSE(static_cast<bool>(r));
  auto e = takeError(r.takeError());
  EXPECT_EQ(e.kind, ErrorKind::User);
  EXPECT_NE(e.text.find("rank 0"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("rank 1"), std::string::npos) << e.text;
}

namespace {

// Row-parallel linear whose partial sums are reduce-scattered over the sequence.
ir::Graph rowRef() {
  GraphBuilder b("ref.onnx");
  b.input("x", {"seq", 8}).input("w", {8, D});
  b.node("MatMul", {"x", "w"}, {"y"}, "/o_proj/MatMul").output("y");
  return b.build();
}
ir::Graph reduceScatterRank(int r) {
  GraphBuilder b("rank" + std::to_string(r) + ".onnx");
  b.input("x", {"seq", 4}).input("w", {4, D});
  b.node("MatMul", {"x", "w"}, {"p"}, "/o_proj/MatMul");
  b.node("ReduceScatter", {"p"}, {"y"}, "/o_proj/ReduceScatter", axis(0), "shardproof").output("y");
  return b.build();
}
std::string reduceScatterSpec(const std::string &constraints) {
  return R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {seq: {min: 1}}
)" + constraints + R"(
inputs: {x: {shard: 1, split: even}, w: {shard: 0, split: even}}
outputs: {y: {shard: 0}}
)";
}

} // namespace

TEST(Collectives, ReduceScatterOfPartialSumsIsVerifiedWhenSeqIsEven) {
  auto r = check(rowRef(), {reduceScatterRank(0), reduceScatterRank(1)},
                 parse(reduceScatterSpec("constraints: [\"seq % 2 == 0\"]")));
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

TEST(Collectives, ReduceScatterOfAnOddSequenceIsRefutedWithTheSize) {
  auto r = check(rowRef(), {reduceScatterRank(0), reduceScatterRank(1)}, parse(reduceScatterSpec("")));
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  const relation::Failure &f = r.failures.front();
  ASSERT_TRUE(f.cex);
  bool odd = false;
  for (auto &[name, v] : f.cex->sizes)
    odd |= name == "seq" && v % 2 == 1;
  EXPECT_TRUE(odd) << f.cex->str();
}

namespace {

// The row max over a vocab sharded on two ranks: each rank takes the max of its
// columns, the ranks combine them with AllReduce(op).
ir::Graph rowMaxRef() {
  GraphBuilder b("ref.onnx");
  b.input("x", {"seq", 8});
  b.node("ReduceMax", {"x"}, {"m"}, "/head/ReduceMax", {{"axes", GraphBuilder::intsAttr({1})}}).output("m");
  return b.build();
}
ir::Graph rowMaxRank(int r, const std::string &op) {
  GraphBuilder b("rank" + std::to_string(r) + ".onnx");
  b.input("x", {"seq", 4});
  ir::Attribute a;
  a.kind = ir::Attribute::Kind::String;
  a.s = op;
  b.node("ReduceMax", {"x"}, {"p"}, "/head/ReduceMax", {{"axes", GraphBuilder::intsAttr({1})}});
  b.node("AllReduce", {"p"}, {"m"}, "/head/AllReduce", {{"op", a}}, "shardproof").output("m");
  return b.build();
}
const char *kRowMaxSpec = R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {seq: {min: 1}}
inputs: {x: {shard: 1, split: even}}
outputs: {m: replicated}
)";

} // namespace

TEST(Collectives, MaxAllReduceOfPartialMaximaIsTheRowMax) {
  auto r = check(rowMaxRef(), {rowMaxRank(0, "max"), rowMaxRank(1, "max")}, parse(kRowMaxSpec));
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

TEST(Collectives, SumAllReduceOfPartialMaximaIsRefuted) {
  auto r = check(rowMaxRef(), {rowMaxRank(0, "sum"), rowMaxRank(1, "sum")}, parse(kRowMaxSpec));
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  bool witnessed = false;
  for (auto &f : r.failures)
    witnessed |= f.cex.has_value();
  EXPECT_TRUE(witnessed);
}

namespace {

// Ulysses-style exchange: sequence-sharded in, head(column)-sharded out.
ir::Graph reluRef() {
  GraphBuilder b("ref.onnx");
  b.input("x", {"seq", 8});
  b.node("Relu", {"x"}, {"y"}, "/attn/Relu").output("y");
  return b.build();
}
ir::Graph allToAllRank(int r, int64_t split, int64_t concat) {
  GraphBuilder b("rank" + std::to_string(r) + ".onnx");
  b.input("x", {"half", 8});
  b.node("AllToAll", {"x"}, {"a"}, "/attn/AllToAll",
         {{"split_axis", GraphBuilder::intAttr(split)}, {"concat_axis", GraphBuilder::intAttr(concat)}}, "shardproof");
  b.node("Relu", {"a"}, {"y"}, "/attn/Relu").output("y");
  return b.build();
}
const char *kAllToAllSpec = R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {seq: {min: 2}, half: {min: 1}}
constraints: ["seq == 2 * half"]
inputs: {x: {shard: 0, split: even}}
outputs: {y: {shard: 1}}
)";

} // namespace

TEST(Collectives, AllToAllFromSequenceToHeadShardsIsVerified) {
  auto r = check(reluRef(), {allToAllRank(0, 1, 0), allToAllRank(1, 1, 0)}, parse(kAllToAllSpec));
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

TEST(Collectives, AllToAllWithSplitAndConcatSwappedIsRefuted) {
  auto r = check(reluRef(), {allToAllRank(0, 0, 1), allToAllRank(1, 0, 1)}, parse(kAllToAllSpec));
  EXPECT_EQ(r.verdict, Verdict::Refuted) << r.reason;
}

TEST(Collectives, RanksCallingDifferentCollectivesAreRejectedAsADeadlock) {
  GraphBuilder b("rank1.onnx");
  b.input("x", {"half", D}).input("w", {D, D});
  b.node("MatMul", {"x", "w"}, {"p"}, "/proj/MatMul");
  b.node("AllReduce", {"p"}, {"y"}, "/proj/AllReduce", {}, "com.microsoft").output("y");
  auto r = run(linearRef(), {gatherRank(0, 0), b.build()}, parse(kGatherSpec));
  ASSERT_FALSE(static_cast<bool>(r));
  auto e = takeError(r.takeError());
  EXPECT_NE(e.text.find("deadlock"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("rank 1"), std::string::npos) << e.text;
}
