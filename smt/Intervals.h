// Internal to smt/: proofs by intervals, tried before a query reaches Z3.
//
// Most goals the relation layer proves are index bounds under a path of index
// ranges: `0 <= i!2 and i!2 < 256 and ... => not (256 <= i!2)`. Each took Z3
// about 0.7 ms; a 126-layer training step asks about 10,000 of them. Here a
// goal is proven when its linear form, less a positive multiple of at most one
// fact's, is at least 0 on the box the single-atom facts (and the size
// minimums) span. Only proofs are answered: anything else goes to Z3.
#pragma once

#include "shardproof/smt/Expr.h"
#include "shardproof/smt/Facts.h"

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardproof::smt::detail {

class IntervalProver {
public:
  /// Whether `formula` is valid by intervals: `not (f1 and ... and fn) or g1
  /// or ... or gm` (what `implies` builds) with some gi following from the
  /// facts fj, or a single comparison following from `sizes` alone.
  bool proves(const Expr &formula, const SizeFacts &sizes);

private:
  // sum of coef * atom + constant >= 0, atoms by AST id in increasing order.
  struct Ineq {
    std::vector<std::pair<unsigned, int64_t>> terms;
    int64_t constant = 0;
  };
  struct Box; // atom id -> [lo, hi]

  /// The inequalities a fact states (a comparison, a negated one other than
  /// a disequality, conjunctions of them); others state nothing here.
  const std::vector<Ineq> &factsOf(const Expr &fact);
  void collect(const Expr &fact, std::vector<Ineq> &out);
  /// A goal's alternatives: each a conjunction of inequalities that proves it.
  std::vector<std::vector<Ineq>> goalOf(const Expr &goal);
  /// `lhs OP rhs` (OP from `kind`, negated when `negated`) as inequalities;
  /// false when it is not a linear integer comparison.
  bool comparison(const Expr &cmp, bool negated, std::vector<std::vector<Ineq>> &alternatives);
  bool provesOne(const Ineq &goal, const std::vector<const Ineq *> &facts, const Box &box) const;

  // Parsed facts by AST id, each holding its Expr so ids stay unique; cleared
  // when it grows past a bound (paths repeat, goals rarely do).
  std::unordered_map<unsigned, std::pair<Expr, std::vector<Ineq>>> parsed_;
  std::unordered_map<unsigned, Expr> atoms_; // every atom seen, for its size minimum
};

} // namespace shardproof::smt::detail
