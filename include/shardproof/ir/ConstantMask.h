// Constant masks: a boolean or integer constant tensor (a mask the exporter
// folded, a causal-mask buffer) read back as the index condition it equals,
// so a Where over it is a Select the prover splits on, like a mask built from
// Range and Less.
#pragma once

#include "shardproof/smt/Expr.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace shardproof::ir {

/// Element [x...] of the constant is `onTrue` where `cond` holds and `onFalse`
/// elsewhere; `cond` is over the pattern indices u!0.. (one per dim) and holds
/// exactly at the elements it should inside the tensor's box.
struct ConstantCondition {
  smt::Expr cond;
  double onTrue = 1, onFalse = 0;
};

/// The condition a constant with at most two distinct integer values equals,
/// if its content is one of: constant; a union of at most four intervals of
/// one axis (a prefix, a suffix: padding columns); a band lo <= x_b - x_a <= hi
/// of two axes (triangular, banded); that band on the runs of equal rows and
/// columns (block causal, block diagonal); at most four rectangles of those
/// runs. Each candidate is evaluated at every element of the content and kept
/// only if it matches everywhere; nullopt when none does (or the tensor has
/// more than `maxElements` elements).
std::optional<ConstantCondition> recogniseConstantCondition(const std::vector<int64_t> &dims,
                                                            const std::vector<double> &data,
                                                            int64_t maxElements = int64_t(1) << 22);

/// {c0, d} when `data` is 1-d content c0, c0 + d, c0 + 2d, ... of whole
/// numbers (at least two; an arange exported as a constant or a Range of
/// numerals), read at index i as c0 + d * i.
std::optional<std::pair<int64_t, int64_t>> arithmeticProgression(const std::vector<double> &data);

} // namespace shardproof::ir
