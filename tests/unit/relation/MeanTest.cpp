// Data-parallel means: each rank's loss is the mean over its own rows of the
// batch, and the spec relates the reference's mean to `mean(loss@*)`. The
// ranks' 1/(rows on the rank) and the reference's 1/batch are sizes; they
// agree after the average over the ranks only when the split is even.
#include "GraphBuilder.h"
#include "SpecText.h"

#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::Verdict;

namespace {

constexpr int64_t D = 4;

spec::Spec parse(const std::string &yaml) { return shardproof::testing::parseSpecText(yaml, "m.yaml"); }

// loss = mean of x * x over every element of x[rows, D].
ir::Graph meanLoss(const std::string &file, const std::string &rows) {
  GraphBuilder b(file);
  b.input("x", {rows, D});
  b.node("Mul", {"x", "x"}, {"sq"}, "/Mul");
  b.node("ReduceMean", {"sq"}, {"loss"}, "/ReduceMean", {{"keepdims", GraphBuilder::intAttr(0)}}).output("loss");
  return b.build();
}

relation::Result check(const std::string &split, const std::string &loss) {
  std::string yaml = R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {batch: {min: 2})" +
                     std::string(split == "even" ? ", half: {min: 1}}\nconstraints: [\"batch == 2 * half\"]"
                                                 : "}") +
                     R"(
inputs: {x: {shard: 0, split: )" +
                     split + R"(}}
outputs: {loss: ")" + loss + R"("}
)";
  auto r = relation::verify(meanLoss("ref.onnx", "batch"),
                            {meanLoss("rank0.onnx", "half"), meanLoss("rank1.onnx", "half")}, parse(yaml));
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : shardproof::toString(r.takeError()));
  return r ? *r : relation::Result{};
}

} // namespace

TEST(Mean, AverageOfEvenShardsMeansIsTheMean) {
  auto r = check("even", "mean(loss@*)");
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

// The sum of the two means is twice the mean: the gradient bug "all-reduced,
// never divided" in its smallest form.
TEST(Mean, SumOfShardMeansIsRefuted) {
  auto r = check("even", "sum(loss@*)");
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  bool replayed = false;
  for (auto &f : r.failures)
    replayed |= f.tensor == "loss" && f.cex && f.cex->replayed;
  EXPECT_TRUE(replayed) << r.reason;
}

// tensor_split at an odd batch: the means of 2 rows and of 1 row, averaged,
// are not the mean of 3.
TEST(Mean, AverageOfUnevenShardsMeansIsRefuted) {
  auto r = check("tensor_split", "mean(loss@*)");
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  bool oddBatch = false;
  for (auto &f : r.failures)
    if (f.tensor == "loss" && f.cex && f.cex->replayed)
      for (auto &[name, v] : f.cex->sizes)
        oddBatch |= name == "batch" && v % 2 == 1;
  EXPECT_TRUE(oddBatch) << r.reason;
}

TEST(Mean, OfTensorsOfDifferentRankIsAnInputError) {
  std::string yaml = R"Y(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {batch: {min: 2}, half: {min: 1}}
constraints: ["batch == 2 * half"]
inputs: {x: {shard: 0, split: even}}
outputs: {loss: "mean(loss@0, x@1)"}
)Y";
  auto r = relation::verify(meanLoss("ref.onnx", "batch"),
                            {meanLoss("rank0.onnx", "half"), meanLoss("rank1.onnx", "half")}, parse(yaml));
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(shardproof::toString(r.takeError()).find("mean(...) of tensors of different rank"), std::string::npos);
}
