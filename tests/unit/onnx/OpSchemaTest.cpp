// The op table's input counts against ONNX's own operator schemas (libonnx):
// a model torch exports (opsets 13 to 17) is never rejected for a count its
// opset allows, and the table never accepts a count no ONNX version does.
#include "shardproof/ir/Ops.h"

#include <onnx/defs/schema.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <set>
#include <string>

using namespace shardproof;

namespace {

// Opset 18 moved these ops' axes from an attribute to an optional input; the
// table reads both forms, and libonnx 1.12 knows opsets up to 17 only.
const std::set<std::string> kOpset18Inputs = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                              "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                                              "ReduceLogSumExp", "Pad", "Resize"};

unsigned ours(int onnxCount) { return onnxCount == INT_MAX ? ir::Arity::kAnyCount : static_cast<unsigned>(onnxCount); }

TEST(OpSchema, TheTableAcceptsEveryInputCountOfOpsets13To17) {
  unsigned checked = 0;
  for (const ir::OpDef *def : ir::allOps()) {
    if (std::string(def->domain) != "")
      continue;
    for (int opset = 13; opset <= 17; ++opset) {
      const onnx::OpSchema *s = onnx::OpSchemaRegistry::Schema(def->type, opset, "");
      if (!s)
        continue; // newer than this libonnx (Gelu is opset 20)
      ++checked;
      EXPECT_LE(def->inputs.min, ours(s->min_input())) << def->type << " at opset " << opset;
      EXPECT_GE(def->inputs.max, ours(s->max_input())) << def->type << " at opset " << opset;
    }
  }
  EXPECT_GT(checked, 400u); // about 90 ONNX ops, five opsets each
}

TEST(OpSchema, TheTableAcceptsNoInputCountThatNoOnnxVersionDoes) {
  for (const ir::OpDef *def : ir::allOps()) {
    if (std::string(def->domain) != "" || kOpset18Inputs.count(def->type))
      continue;
    int lo = INT_MAX, hi = -1;
    for (int opset = 1; opset <= 17; ++opset)
      if (const onnx::OpSchema *s = onnx::OpSchemaRegistry::Schema(def->type, opset, "");
          s && s->SinceVersion() <= opset) {
        lo = std::min(lo, s->min_input());
        hi = std::max(hi, s->max_input());
      }
    if (hi < 0)
      continue;
    EXPECT_GE(def->inputs.min, ours(lo)) << def->type;
    EXPECT_LE(def->inputs.max, ours(hi)) << def->type;
  }
}

} // namespace
