// The embedding's backward under vocab parallelism (a tied LM head's and an
// embedding's weight gradient): row v of the gradient sums g at the positions
// whose id is v, a one-hot of the ids (Equal against a constant arange, cast
// to float) contracted with g. Rank r owns rows [4r, 4r + 4): its one-hot is
// of the shifted ids, masked to 0 outside the range, so its column 0 is also
// hot for every id it does not own; only zeroing g there (the backward of the
// forward's masked_fill) makes its rows the reference's. The comparisons on
// the ids are conditions the prover decides under their value range.
#include "GraphBuilder.h"
#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::Verdict;

namespace {

const std::map<std::string, ir::Attribute> kToFloat = {{"to", GraphBuilder::intAttr(1)}};
const std::map<std::string, ir::Attribute> kSwap = {{"perm", GraphBuilder::intsAttr({1, 0})}};

void markIntegers(ir::Graph &g, std::initializer_list<const char *> ints, std::initializer_list<const char *> bools) {
  for (auto *n : ints)
    g.values[*g.find(n)].dtype = ir::DType::Int64;
  for (auto *n : bools)
    g.values[*g.find(n)].dtype = ir::DType::Bool;
}

ir::Graph reference() {
  GraphBuilder b("ref.onnx");
  b.input("ids", {3}).input("g", {3, 2});
  b.initializer("cols", {8}, {0, 1, 2, 3, 4, 5, 6, 7}).initializer("axes", {1}, {-1});
  b.node("Unsqueeze", {"ids", "axes"}, {"idsu"}).node("Equal", {"idsu", "cols"}, {"eq"});
  b.node("Cast", {"eq"}, {"hot"}, "", kToFloat).node("Transpose", {"hot"}, {"hotT"}, "", kSwap);
  b.node("MatMul", {"hotT", "g"}, {"grad"});
  b.output("grad");
  ir::Graph g = b.build();
  markIntegers(g, {"ids", "idsu"}, {"eq"});
  return g;
}

// Rank r's gradient rows; `maskGradient` false forgets to zero g at the ids
// outside the rank's range.
ir::Graph rank(int r, bool maskGradient) {
  GraphBuilder b("rank" + std::to_string(r) + ".onnx");
  b.input("ids", {3}).input("g", {3, 2});
  b.initializer("cols", {4}, {0, 1, 2, 3}).initializer("axes", {1}, {-1});
  b.initializer("start", {}, {4 * r}).initializer("end", {}, {4 * r + 4}).initializer("zero_i", {}, {0});
  b.scalar("zero", 0.0);
  b.node("Less", {"ids", "start"}, {"below"}).node("GreaterOrEqual", {"ids", "end"}, {"above"});
  b.node("Or", {"below", "above"}, {"mask"}).node("Sub", {"ids", "start"}, {"shifted"});
  b.node("Where", {"mask", "zero_i", "shifted"}, {"local"});
  b.node("Unsqueeze", {"local", "axes"}, {"localu"}).node("Equal", {"localu", "cols"}, {"eq"});
  b.node("Cast", {"eq"}, {"hot"}, "", kToFloat).node("Transpose", {"hot"}, {"hotT"}, "", kSwap);
  b.node("Unsqueeze", {"mask", "axes"}, {"masku"}).node("Where", {"masku", "zero", "g"}, {"gm"});
  b.node("MatMul", {"hotT", maskGradient ? "gm" : "g"}, {"grad"});
  b.output("grad");
  ir::Graph g = b.build();
  markIntegers(g, {"ids", "shifted", "local", "localu"}, {"below", "above", "mask", "eq", "masku"});
  return g;
}

relation::Result check(bool maskGradient) {
  auto s = spec::parseSpec(R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
inputs:
  ids: {replicated: true, values: {min: 0, max: 7}}
  g: replicated
outputs:
  grad: {shard: 0, split: even}
)",
                           "onehot.yaml");
  EXPECT_TRUE(static_cast<bool>(s)) << (s ? "" : shardproof::toString(s.takeError()));
  auto res = relation::verify(reference(), {rank(0, maskGradient), rank(1, maskGradient)}, *s);
  EXPECT_TRUE(static_cast<bool>(res)) << (res ? "" : shardproof::toString(res.takeError()));
  return res ? *res : relation::Result{};
}

TEST(OneHotGradient, TheMaskedShiftedOneHotOfEachRankIsItsRowsOfTheReferenceGradient) {
  auto r = check(true);
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

// Without the mask, row 0 of each rank also sums g at every id it does not own.
TEST(OneHotGradient, AnUnmaskedGradientPilesTheOtherRanksIdsOntoRowZeroAndIsRefuted) {
  auto r = check(false);
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  bool rowZero = false;
  for (auto &f : r.failures)
    if (f.cex)
      rowZero |= f.cex->index.size() == 2 && f.cex->index[0] % 4 == 0;
  EXPECT_TRUE(rowZero) << r.reason;
}

} // namespace
