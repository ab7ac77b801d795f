// Internal: the output check, the last phase (Check.cpp). It decides the size
// obligations the earlier phases raised, checks the spec's claim on every
// reference output, and returns the Result: verdict, the failure shown first,
// stats.
#pragma once

#include "Claims.h"
#include "Core.h"

#include <llvm/ADT/StringMap.h>

#include <functional>
#include <string>
#include <vector>

namespace shardproof::relation {

class OutputCheck {
public:
  OutputCheck(CheckCore &core, Claims &claims) : core(core), claims(claims) {}

  /// Takes the result under construction out of `core`. A spec output the
  /// reference lacks, or a reference output without placement, is a user error.
  /// `explainNoRelation` completes a missing relation's failure if it is kept
  /// (WalkResult).
  llvm::Expected<Result> run(const std::vector<PendingObligation> &obligations,
                             const std::function<void(Failure &)> &explainNoRelation = {});
  /// Decides the obligations raised before the reference walk (binding, the
  /// rank world); run() then takes only the later ones. If one of the
  /// implementation fails, the check is refuted already: what follows only
  /// explains it, and is kept short (explainOnlyIfRefuted()).
  void decideEarly(const std::vector<PendingObligation> &obligations);

private:
  CheckCore &core;
  Claims &claims;
  /// The relation table's row of each tensor (the first), for labelling the
  /// proven outputs: a search per output was quadratic in a training step.
  llvm::StringMap<size_t> rowOf;

  void checkObligations(const std::vector<PendingObligation> &obligations);
  /// If a failed obligation of the implementation already refutes, the
  /// claims stop searching and the solver's timeout is shortened.
  void explainOnlyIfRefuted();
  Failure obligationFailure(const PendingObligation &po, const smt::Proof &p);
  Counterexample obligationCounterexample(const PendingObligation &po, const smt::Proof &p);
  /// Each output against its placement; the size conditions its relation
  /// raises go to `fromRelations`.
  llvm::Error checkOutputs(std::vector<PendingObligation> &fromRelations);
  llvm::Expected<spec::Placement> placementOf(const std::string &output);
  void labelProvenOutput(const std::string &name, const spec::Placement &pl);
  void decide(const std::function<void(Failure &)> &explainNoRelation);
  void demoteProvenBranches();
  void moveToNotes(const std::function<bool(const Failure &)> &isNote, const std::string &why);
  void orderFailures();
  void blameTheBudget();
};

} // namespace shardproof::relation
