// Internal: the implementation side of the spec's claims, as element terms over
// the ranks' tensors (SpecRelation.cpp): a relation expression (concat, sum,
// slice, pad, transpose, reshape over NAME@RANK) compiled, or an output
// placement (replicated, partial, shard) assembled from the ranks' tensors.
// Used by input binding, the reference walk, the output check and --sample.
#pragma once

#include "Core.h"
#include "Pending.h"

#include <llvm/Support/Error.h>

#include <utility>
#include <vector>

namespace shardproof::relation {

class RankSides {
public:
  /// `rankValues` may still be filling (input binding compiles relations over
  /// the rank inputs bound so far); size conditions go to `raised`.
  RankSides(const ir::Graph &ref, const std::vector<ValueInfo> &refValues, const std::vector<ir::Graph> &ranks,
            const std::vector<std::vector<ValueInfo>> &rankValues, std::vector<PendingObligation> &raised,
            PendingValues *pending = nullptr)
      : ref(ref), refValues(refValues), ranks(ranks), rankValues(rankValues), raised(raised), pending(pending) {}

  /// Element term and shape of a spec relation expression.
  llvm::Expected<std::pair<Term, ir::Shape>> compileRelation(const spec::RelExpr &e);
  /// The implementation side of a claim about reference tensor `name`: one
  /// term per rank for `replicated`, else one term (rank -1).
  llvm::Expected<std::vector<std::pair<int, std::pair<Term, ir::Shape>>>> ofClaim(const std::string &name,
                                                                                  const spec::Placement &pl);

private:
  const ir::Graph &ref;
  const std::vector<ValueInfo> &refValues;
  const std::vector<ir::Graph> &ranks;
  const std::vector<std::vector<ValueInfo>> &rankValues;
  std::vector<PendingObligation> &raised;
  PendingValues *pending; // the world's copies (null while it is built)

  int worldSize() const { return static_cast<int>(ranks.size()); }
  llvm::Expected<std::pair<Term, ir::Shape>> rankTensor(const spec::RelExpr &e);
  // One function of the relation language each, over its compiled arguments.
  using Args = std::vector<std::pair<Term, ir::Shape>>;
  /// sum(...) and mean(...) (the sum divided by the number of arguments).
  llvm::Expected<std::pair<Term, ir::Shape>> sumOf(const spec::RelExpr &e, const Args &args);
  llvm::Expected<std::pair<Term, ir::Shape>> concatOf(const spec::RelExpr &e, const Args &args);
  llvm::Expected<std::pair<Term, ir::Shape>> sliceOrPad(const spec::RelExpr &e, const Args &args);
  llvm::Expected<std::pair<Term, ir::Shape>> transposeOf(const spec::RelExpr &e, const Args &args);
  llvm::Expected<std::pair<Term, ir::Shape>> reshapeOf(const spec::RelExpr &e, const Args &args);
};

/// The length the shards of an axis of length n add up to (padded or n).
smt::Expr paddedLength(const spec::Placement &p, const smt::Expr &n);

} // namespace shardproof::relation
