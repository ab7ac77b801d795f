// Internal: one node through the op table (EvalNode.cpp): its inputs gathered,
// shapes and side conditions inferred, element maps built and normalized;
// reused from the same node one layer up when NodeMemo has it. The rank world
// and the reference walk evaluate their nodes with it.
#pragma once

#include "Core.h"
#include "MemoKeys.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace shardproof::relation {

class NodeEvaluator {
public:
  explicit NodeEvaluator(CheckCore &core) : core(core) {}

  /// Evaluates node `n` of `g` (rank `rank`; -1: the reference graph) and
  /// fills `values` for its outputs; its side conditions go to `raised`. Only
  /// a reference node that cannot run is an error (the user's model).
  llvm::Error eval(const ir::Graph &g, const ir::Node &n, std::vector<ValueInfo> &values, int rank,
                   std::vector<PendingObligation> &raised);

private:
  CheckCore &core;
  std::set<std::string> reportedRankNodes; // rank nodes already reported as unsupported

  /// The node being evaluated, with where its results go.
  struct Step {
    const ir::Graph &g;
    const ir::Node &n;
    std::vector<ValueInfo> &values;
    int rank;
    std::vector<PendingObligation> &raised;
  };
  static void markUnsupported(const Step &s, const std::string &why);
  void originUnsupported(const Step &s, const std::string &why);
  llvm::Error inferFailed(const Step &s, llvm::Error e);
  static void applyResult(const Step &s, const ir::OpResult &r);
  bool reuseFromLayerBelow(const Step &s, const MemoKey &key);
  static bool onlyShapeData(const Step &s, const ir::OpResult &r);
  void constantOutput(const Step &s);
  void buildElementMaps(const Step &s, const ir::OpDef &def, const ir::OpInputs &in, const ir::OpResult &r);
  Term shapeValueTerm(const ir::IntTensor &v, const ir::IndexVec &idx, int level);
  Term exposeMask(const Term &t) const;
};

/// A constant tensor's value (an initializer, a Constant node): a number, or a
/// read of a constant class shared by content.
ValueInfo constantValue(ClassTable &classes, const std::string &name,
                        const std::shared_ptr<const ir::TensorData> &data);

} // namespace shardproof::relation
