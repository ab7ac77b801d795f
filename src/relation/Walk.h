// Internal: the reference walk (Infer.cpp, Propose.cpp). Each reference node
// is evaluated over its inputs' relations, and each tensor it computes is
// covered by the ranks' classes (or proven equal to the ranks' tensors of the
// same name, or to the spec's claim at a `layers:` checkpoint). Relation rows,
// checkpoint claims and failures go to the result.
#pragma once

#include "Claims.h"
#include "Core.h"
#include "NodeEval.h"
#include "Replayer.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::relation {

/// What the walk hands the output check.
struct WalkResult {
  /// The size conditions its nodes and checkpoint claims raised.
  std::vector<PendingObligation> obligations;
  /// Fills in a failure's rank nodes near the first tensor without a relation
  /// and an element without a counterpart (empty if every tensor had one).
  /// Run only for a failure that is kept: under VERIFIED it is a note, which
  /// shows neither (they took 0.05 s at the 405B shape's LM end).
  std::function<void(Failure &)> explainNoRelation;
};

class ReferenceWalk {
public:
  /// `refValues` holds the bound inputs and initializers; the walk fills in
  /// every node's outputs. It reads the rank world's values.
  /// `rankLayerMaps`: the rank world's renamings of the layers it copied
  /// (RankWorld::layerMaps), where the walk's own layer copies start.
  /// `pending`: rank values the world's layer copies left to be made when
  /// read (null: none).
  ReferenceWalk(CheckCore &core, NodeEvaluator &nodes, Claims &claims, std::vector<ValueInfo> &refValues,
                const std::vector<std::vector<ValueInfo>> &rankValues,
                const std::vector<std::optional<Renaming>> &rankLayerMaps, PendingValues *pending = nullptr)
      : core(core), nodes(nodes), claims(claims), refValues(refValues), rankValues(rankValues),
        rankLayerMaps(rankLayerMaps), pending(pending) {}

  /// Walks the reference graph. A malformed reference or spec is a user error.
  llvm::Expected<WalkResult> run();

private:
  CheckCore &core;
  NodeEvaluator &nodes;
  Claims &claims;
  std::vector<ValueInfo> &refValues;
  const std::vector<std::vector<ValueInfo>> &rankValues;
  const std::vector<std::optional<Renaming>> &rankLayerMaps;
  PendingValues *pending;
  std::vector<PendingObligation> raised;
  /// Only the first reference node without a relation is a failure.
  bool reportedUnresolved = false;
  std::function<void(Failure &)> explainNoRelation; // see WalkResult
  /// The smallest admissible sizes (computed once; empty if none).
  std::optional<std::map<std::string, int64_t>> smallestSizes;
  /// Numbers at those sizes for every proposal of the walk: class elements
  /// are evaluated once, not once per proposal (each reaches back to the
  /// inputs, so per-proposal evaluation grew with the layers squared).
  std::unique_ptr<Replayer> probe;
  /// Full probes of this walk that ran out of steps (Propose.cpp).
  unsigned fullProbesGaveUp = 0;
  /// The shallow probes' replayer (Propose.cpp), shared by neighbouring
  /// tensors while their cuts agree: the LM end's tensors all read the same
  /// logits, which cost 0.4 s to evaluate at the bench's widths.
  std::unique_ptr<Replayer> shallowProbe;
  /// One tensor's use of it: started on the first candidate that needs it,
  /// given up once for all of them. The full probe too is given up once: the
  /// next side reads the same reference term, whose evaluation is most of the
  /// cost (the loss's eight ranks at 126 layers: 1.6 M steps to no answer).
  struct ShallowUse {
    bool started = false;
    bool gaveUp = false;
    bool fullGaveUp = false;
  };

  using Checkpoints = std::map<std::string, const spec::Placement *>;
  llvm::Expected<Checkpoints> checkpoints() const;
  void stopAtDeadline(const ir::Node &n);
  /// `evaluated`: a reference layer copy evaluated it already (its Constant nodes).
  llvm::Error walkNode(const ir::Node &n, const Checkpoints &checkpoints, bool evaluated = false);
  llvm::Error relateOutput(const ir::Node &n, int o, unsigned unknownBefore, const Checkpoints &checkpoints);
  void reportUnsupported(const ir::Node &n, int o, RelationRow &row);
  RelationRow::Status coverOrView(const ir::Node &n, ValueInfo &v);
  llvm::Error proveCheckpoint(int o, const spec::Placement &pl, RelationRow &row);
  Failure noRelation(const ir::Node &n, int o, unsigned unknownBefore);
  /// `prover.cover` under the tensor's bounds (already on the path), reused
  /// for a term identical up to class names (the same tensor one layer up).
  Term coverMemoized(const Term &t, const ir::Shape &shape, unsigned &matches);
  /// A read of a fresh leaf standing for reference tensor `id` (see
  /// ClassInfo::abstractedReference), at the free indices i!0...
  Term abstractReference(int id);
  // Propose.cpp
  /// Reference tensor `id`'s term as the ranks' tensors of the same name
  /// (replicated, partial or one shard axis), when that is proven.
  std::optional<Term> proposeByName(int id);
  std::vector<spec::Placement> sameNamePlacements(int id);
  /// Whether `a` and `b` (element terms of a tensor of `shape`) differ on
  /// numbers at the smallest admissible sizes, at a few elements. `use`:
  /// the tensor's shallow probe, shared by every candidate's rank `sides`
  /// (started on first need, cut below what they and `a` read; Propose.cpp).
  /// `shard`: `b` concatenates the ranks' shards (points inside each are read too).
  bool differsOnNumbers(const Term &a, const Term &b, const ir::Shape &shape, ShallowUse &use,
                        const std::vector<Term> &sides, bool shard);
  std::optional<int> unreducedInput(const ir::Node &n) const;
};

} // namespace shardproof::relation
