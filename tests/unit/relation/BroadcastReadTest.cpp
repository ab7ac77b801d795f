// An RMSNorm's backward under sequence parallelism: the mean's gradient is a
// [seq, batch, 1] tensor expanded to the hidden size, divided, then multiplied
// by the hidden state. The quotient's class does not depend on the hidden
// index, so the reference (related to it at index 0 of that axis) and the
// rank's next node (reading it at the hidden index) read one element. They
// once read two the prover could not tell equal: the product was related only
// at hidden index 0, every node after it was NO RELATION, and the Llama
// training step's input-norm gradient was UNKNOWN after minutes of rewriting.
#include "GraphBuilder.h"
#include "SpecText.h"

#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::RelationRow;
using relation::Verdict;

namespace {

// Reference: x[b, n, 4]. Each rank: its sequence shard x[b, m, 4], turned
// sequence-first as Megatron's ranks hold it; the gradient is all-reduced.
ir::Graph normBackward(const std::string &file, bool rank) {
  GraphBuilder b(file);
  b.input("x", {"b", rank ? "m" : "n", 4});
  b.input("w", {1});
  b.initializer("hidden_axis", {1}, {2});
  b.initializer("token_axes", {2}, {0, 1});
  b.scalar("four", 4.0);
  std::string h = "x";
  if (rank) {
    b.node("Transpose", {"x"}, {"xt"}, "/Transpose", {{"perm", GraphBuilder::intsAttr({1, 0, 2})}});
    h = "xt";
  }
  b.node("Mul", {h, h}, {"sq"}, "/Mul");
  b.node("ReduceSum", {"sq", "hidden_axis"}, {"r"}, "/ReduceSum", {{"keepdims", GraphBuilder::intAttr(1)}});
  b.node("Mul", {"r", "w"}, {"rw"}, "/Mul_1");
  b.node("Shape", {h}, {"shape"}, "/Shape");
  b.node("Expand", {"rw", "shape"}, {"e"}, "/Expand");
  b.node("Div", {"e", "four"}, {"q"}, "/Div");
  b.node("Mul", {"q", h}, {"y"}, "/Mul_2");
  b.node("Mul", {"y", h}, {"yx"}, "/Mul_3");
  b.node("ReduceSum", {"yx", "token_axes"}, {rank ? "partial" : "g"}, "/ReduceSum_1",
         {{"keepdims", GraphBuilder::intAttr(0)}});
  if (rank)
    b.node("AllReduce", {"partial"}, {"g"}, "/AllReduce", {}, "com.microsoft");
  return b.output("g").build();
}

relation::Result check() {
  auto r = relation::verify(normBackward("ref.onnx", false),
                            {normBackward("rank0.onnx", true), normBackward("rank1.onnx", true)},
                            shardproof::testing::parseSpecText(R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {b: {min: 1}, n: {min: 2}, m: {min: 1}}
constraints: ["n == 2 * m"]
inputs: {x: {shard: 1, split: even}, w: replicated}
outputs: {g: replicated}
)"));
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : shardproof::toString(r.takeError()));
  return r ? *r : relation::Result{};
}

const RelationRow *row(const relation::Result &r, const std::string &tensor) {
  for (auto &row : r.rows)
    if (row.tensor == tensor)
      return &row;
  return nullptr;
}

} // namespace

TEST(BroadcastRead, TheExpandedQuotientTimesTheHiddenStateIsRelatedAtEveryHiddenIndex) {
  auto r = check();
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
  for (const char *t : {"y", "yx"}) {
    const RelationRow *y = row(r, t);
    ASSERT_NE(y, nullptr) << t;
    EXPECT_EQ(y->status, RelationRow::Matched) << t << ": " << y->relation;
    // One read per rank, no case split on the hidden index.
    EXPECT_EQ(y->relation.find("i!2 == 0"), std::string::npos) << y->relation;
  }
}
