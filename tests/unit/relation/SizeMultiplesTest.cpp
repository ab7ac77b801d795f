// Sequence parallelism's weight gradient: each rank reduce-scatters the
// sequence (its shard is `seq // 2`), all-gathers it back and multiplies by
// the whole sequence. The gathered length `2 * (seq // 2)` is the reference's
// `seq` only under the spec's `seq % 2 == 0`. In a captured Llama training
// step under SP, sums over it met the reference's in pieces `seq // 2` and
// `seq - seq // 2` that rewriting could not line up: every weight gradient
// was NO RELATION. The check writes seq as 2 * (seq // 2). The first test
// pins that rewrite; the second runs it end to end on the small pattern, which
// the solver also settles without it (the captured step is the case that
// needs it, too slow to ship as an example; docs/performance.md).
#include "GraphBuilder.h"
#include "SpecText.h"

#include "SizeMultiples.h"
#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::RelationRow;
using relation::Verdict;

namespace {

const char *kSpec = R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {seq: {min: 1}}
constraints: ["seq % 2 == 0"]
inputs: {a: replicated, d: partial}
outputs: {g: replicated}
)";

// g = a^T d over the sequence, d the output gradient each rank holds a part
// of: a rank reduce-scatters it along the sequence and gathers the shards back.
ir::Graph weightGradient(const std::string &file, bool rank) {
  GraphBuilder b(file);
  b.input("a", {"seq", 4});
  b.input("d", {"seq", 4});
  std::string rhs = "d";
  if (rank) {
    b.node("ReduceScatter", {"d"}, {"s"}, "/ReduceScatter",
           {{"axis", GraphBuilder::intAttr(0)}, {"group_size", GraphBuilder::intAttr(2)}}, "shardproof");
    b.node("AllGather", {"s"}, {"gathered"}, "/AllGather",
           {{"axis", GraphBuilder::intAttr(0)}, {"group_size", GraphBuilder::intAttr(2)}}, "com.microsoft");
    rhs = "gathered";
  }
  b.node("Transpose", {"a"}, {"at"}, "/Transpose", {{"perm", GraphBuilder::intsAttr({1, 0})}});
  b.node("MatMul", {"at", rhs}, {"g"}, "/MatMul");
  return b.output("g").build();
}

} // namespace

TEST(SizeMultiples, TheConstraintsMultiplesAreWrittenAsMultiples) {
  auto spec = shardproof::testing::parseSpecText(R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {seq: {min: 1}, batch: {min: 1}}
constraints: ["seq % 2 == 0", "0 == seq % 3", "batch >= 1", "batch % 1 == 0"]
inputs: {x: {shard: 0, sizes: [seq // 2, seq - seq // 2]}}
outputs: {g: replicated}
)");
  auto m = relation::SizeMultiples::fromSpec(spec);
  smt::Expr seq = smt::Expr::intVar("seq"), batch = smt::Expr::intVar("batch");
  // The least common multiple of both constraints; batch is left alone.
  EXPECT_EQ(m.apply(seq).str(), (smt::Expr::intConst(6) * smt::floorDiv(seq, smt::Expr::intConst(6))).str());
  EXPECT_TRUE(m.apply(batch).same(batch));
  // Placements follow; constraints keep the plain symbol that justifies it.
  smt::Expr half = spec.inputs[0].second.sizes[0];
  m.apply(spec);
  EXPECT_TRUE(spec.inputs[0].second.sizes[0].same(m.apply(half))) << spec.inputs[0].second.sizes[0].str();
  EXPECT_FALSE(spec.inputs[0].second.sizes[0].same(half)) << half.str();
  EXPECT_EQ(spec.constraints[0].expr.str(), "seq % 2 == 0");
}

TEST(SizeMultiples, AGatheredReduceScatterOfTheSequenceIsTheWholeSequence) {
  auto r = relation::verify(weightGradient("ref.onnx", false),
                            {weightGradient("rank0.onnx", true), weightGradient("rank1.onnx", true)},
                            shardproof::testing::parseSpecText(kSpec));
  ASSERT_TRUE(static_cast<bool>(r)) << (r ? "" : shardproof::toString(r.takeError()));
  EXPECT_EQ(r->verdict, Verdict::Verified) << r->reason;
  for (auto &row : r->rows) {
    if (row.tensor == "g") {
      EXPECT_EQ(row.status, RelationRow::Matched) << row.relation;
    }
  }
}
