// Cheap facts about sizes, applied before a query reaches Z3.
//
// Reshapes over products of symbols give obligations such as
//   (8*batch*seq) mod (16*batch) == 0,   ite(batch == 0, ..., seq div 2)
// which are linear once the common factor `batch` is cancelled, but nonlinear
// as written: Z3 times out on them (10 s, 60 s). Knowing only that each symbol
// is at least its declared minimum (the spec's `{min: 1}`), they are rewritten
// into equivalent formulas that Z3 decides at once:
//   - a comparison of a polynomial whose monomials have a known sign with a
//     constant folds by intervals (batch == 0 is false when batch >= 1);
//   - a comparison `M*A OP M*B` with M a product of symbols known positive is
//     `A OP B`;
//   - (M*A) div (c*M) is A div c and (M*A) mod (c*M) is M*(A mod c), for c > 0
//     and M known positive (floor division: M*A = c*M*q + M*r with 0 <= r < c).
// Every rewrite is an equivalence under the assumptions the facts came from,
// so a proof of the rewritten goal is a proof of the original one.
#pragma once

#include "shardproof/smt/Expr.h"

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardproof::smt {

/// The multiples a fact states: `x % c == 0` (either side, and each conjunct
/// of a conjunction) with x a size symbol and c >= 2 a numeral gives (x, c).
/// Other facts give nothing. What lets a check write x as c * (x // c).
std::vector<std::pair<Expr, int64_t>> multiplesIn(const Expr &fact);

class SizeFacts {
public:
  /// Learns lower bounds of single symbols from an assumption (`x >= c`,
  /// `x > c`, `x == c`, conjunctions of them); other facts are ignored.
  void learn(const Expr &fact);
  /// The largest lower bound learned for atom `x` (by AST), if any.
  std::optional<int64_t> lowerBound(const Expr &x) const;
  bool empty() const { return lower_.empty(); }
  /// `e` rewritten as above (then simplified); `e` itself when nothing applies.
  Expr apply(const Expr &e) const;

private:
  Expr applyUncached(const Expr &e) const;
  std::map<unsigned, std::pair<int64_t, Expr>> lower_; // atom id -> (bound, atom)
  // Results of `apply` by the AST id of its argument (held, so ids stay
  // unique): a check applies the facts to the same goals again and again.
  // Forgotten when a fact is learned.
  mutable std::unordered_map<unsigned, std::pair<Expr, Expr>> applied_;
  // One rewrite of each subterm, by AST id, shared by every apply: the
  // queries of a path repeat its conditions, which are rewritten once.
  // Forgotten with `applied_`.
  mutable std::unordered_map<unsigned, std::pair<Expr, Expr>> rewritten_;
};

} // namespace shardproof::smt
