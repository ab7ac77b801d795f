// Internal to smt/: proofs by intervals, tried before a query reaches Z3.
//
// Most goals the relation layer proves are index bounds under a path of index
// ranges: `0 <= i!2 and i!2 < 256 and ... => not (256 <= i!2)`. Each took Z3
// about 0.7 ms; a 126-layer training step asks about 10,000 of them. Here a
// goal is proven when its linear form, less a positive multiple of at most one
// fact's, is at least 0 on the box the single-atom facts (and the size
// minimums) span. Only proofs are answered: anything else goes to Z3.
//
// provesByCases adds two steps, dearer, so the solver tries them only on a
// goal no kept model refutes, just before Z3 (Solver.cpp): a value
// range set aside for a function (Solver::assumeOnFunction) bounds an
// application whose guard the path implies, and the formula is split into
// cases on an integer `ite` or on a negated conjunction among the facts. The
// embedding's and the loss's token-id bounds, `0 <= ite(768 <= id and not
// (896 <= id), id - 768, 0) < 128` with id in [0, 1023], are of that form.
#pragma once

#include "shardproof/smt/Expr.h"
#include "shardproof/smt/Facts.h"
#include "smt/Context.h"

#include <cstdint>
#include <functional>
#include <optional>
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
  /// The same with the set-aside facts at the formula's applications
  /// (`pointFacts`: `not guard or range` each) and case splits.
  bool provesByCases(const Expr &formula, const SizeFacts &sizes, const std::function<Expr()> &pointFacts);

private:
  // sum of coef * atom + constant >= 0, atoms by AST id in increasing order.
  struct Ineq {
    std::vector<std::pair<unsigned, int64_t>> terms;
    int64_t constant = 0;
  };
  struct Box; // atom id -> [lo, hi]
  /// A set-aside fact at one point: `range` holds where every `guard` does.
  struct Instance {
    std::vector<Ineq> guard, range;
  };
  struct Parsed {
    Expr keep; // holds the AST so its id stays unique
    std::vector<Ineq> ineqs;
    std::vector<Expr> negatedConjunctions; // `not (a and b ...)` among the facts: cases to split on
  };

  /// The inequalities a fact states (a comparison, a negated one other than
  /// a disequality, conjunctions of them); others state nothing here.
  const Parsed &factsOf(const Expr &fact);
  void collect(const Expr &fact, Parsed &out);
  /// Every conjunct of `e` as inequalities, or false (nothing may be dropped:
  /// a guard or a goal read in part would be weaker or stronger).
  bool collectAll(const Expr &e, std::vector<Ineq> &out);
  /// One reading of `formula` (no cases): proven by the box, the facts and
  /// the instances whose guard it proves. `split` gets the negated
  /// conjunctions among the facts. `thorough`: also look for two facts that
  /// contradict each other (quadratic in the facts: only before Z3).
  bool decide(const Expr &formula, const SizeFacts &sizes, const std::vector<Instance> &points,
              std::vector<Expr> &split, bool thorough = false);
  /// A formula worth reading (valid), with the parse cache bounded.
  bool start(const Expr &formula);
  bool byCases(const Expr &formula, const SizeFacts &sizes, const std::vector<Instance> &points, unsigned depth,
               unsigned &leaves);
  std::vector<Instance> instancesOf(const Expr &pointFacts);
  /// A goal's alternatives: each a conjunction of inequalities that proves it.
  std::vector<std::vector<Ineq>> goalOf(const Expr &goal);
  /// `lhs OP rhs` (OP from `kind`, negated when `negated`) as inequalities;
  /// false when it is not a linear integer comparison.
  bool comparison(const Expr &cmp, bool negated, std::vector<std::vector<Ineq>> &alternatives);
  bool provesOne(const Ineq &goal, const std::vector<const Ineq *> &facts, const Box &box) const;
  /// `x div c` or `x mod c` (c > 0) with x's range over the box (x's atoms
  /// given their size minimums first).
  struct Quotient {
    bool mod;
    int64_t c;
    std::optional<__int128> lo, hi;
    /// floor(x / c) when the whole range lies in one block of c.
    std::optional<__int128> block() const;
  };
  std::optional<Quotient> quotientOf(Z3_ast a, Box &box, const std::function<void(unsigned)> &sizeMinimum);
  /// Narrows `atom`'s range when it is such a quotient or remainder.
  void narrowQuotient(unsigned atom, Box &box, const std::function<void(unsigned)> &sizeMinimum);
  /// Narrows `atom`'s range to what quotient `q` (atom's own) allows.
  void narrowTo(unsigned atom, const Quotient &q, Box &box);
  /// A quotient or remainder by c*b of c*X + r, r in [0, c): by b of X.
  std::optional<Expr> scaledQuotient(Z3_ast a, Box &box, const std::function<void(unsigned)> &sizeMinimum);
  /// `goal` with every quotient and remainder the box fixes replaced by its
  /// value (a remainder by x less its block's start), simplified.
  Expr foldQuotients(const Expr &goal, Box &box, const std::function<void(unsigned)> &sizeMinimum);

  // Parsed facts by AST id, each holding its Expr so ids stay unique; cleared
  // when it grows past a bound (paths repeat, goals rarely do).
  std::unordered_map<unsigned, Parsed> parsed_;
  std::unordered_map<unsigned, Expr> atoms_; // every atom seen, for its size minimum
};

} // namespace shardproof::smt::detail
