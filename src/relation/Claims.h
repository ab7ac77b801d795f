// Internal: the spec's claims about reference tensors (its outputs, and its
// `layers:` checkpoints during the reference walk), each proven, refuted with a
// replayed witness, or left unknown (Claims.cpp). A refuted claim's failure
// names where the implementation departs (Localize.cpp).
#pragma once

#include "Core.h"
#include "RankSides.h"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardproof::relation {

class PendingReference;

class Claims {
public:
  /// Reads the values both sides computed (the reference's as the walk has
  /// them so far).
  Claims(CheckCore &core, const std::vector<ValueInfo> &refValues,
         const std::vector<std::vector<ValueInfo>> &rankValues, PendingValues *pending = nullptr)
      : core(core), refValues(refValues), rankValues(rankValues), pending(pending) {}

  /// One claim about reference tensor `id`; its failures go to the result,
  /// the size conditions of a spec relation to `raised`.
  llvm::Expected<OutputResult> check(int id, const spec::Placement &pl, std::vector<PendingObligation> &raised);
  /// The implementation side of claims over the ranks' tensors.
  RankSides sides(std::vector<PendingObligation> &raised) const {
    return RankSides(core.ref, refValues, core.ranks, rankValues, raised, pending);
  }
  /// Unfolds rank tensors into their definitions, one layer at a time, until
  /// `a` and `b` are proven equal (nullopt) or the unfolding stops (the
  /// difference left).
  std::optional<smt::Expr> unfoldUntilEqual(Term a, Term b, smt::Expr diff, unsigned maxSteps);
  /// Outputs whose departure starts in a module only the ranks have: their
  /// mismatch is shown before a reference node without a relation.
  const std::set<std::string> &departingInRankOnlyModule() const { return departsInRankOnlyModule; }
  /// The implementation is already refuted (`why`: a size obligation of a
  /// rank that fails). An output found neither equal by the quick unfolding
  /// nor different on numbers is then left undecided instead of unfolded to
  /// the limit: that search cannot change the verdict, and took minutes.
  void alreadyRefuted(std::string why) { refutedBy = std::move(why); }
  /// The reference values the walk's layer copies left to be made when read
  /// (LayerCopy.h): a claim makes its tensor's, a replay all of them.
  void setPendingReference(std::shared_ptr<PendingReference> p) { pendingRef = std::move(p); }
  /// Every reference value, made: what a replay of the reference graph reads.
  const std::vector<ValueInfo> &allReferenceValues();

private:
  CheckCore &core;
  const std::vector<ValueInfo> &refValues;
  const std::vector<std::vector<ValueInfo>> &rankValues;
  PendingValues *pending;
  std::shared_ptr<PendingReference> pendingRef;
  std::set<std::string> departsInRankOnlyModule;
  std::string refutedBy; // empty: not refuted yet

  bool shapesAgree(OutputResult &res, int rank, const ir::Shape &impl, const ir::Shape &shape);
  std::optional<Counterexample> dimCountMismatch(OutputResult &res, int rank, const ir::Shape &impl,
                                                 const ir::Shape &shape);
  bool dimAgrees(OutputResult &res, int rank, size_t d, const smt::Expr &impl, const smt::Expr &want,
                 std::optional<Counterexample> &sizesCex);
  bool elementsAgree(OutputResult &res, int id, int rank, const Term &side);
  /// Under a replayed output difference, names where the implementation
  /// departs: the rank nodes between the tensors proven equal to the
  /// reference's and the failing element (Localize.cpp). Only what the failure
  /// blames changes, never a verdict.
  void localizeDeparture(Failure &f, const Term &expected, const Term &actual);
};

} // namespace shardproof::relation
