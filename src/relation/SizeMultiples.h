// Sizes the spec makes multiples of a constant, written as such.
//
// Under `seq % 2 == 0` a reduce-scatter's shard is `seq // 2` and the
// reference's sequence is `seq`: equal to the concatenation of two shards only
// by the constraint, so every concat, split and sum over the sequence would
// leave rewriting for the solver (`seq - seq // 2` against `seq // 2`). With
// seq written `2 * (seq // 2)` in every input shape and placement, the shard
// is the atom `seq // 2` on both sides and the pieces line up by rewriting, as
// with a shard length the spec names (`seq == 2 * seq_local`). Sound because
// the two are equal under the constraint, which every solver query assumes;
// the symbol itself stays (sizes, counterexamples and replays still name seq).
#pragma once

#include "shardproof/ir/Graph.h"
#include "shardproof/smt/Expr.h"
#include "shardproof/spec/Spec.h"

#include <vector>

namespace shardproof::relation {

class SizeMultiples {
public:
  /// From the spec's constraints: each symbol x with `x % c == 0` (c the
  /// least common multiple when several constraints name x).
  static SizeMultiples fromSpec(const spec::Spec &spec);
  bool empty() const { return from_.empty(); }
  /// x -> c * (x // c) in the declared shapes of the graph inputs.
  void apply(ir::Graph &g) const;
  /// The same in every placement's expressions; constraints and symbol bounds
  /// keep the plain symbol (they are what justifies the rewrite).
  void apply(spec::Spec &s) const;
  smt::Expr apply(const smt::Expr &e) const;

private:
  std::vector<smt::Expr> from_, to_;
};

} // namespace shardproof::relation
