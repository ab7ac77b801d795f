// Exact numeric semantics of the named opaque functions (Fn::Opaque terms):
// comparisons and logic of masks, Where, casts to bool, integer Div/Mod/FMod,
// and the rounding functions Floor, Ceil, Round, Sign. Numeric evaluation
// (relation/Eval.cpp), constant folding and tests all read them from here, so a
// name means one thing everywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace shardproof::ir {

/// The value of the opaque function `name` at `args`, as the ONNX graph
/// computes it (NaN where the graph's result is undefined, e.g. an integer
/// division by zero); nullopt for a name (or arity) without numeric semantics.
std::optional<double> evalOpaque(const std::string &name, const std::vector<double> &args);

} // namespace shardproof::ir
