// Internal: what the check knows of one tensor of a graph (ValueInfo), the
// record every phase reads and the rank world and reference walk fill.
#pragma once

#include "shardproof/ir/Graph.h"
#include "shardproof/ir/Ops.h"
#include "shardproof/ir/Term.h"

#include <memory>
#include <optional>
#include <string>

namespace shardproof::relation {

using ir::Term;

/// What we know of one tensor of a graph: its element term over classes (free
/// index variables i!0..), shape and, for shape arithmetic, integer values.
struct ValueInfo {
  Term term; // null: no element map (shape-only or unsupported)
  std::optional<ir::Shape> shape;
  ir::DType dtype = ir::DType::Other;
  std::optional<ir::IntTensor> value;
  std::shared_ptr<const ir::TensorData> data;
  std::string unsupported; // why there is no term
};

} // namespace shardproof::relation
