// The size conditions a spec's output relation raises (slice bounds, reshape
// element counts) are decided like every other obligation. They were once
// collected after the obligations had been decided and dropped: a relation
// slicing past the end of its tensor was VERIFIED when the elements it read
// out of range happened to agree (here: zeros on both sides).
#include "GraphBuilder.h"
#include "SpecText.h"

#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::Verdict;

namespace {

// y = x * 0 over x[n, 4]: every element is 0, wherever it is read.
ir::Graph zeros(const std::string &file) {
  GraphBuilder b(file);
  b.input("x", {"n", 4});
  b.scalar("zero", 0.0);
  b.node("Mul", {"x", "zero"}, {"y"}, "/Mul").output("y");
  return b.build();
}

relation::Result check(const std::string &relation) {
  std::string yaml = R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {n: {min: 1}}
inputs: {x: replicated}
outputs: {y: ")" + relation + R"("}
)";
  auto r = relation::verify(zeros("ref.onnx"), {zeros("rank0.onnx"), zeros("rank1.onnx")},
                            shardproof::testing::parseSpecText(yaml));
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : shardproof::toString(r.takeError()));
  return r ? *r : relation::Result{};
}

bool mentions(const relation::Result &r, const std::string &what) {
  for (auto &f : r.failures)
    if (f.message.find(what) != std::string::npos)
      return true;
  return false;
}

} // namespace

TEST(RelationBounds, ASliceInsideItsTensorIsVerified) {
  auto r = check("slice(y@0, axis=0, start=0, end=n)");
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

TEST(RelationBounds, ASlicePastTheEndOfItsTensorIsNotVerified) {
  auto r = check("slice(y@0, axis=0, start=1, end=n + 1)");
  EXPECT_NE(r.verdict, Verdict::Verified) << r.reason;
  EXPECT_TRUE(mentions(r, "slice(...) in the spec stays inside its tensor")) << r.reason;
}

