// Internal: the rank world (Ranks.cpp). The rank graphs are evaluated in
// lock-step, so that each collective sees the matching call on every rank;
// computed tensors become hash-consed classes of the shared table.
#pragma once

#include "Core.h"
#include "LayerCopy.h"
#include "NodeEval.h"

#include <memory>
#include <unordered_map>
#include <vector>

namespace shardproof::relation {

class RankWorld {
public:
  /// `rankValues` holds each rank's bound inputs and initializers; the world
  /// fills in every node's outputs.
  RankWorld(CheckCore &core, NodeEvaluator &nodes, std::vector<std::vector<ValueInfo>> &rankValues)
      : core(core), nodes(nodes), ranks(core.ranks), classes(core.classes), prover(core.prover),
        rankValues(rankValues) {}

  /// Evaluates every rank's nodes and collectives; returns the size conditions
  /// they raised. Ranks whose collective calls do not line up are a user error.
  llvm::Expected<std::vector<PendingObligation>> build();

  // What the collective and interning steps of Ranks.cpp read and write.
  CheckCore &core;
  NodeEvaluator &nodes;
  const std::vector<ir::Graph> &ranks;
  ClassTable &classes;
  Prover &prover;
  std::vector<std::vector<ValueInfo>> &rankValues;
  std::vector<PendingObligation> obligations;
  /// Whole-layer reuse (LayerCopy.h); null while it is not set up.
  LayerCopy *layers = nullptr;
  /// After build: the values its copies left pending, made when first read
  /// (the reference walk and the claims ask it); null without copies.
  PendingValues *pending() const { return copier_.get(); }
  /// After build: per layer it copied, the renaming of the layer below's
  /// classes to its own (where the reference walk's copy starts).
  std::vector<std::optional<Renaming>> layerMaps;
  /// Index expression -> the same over pattern indices (i!d -> u!d), keyed by
  /// AST id; the entry holds the expression so the id stays its own.
  std::unordered_map<unsigned, std::pair<smt::Expr, smt::Expr>> iToU;
  int worldSize() const { return static_cast<int>(ranks.size()); }

private:
  std::unique_ptr<LayerCopy> copier_;
};

} // namespace shardproof::relation
