// Internal to the ir library: the last step of every term constructor, for
// code that copies a node whose children changed but whose folds cannot have
// (renaming classes, TermRewrite.cpp).
#pragma once

#include "shardproof/ir/Term.h"

namespace shardproof::ir::detail {

/// Computes `n`'s structural hash and skeleton and makes it a Term, with no
/// folding: `n` must already be what the smart constructors would build.
Term finish(TermNode n);
/// The order mkAdd, mkMul and max/min keep their operands in (stably sorted
/// by it): kind, then class for reads, then skeleton.
bool acBefore(const Term &a, const Term &b);

} // namespace shardproof::ir::detail
