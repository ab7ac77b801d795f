// Internal: the state of one check, shared by the files of the relation layer.
#pragma once

#include "Classes.h"
#include "IndexValues.h"
#include "MemoKeys.h"
#include "Values.h"
#include "Witness.h"
#include "NodeMemo.h"
#include "OpBridge.h"
#include "Prover.h"
#include "Render.h"
#include "Replayer.h"
#include "Sources.h"

#include "shardproof/ir/ConstantMask.h"
#include "shardproof/ir/Ops.h"
#include "shardproof/relation/Verifier.h"

#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace shardproof::relation {

struct PendingObligation {
  ir::Obligation obl;
  int rank; // -1: reference graph
  std::string node, module;
};

struct Session {
  const ir::Graph &ref;
  const std::vector<ir::Graph> &ranks;
  const spec::Spec &spec;
  Options opts;
  smt::Solver solver;
  ClassTable classes;
  Prover prover;
  /// Integer data read as index expressions (IndexValues.h).
  IndexValues ints{classes};
  std::vector<std::vector<ValueInfo>> rankValues;
  std::vector<ValueInfo> refValues;
  std::vector<PendingObligation> obligations;
  Result result;
  std::set<std::string> reportedRankNodes; // rank nodes already reported as unsupported
  /// Element maps, covers and renderings reused across layers identical up
  /// to names (a cache: render() is const).
  mutable NodeMemo memo;
  /// Index expression -> the same over pattern indices (i!d -> u!d), keyed by
  /// AST id; the entry holds the expression so the id stays its own.
  std::unordered_map<unsigned, std::pair<smt::Expr, smt::Expr>> iToU;

  Session(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec, const Options &o)
      : ref(ref), ranks(ranks), spec(spec), opts(o), solver(o.solverTimeoutMs), prover(solver, classes) {
    prover.setMaxTermNodes(o.maxTermNodes);
    solver.setMemo(o.memo);
  }

  int worldSize() const { return static_cast<int>(ranks.size()); }
  /// Solver queries that ended Unknown so far (timeouts, memory, the budget).
  unsigned unknownQueries() const;
  std::string rankFile(int r) const { return ranks[r].path; }

  /// Rank-only dims bound by the spec's placements, per rank (RankSymbols.cpp).
  std::vector<std::map<std::string, smt::Expr>> rankDims;

  // RankSymbols.cpp
  llvm::Error bindRankSymbols();
  /// Declared shape of a rank graph's value with its rank-only dims bound.
  std::optional<ir::Shape> rankShapeOf(int r, int id) const;
  // World.cpp
  llvm::Error setupSymbols();
  llvm::Error bindInputs();
  llvm::Expected<std::vector<std::pair<std::string, spec::Placement>>>
  expandPatterns(const std::vector<std::string> &sources) const;
  llvm::Error buildRanks();
  // Infer.cpp
  llvm::Error inferReference();
  Term coverMemoized(const Term &t, const ir::Shape &shape, unsigned &matches);
  /// A read of a fresh leaf standing for reference tensor `id` (see
  /// ClassInfo::abstractedReference), at the free indices i!0...
  ir::Term abstractReference(int id);
  // Propose.cpp
  /// Reference tensor `id`'s term as the ranks' tensors of the same name
  /// (replicated, partial or one shard axis), when that is proven.
  std::optional<Term> proposeByName(int id);
  void labelProvenOutput(const std::string &name, const spec::Placement &pl);
  /// Whether `a` and `b` (element terms of a tensor of `shape`) differ on
  /// numbers at the smallest admissible sizes, at a few elements.
  bool differsOnNumbers(const Term &a, const Term &b, const ir::Shape &shape);
  /// The smallest admissible sizes (computed once; empty if none).
  std::optional<std::map<std::string, int64_t>> smallestSizes;
  /// Unfolds rank tensors into their definitions, one layer at a time, until
  /// `a` and `b` are proven equal (nullopt) or the unfolding stops (the
  /// difference left).
  std::optional<smt::Expr> unfoldUntilEqual(Term a, Term b, smt::Expr diff, unsigned maxSteps);
  // Check.cpp
  void checkObligations();
  llvm::Error checkOutputs();
  llvm::Expected<OutputResult> checkClaim(int id, const spec::Placement &pl);
  void decide();
  void demoteProvenBranches();

