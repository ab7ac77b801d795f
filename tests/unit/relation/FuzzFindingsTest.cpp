// Cases the fuzzers found (tests/fuzz/regressions/check holds the raw inputs),
// written out so the contract they broke reads directly.
#include "GraphBuilder.h"
#include "SpecText.h"

#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;

namespace {

spec::Spec parse(const std::string &text) { return shardproof::testing::parseSpecText(text, "fuzz.yaml"); }

} // namespace

// A graph input placed `partial` feeding a node no rank computes: the report
// blamed the "producer" of the input, which a graph input does not have (an
// out-of-bounds read of the node list, caught by UBSan).
TEST(FuzzFindings, PartialGraphInputIntoUncomputedNodeIsRefutedAtTheNode) {
  auto graph = [](const std::string &path) {
    GraphBuilder b(path);
    b.input("x", {"batch", 4});
    b.node("MatMul", {"x", "x"}, {"y"}, "/l0/MatMul");
    b.output("y");
    return b.build();
  };
  spec::Spec s = parse(R"(shardproof: 1
reference: ref.onnx
implementation: {world_size: 2, ranks: "rank{r}.onnx"}
symbols: {batch: {min: 1}}
inputs:
  x: partial
outputs:
  y: replicated
)");
  auto r = relation::verify(graph("ref.onnx"), {graph("rank0.onnx"), graph("rank1.onnx")}, s);
  ASSERT_TRUE(static_cast<bool>(r)) << shardproof::toString(r.takeError());
  EXPECT_NE(r->verdict, relation::Verdict::Verified) << r->reason;
  bool namesTheSum = false;
  for (auto &f : r->failures)
    if (f.kind == relation::Failure::NoRelation) {
      EXPECT_EQ(f.module, "l0") << f.message;
      namesTheSum |= f.message.find("its input 'x' is a sum of the ranks' partial results") != std::string::npos;
    }
  EXPECT_TRUE(namesTheSum);
}
