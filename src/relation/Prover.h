// Internal: reasoning on element terms under a path of index conditions.
//  - normalize: lift index Selects to the top, split reductions at the points
//    where a Select's condition changes, start every reduction at 0;
//  - cover: rewrite a reference term into reads of rank classes whose
//    definitions match it (unification of index expressions), per region;
//  - equal: decide whether two terms agree everywhere under the path.
// Index facts are decided syntactically first and by Z3 otherwise, with a cache.
#pragma once

#include "Classes.h"

#include "shardproof/smt/Solver.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace shardproof::relation {

struct Region {
  smt::Expr cond;  // where this piece applies (under the path)
  Term term;       // the covered term there
};

/// `t` with products distributed over sums and sums over a range split at
/// their addends (real arithmetic, exact); nullopt past 64 addends.
std::optional<Term> expandLinear(const Term &t);

/// A Cos or Sin application (Trig.cpp; the rotary matcher reads it too).
bool isTrig(const Term &t);

class Prover {
public:
  Prover(smt::Solver &solver, ClassTable &classes) : solver_(solver), classes_(classes) {}

  // --- path of assumptions about index variables ---------------------------
  void push(const smt::Expr &c) { path_.push_back(c); }
  void pop() { path_.pop_back(); }
  struct Scope {
    Prover &p;
    Scope(Prover &p, const smt::Expr &c) : p(p) { p.push(c); }
    ~Scope() { p.pop(); }
  };
  smt::Expr pathCond() const { return smt::conj(path_); }
  size_t pathDepth() const { return path_.size(); }

  /// Does `c` hold everywhere on the path? (false also when the solver gives up:
  /// callers only use a `true` as a fact.)
  bool implies(const smt::Expr &c, const char *query);
  /// Is there a point on the path where `c` holds?
  bool feasible(const smt::Expr &c, const char *query);
  /// Did a query end in unknown/timeout since the last reset? (Soundness: a
  /// comparison that needed such a query never counts as proved.)
  bool sawUnknown() const { return sawUnknown_; }
  std::string unknownReason() const { return unknownReason_; }

  /// Drops the conjuncts of `c` the path already implies (true/false if decided).
  smt::Expr simplifyCond(const smt::Expr &c);

  /// An equivalent form of the comparison `part` over fewer index variables,
  /// proven on the path; `part` itself otherwise.
  smt::Expr projectIndices(const smt::Expr &part);

  Term normalize(const Term &t, int level);
  Term cover(const Term &t, int level, unsigned &matches);
  /// Structural equality modulo index arithmetic, under the path.
  bool equal(const Term &a, const Term &b, int level);
  /// First region (leaf of the Select structure of both sides) where a and b
  /// are not shown equal; nullopt if equal everywhere.
  std::optional<smt::Expr> firstDifference(const Term &a, const Term &b, int level);
  /// Replaces reads of computed classes by their definitions, for the
  /// highest-numbered computed class read in `t` (one layer); false if none.
  bool expandHighest(Term &t, ClassId &highest);
  static ClassId highestComputed(const Term &t, const ClassTable &classes);
  /// Regions and their terms as one term: the first piece whose region holds;
  /// where none does, `otherwise`, or when null the last piece's term (whose
  /// region is then what the others leave).
  static Term selectChain(std::vector<std::pair<smt::Expr, Term>> pieces, Term otherwise = nullptr);
  Term expandClass(const Term &t, ClassId c, int level);
  /// expandClass for a `t` this prover normalized under the current path:
  /// only what the expansion changed is normalized again.
  Term expandClassInNormal(const Term &t, ClassId c, int level);

  /// `t` in the rotary normal form (Trig.cpp): a polynomial with Cos/Sin
  /// expanded by angle addition, equal reductions added into one,
  /// sin^2 = 1 - cos^2; nullopt when it has none (inexact coefficients, too
  /// large). Every step is an identity over the reals.
  std::optional<Term> trigCanonical(const Term &t);
  /// Equality with Add/Mul operands compared as multisets, indices under the path.
  bool acEqual(const Term &a, const Term &b);

  smt::Solver &solver() { return solver_; }
  /// Terms larger than this are compared as they are, not normalized first.
  void setMaxTermNodes(size_t n) { maxTermNodes_ = n; }
  unsigned cacheHits() const { return cacheHits_; }
  /// normalize and cover steps taken (for --stats).
  uint64_t rewriteSteps() const { return rewriteSteps_; }