  // Shared helpers
  /// Bounds of the free index variables of a tensor of this shape.
  static smt::Expr bounds(const ir::Shape &s, const char *prefix = "i");
  /// The op table's view of a node's inputs (OpBridge.h).
  OpBridge ops{classes, prover, ints, worldSize()};
  std::optional<ir::OpInputs> gatherInputs(const ir::Graph &g, const ir::Node &n,
                                           const std::vector<ValueInfo> &values, std::string &why) {
    return ops.gather(g, n, values, why);
  }
  /// Evaluates one node with the op table; fills `values` for its outputs.
  llvm::Error evalNode(const ir::Graph &g, const ir::Node &n, std::vector<ValueInfo> &values, int rank);
  void boundValues(ClassId c, const spec::Placement &pl);
  static std::optional<ir::IntTensor> exactValues(const ir::Shape &s, const spec::Placement &pl);
  llvm::Error bindRelationLeaves(const spec::RelExpr &e);
  llvm::Error checkElementCount(const std::string &name, const ir::Shape &shape, const spec::Placement &pl);
  Term valueTerm(ClassId c, const spec::Placement &pl);
  /// A leaf class for input `name` of this shape, shared by every rank, with
  /// the spec's value range or binding: the term every rank reads it by.
  Term boundLeaf(const std::string &name, const ir::Shape &shape, const spec::Placement &pl);
  Term exposeMask(const Term &t) const;
  Term shapeValueTerm(const ir::IntTensor &v, const ir::IndexVec &idx, int level);
  llvm::Error bindRankOnlyValue(const std::string &name, const spec::Placement &pl);
  ValueInfo constantValue(const std::string &name, const std::shared_ptr<const ir::TensorData> &data);
  /// Element term of a spec relation expression over the ranks' tensors.
  llvm::Expected<std::pair<Term, ir::Shape>> compileRelation(const spec::RelExpr &e);
  std::string render(const Term &t) const { return renderTerm(classes, memo, opts.memo, t); }
  std::optional<smt::Expr> indexValue(const ClassTable &table, const Term &t) const { return ints.indexValue(table, t); }
  std::optional<smt::Expr> constantCondition(const ClassTable &table, const Term &t) const {
    return ints.constantCondition(table, t);
  }
  std::string valueFunction(ClassId c) const { return ints.valueFunction(c); }
  bool knownNonNegative(const smt::Expr &e) const { return ints.knownNonNegative(e); }
  /// `t` rendered with the symbols and index variables of `m` substituted.
  std::string renderAt(const Term &t, const smt::Model &m) const;
  std::string className(ClassId c) const { return classes.label(c); }
  Counterexample makeCounterexample(const smt::Expr &region, const std::string &tensor, int rank,
                                    const ir::Shape &shape, const Term &expected, const Term &actual);
  /// The witness phase over this check's reference, values and solver (Witness.h).
  Witness witness() {
    return Witness(ref, refValues, solver, classes, prover, ints, ops, symbolNames(),
                   [this](const Term &t) { return render(t); });
  }
  std::vector<std::string> symbolNames() const;
  /// check --sample: executes the reference graph and the rank side of every
  /// output at random admissible sizes and compares (Sample.cpp).
  void sampleCheck();
  /// Under a replayed output difference, names where the implementation
  /// departs: the rank nodes between the tensors proven equal to the
  /// reference's and the failing element (Localize.cpp). Only what the failure
  /// blames changes, never a verdict.
  void localizeDeparture(Failure &f, const Term &expected, const Term &actual);
  /// Outputs whose departure starts in a module only the ranks have: their
  /// mismatch is shown before a reference node without a relation.
  std::set<std::string> departsInRankOnlyModule;
};

/// Shard r's size of an axis of length n under the placement's split policy
/// (nullopt: not given), pushing the conditions the policy needs.
std::optional<smt::Expr> policySize(const spec::Placement &p, const smt::Expr &n, int r, int world,
                                    std::vector<ir::Obligation> &obl, const std::string &tensor);
/// A graph value's declared shape (initializers: their dims); nullopt if none.
std::optional<ir::Shape> declaredShape(const ir::Graph &g, int id);
/// The length the shards of an axis of length n add up to (padded or n).
smt::Expr paddedLength(const spec::Placement &p, const smt::Expr &n);

/// The implementation side of a claim about reference tensor `name`: one term
/// per rank for `replicated`, else one term (rank -1) (Check.cpp).
llvm::Expected<std::vector<std::pair<int, std::pair<Term, ir::Shape>>>>
outputSides(Session &S, const std::string &name, const spec::Placement &pl);

} // namespace shardproof::relation
