// Internal: the state of the phases not yet cut out as objects, over the
// shared core (Core.h).
#pragma once

#include "Core.h"
#include "NodeEval.h"
#include "MemoKeys.h"
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

/// The phases not yet cut out as objects (input binding, the rank world), over
/// the shared core.
struct Session : CheckCore {
  std::vector<std::vector<ValueInfo>> rankValues;
  std::vector<ValueInfo> refValues;
  std::vector<PendingObligation> obligations;
  /// Index expression -> the same over pattern indices (i!d -> u!d), keyed by
  /// AST id; the entry holds the expression so the id stays its own.
  std::unordered_map<unsigned, std::pair<smt::Expr, smt::Expr>> iToU;

  using CheckCore::CheckCore;

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
  // Ranks.cpp
  llvm::Error buildRanks(NodeEvaluator &nodes);

  // Shared helpers
  void boundValues(ClassId c, const spec::Placement &pl);
  static std::optional<ir::IntTensor> exactValues(const ir::Shape &s, const spec::Placement &pl);
  llvm::Error bindRelationLeaves(const spec::RelExpr &e);
  llvm::Error checkElementCount(const std::string &name, const ir::Shape &shape, const spec::Placement &pl);
  Term valueTerm(ClassId c, const spec::Placement &pl);
  /// A leaf class for input `name` of this shape, shared by every rank, with
  /// the spec's value range or binding: the term every rank reads it by.
  Term boundLeaf(const std::string &name, const ir::Shape &shape, const spec::Placement &pl);
  llvm::Error bindRankOnlyValue(const std::string &name, const spec::Placement &pl);
  std::optional<smt::Expr> indexValue(const ClassTable &table, const Term &t) const { return ints.indexValue(table, t); }
  std::optional<smt::Expr> constantCondition(const ClassTable &table, const Term &t) const {
    return ints.constantCondition(table, t);
  }
  std::string valueFunction(ClassId c) const { return ints.valueFunction(c); }
  bool knownNonNegative(const smt::Expr &e) const { return ints.knownNonNegative(e); }
  std::string className(ClassId c) const { return classes.label(c); }
  /// The free size symbols once the rank symbols are bound (CheckCore::symbols).
  std::vector<std::string> symbolNames() const;
};

/// Shard r's size of an axis of length n under the placement's split policy
/// (nullopt: not given), pushing the conditions the policy needs.
std::optional<smt::Expr> policySize(const spec::Placement &p, const smt::Expr &n, int r, int world,
                                    std::vector<ir::Obligation> &obl, const std::string &tensor);
/// A graph value's declared shape (initializers: their dims); nullopt if none.
std::optional<ir::Shape> declaredShape(const ir::Graph &g, int id);

} // namespace shardproof::relation
