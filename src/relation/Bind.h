// Internal: input binding, the first phase (RankSymbols.cpp, World.cpp,
// Values.cpp). It binds the size symbols (the spec's and the rank graphs'
// own dims), then every reference and rank input and initializer to the
// spec's placements: leaves shared by the ranks, value ranges, constants.
#pragma once

#include "Core.h"

#include "shardproof/ir/ConstantMask.h"
#include "shardproof/ir/Ops.h"
#include "shardproof/relation/Verifier.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace shardproof::relation {

/// What input binding returns: the values of the graphs' inputs and
/// initializers, and the size conditions the placements raise.
struct BoundInputs {
  std::vector<ValueInfo> refValues;
  std::vector<std::vector<ValueInfo>> rankValues;
  std::vector<PendingObligation> obligations;
};

class InputBinding {
public:
  explicit InputBinding(CheckCore &core)
      : core(core), ref(core.ref), ranks(core.ranks), spec(core.spec), solver(core.solver), classes(core.classes),
        prover(core.prover), ints(core.ints), result(core.result) {}

  /// Binds the symbols (and sets `core.symbols`), then the inputs. A spec
  /// that does not fit the models is a user error.
  llvm::Expected<BoundInputs> run();

private:
  // What binding reads and writes of the core: its notes go to the result.
  CheckCore &core;
  const ir::Graph &ref;
  const std::vector<ir::Graph> &ranks;
  const spec::Spec &spec;
  smt::Solver &solver;
  ClassTable &classes;
  Prover &prover;
  IndexValues &ints;
  Result &result;

  std::vector<std::vector<ValueInfo>> rankValues;
  std::vector<ValueInfo> refValues;
  std::vector<PendingObligation> obligations;
  /// Rank-only dims bound by the spec's placements, per rank (RankSymbols.cpp).
  std::vector<std::map<std::string, smt::Expr>> rankDims;

  int worldSize() const { return static_cast<int>(ranks.size()); }
  // RankSymbols.cpp
  llvm::Error bindRankSymbols();
  /// Declared shape of a rank graph's value with its rank-only dims bound.
  std::optional<ir::Shape> rankShapeOf(int r, int id) const;
  // World.cpp
  /// The free size symbols once the rank symbols are bound.
  std::vector<std::string> symbolNames() const;
  llvm::Error setupSymbols();
  /// Every size a graph was captured for covers what the spec admits.
  llvm::Error checkCapturedSizes();
  llvm::Error checkCapturedGuards(const ir::Graph &g);
  /// The reference and every rank graph.
  std::vector<const ir::Graph *> capturedGraphs() const;
  llvm::Error bindInputs();
  /// A placed reference input and its rank counterparts (none for a relation,
  /// which names its own rank tensors).
  struct Placed {
    std::string name;
    spec::Placement pl;
    int refId;
    ir::Shape refShape;
    std::vector<int> rankIds;
    std::vector<ir::Shape> rankShapes;
  };
  std::vector<std::string> referenceSources() const;
  llvm::Expected<Placed> locate(const std::string &name, const spec::Placement &pl);
  llvm::Error sameRankAs(const Placed &in, int r) const;
  llvm::Error bindPlaced(const Placed &in);
  llvm::Error bindReplicated(const Placed &in);
  llvm::Error bindSplit(const Placed &in);
  llvm::Error bindRelation(const Placed &in);
  llvm::Error bindUnplacedReferenceSources(const std::set<std::string> &bound);
  llvm::Error bindUnplacedRankSources();
  llvm::Expected<std::vector<std::pair<std::string, spec::Placement>>>
  expandPatterns(const std::vector<std::string> &sources) const;
  llvm::Error bindRelationLeaves(const spec::RelExpr &e);
  // Values.cpp
  void boundValues(ClassId c, const spec::Placement &pl);
  static std::optional<ir::IntTensor> exactValues(const ir::Shape &s, const spec::Placement &pl);
  llvm::Error checkElementCount(const std::string &name, const ir::Shape &shape, const spec::Placement &pl);
  Term valueTerm(ClassId c, const spec::Placement &pl);
  /// A leaf class for input `name` of this shape, shared by every rank, with
  /// the spec's value range or binding: the term every rank reads it by.
  Term boundLeaf(const std::string &name, const ir::Shape &shape, const spec::Placement &pl);
  llvm::Error bindRankOnlyValue(const std::string &name, const spec::Placement &pl);
};

/// Shard r's size of an axis of length n under the placement's split policy
/// (nullopt: not given), pushing the conditions the policy needs.
std::optional<smt::Expr> policySize(const spec::Placement &p, const smt::Expr &n, int r, int world,
                                    std::vector<ir::Obligation> &obl, const std::string &tensor);
/// A graph value's declared shape (initializers: their dims); nullopt if none.
std::optional<ir::Shape> declaredShape(const ir::Graph &g, int id);

} // namespace shardproof::relation