  /// The rotary matcher's candidate filter (RotaryMatch.cpp): the classes a
  /// read of `c` can turn into under the rotary expansion (sorted, itself
  /// included), and the reads `t` has on every branch outside selects.
  const std::vector<ClassId> &rotaryReach(ClassId c, bool angle);
  static void requiredReads(const Term &t, std::vector<ClassId> &out);
  /// Reads of rotary classes in `t` replaced by their definitions, down to
  /// Cos/Sin and their angles; at most `plain` polynomial classes that are
  /// not rotary (residual adds, norm products) in a row.
  Term expandRotary(const Term &t, int level, bool angle, size_t &budget, unsigned plain);

private:
  std::optional<smt::Expr> nodeDifference(const Term &a, const Term &b, int level);
  static bool isAddTerm(const Term &t);
  /// a == b as linear combinations of addends (Linear.cpp).
  bool equalAsLinear(const Term &a, const Term &b, int level);
  std::vector<Term> mergeAdjacentSums(std::vector<Term> xs, int level);
  unsigned linearDepth_ = 0, linearBudget_ = 0;
  /// Two nested reductions of one kind with independent ranges, in the other
  /// order (sum_b sum_s = sum_s sum_b); nullopt when `t` is not such a pair.
  static std::optional<Term> exchangedReductions(const Term &t);
  /// Sums compared in the other order: one exchange at a time, so a nest of
  /// n sums costs n tries, not n! (a batch-first reference against a
  /// sequence-first shard reduces (b, s) in the opposite order).
  std::optional<smt::Expr> sumDifference(const Term &a, const Term &b, int level);
  unsigned exchanging_ = 0;
  smt::Expr simplifyConjuncts(const smt::Expr &c);
  std::optional<smt::Expr> innerSplitPoint(const Term &body, const std::string &k, const smt::Expr &lo, const smt::Expr &hi);
  Term normalizeSum(const Term &t, int level);
  Term reduceNormalized(const Term &t, Term body, int level);
  Term renormalizeExpanded(const Term &t, ClassId c, int level, bool &changed);
  /// `t`'s function applied to normalized `args`, index selects lifted.
  Term applyNormalized(const Term &t, std::vector<Term> args, int level);
  struct LinkedVars {
    std::set<std::string> vars;
    bool sizes = false, all = false;
    /// Could the condition change how `t` normalizes?
    bool reach(const Term &t) const;
  };
  LinkedVars linkedVars(const smt::Expr &c) const;
  /// -inf + x with every x finite is -inf (MaskedSum.cpp), so a masked
  /// column's exp(-inf - m) is exp(-inf) = 0; anything else unchanged.
  Term foldNegInfSum(const Term &t) const;
  /// exp(x - m) * recip(sum_k exp(y_k - m)) as exp(x) * recip(sum_k exp(y_k))
  /// (SoftmaxShift.cpp); anything else unchanged.
  Term cancelSoftmaxShift(const Term &t);
  Term unshiftedSum(const Term &t, const Term &m);
  /// `t`, a Select on data (token ids), as one read of a class that sums
  /// masked rank tensors whose masks the ids partition (MaskedSum.cpp).
  std::optional<Term> tryMaskedSum(const Term &t, int level);
  /// `t`, attention scores of rotated q and k, as reads of a rank class
  /// whose scores are the same once both are expanded to their Cos/Sin and
  /// brought to the rotary normal form (Trig.cpp).
  std::optional<Term> tryRotaryMatch(const Term &t, int level);
  bool rotaryClass(ClassId c, std::unordered_set<ClassId> &seen) const;
  bool rotaryClass(ClassId c);
  void termReach(const Term &t, bool angle, std::unordered_set<const ir::TermNode *> &seen,
                 std::vector<ClassId> &out);
  const std::vector<ClassId> &rotaryDefReach(ClassId c);
  bool rotaryScores(ClassId c);
  std::unordered_map<uint64_t, std::vector<ClassId>> rotaryReach_;
  std::unordered_map<ClassId, std::vector<ClassId>> rotaryDefReach_;
  std::unordered_map<ClassId, bool> rotaryScores_;
  std::unordered_map<ClassId, bool> rotaryClass_;
  /// Where class `ci` holds the reference element at `iv` (the same index, or
  /// on a shorter axis of a rank's class its chunk); `region` bounds the chunk.
  bool sumSite(const ClassInfo &ci, const ir::IndexVec &iv, ir::IndexVec &at, smt::Expr &region);
  /// `t` with reads of class `c` replaced by its definition (one layer).
  Term expandAt(const Term &t, ClassId c, int level) const;
  std::vector<std::vector<ClassId>> maskedSums_; // per class: leaf reads of a masked sum's addends
  /// Rewrites `t` into reads of classes computing it, region by region; with
  /// `wholeOnly`, only a single read covering the whole path counts.
  std::optional<Term> tryMatch(const Term &t, int level, unsigned &matches, bool wholeOnly = false);
  struct IndexEquation {
    smt::Expr pattern, term;
    std::vector<smt::Expr> scope; // binder ranges around it
    bool isCond;                  // a Select condition (boolean), not an index
  };
  bool collectEquations(const Term &p, const Term &t, std::vector<IndexEquation> &eqs,
                        std::vector<smt::Expr> &scope);
  bool guessMixedRadix(const std::vector<IndexEquation> &eqs, const std::vector<size_t> &pending,
                       std::vector<smt::Expr> &binding, const std::vector<smt::Expr> &vars);
  /// Binds the pattern variables `vars` so that `pattern` equals `t` under the
  /// path, or where `sideConds` (index agreements it could not prove) hold.
  bool unify(const Term &pattern, const Term &t, std::vector<smt::Expr> &binding,
             const std::vector<smt::Expr> &vars, std::vector<smt::Expr> &sideConds);
  bool unifyIndex(const smt::Expr &p, const smt::Expr &t, std::vector<smt::Expr> &binding,
                  const std::vector<smt::Expr> &vars);
  bool equalExpr(const smt::Expr &a, const smt::Expr &b);

  smt::Solver &solver_;
  ClassTable &classes_;
  std::vector<smt::Expr> path_;
  // Keyed by the expressions themselves, not their Z3 ids: an id is reused once
  // its AST dies, and a stale id would answer for a different formula.
  struct QueryKey {
    std::vector<smt::Expr> path;
    smt::Expr cond;
    bool operator==(const QueryKey &o) const;
  };
  struct QueryKeyHash {
    size_t operator()(const QueryKey &k) const;
  };
  std::unordered_map<QueryKey, bool, QueryKeyHash> impliesCache_, feasibleCache_;
  // simplifyCond's answers: a function of the path and the condition (the
  // entailments it asks are cached the same way).
  std::unordered_map<QueryKey, smt::Expr, QueryKeyHash> simplifyCache_;
  unsigned cacheHits_ = 0;
  uint64_t rewriteSteps_ = 0;
  size_t maxTermNodes_ = SIZE_MAX;
  bool sawUnknown_ = false;
  std::string unknownReason_;
};

} // namespace shardproof::relation
