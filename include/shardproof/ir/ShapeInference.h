// Shapes of every value of one graph, through the op table's `infer` alone:
// no element maps, no classes, no solver. For tools that compare graphs by
// their shapes (`shardproof init`), not for proofs: a node the table does not
// know, or whose inputs have no known shape, leaves its outputs unknown.
#pragma once

#include "shardproof/ir/Ops.h"

#include <optional>
#include <vector>

namespace shardproof::ir {

struct InferredValue {
  std::optional<Shape> shape;
  DType dtype = DType::Other;
  std::optional<IntTensor> value; // small integer tensors (shape arithmetic)
  std::shared_ptr<const TensorData> data;
};

/// One entry per value of `g` (indexed like g.values). `worldSize` is what
/// collectives are inferred with. The side conditions the ops imply (the
/// graph is well defined only where they hold) go to `obligations` if given.
std::vector<InferredValue> inferShapes(const Graph &g, int worldSize, std::vector<Obligation> *obligations = nullptr);

} // namespace shardproof::ir
