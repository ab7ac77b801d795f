// Exact semantics of the named opaque functions (Fn::Opaque terms):
// comparisons and logic of masks, Where, casts, integer Div/Mod/FMod, and the
// rounding functions Floor, Ceil, Round, Sign. Numeric evaluation
// (relation/Eval.cpp), constant folding, integer index values
// (relation/IndexValue.cpp) and tests all read them from here, so a name means
// one thing everywhere.
#pragma once

#include "shardproof/smt/Expr.h"

#include <optional>
#include <string>
#include <vector>

namespace shardproof::ir {

/// The value of the opaque function `name` at `args`, as the ONNX graph
/// computes it (NaN where the graph's result is undefined, e.g. an integer
/// division by zero); nullopt for a name (or arity) without numeric semantics.
std::optional<double> evalOpaque(const std::string &name, const std::vector<double> &args);

/// The opaque function `name` on integer values `args` as an integer
/// expression (a mask's comparison is 1 or 0; integer Div/Mod/FMod exact for
/// every sign, simpler when `firstNonNegative`); nullopt for a name (or arity)
/// that is not integer arithmetic we follow.
std::optional<smt::Expr> integerOpaque(const std::string &name, const std::vector<smt::Expr> &args,
                                       bool firstNonNegative);

} // namespace shardproof::ir
