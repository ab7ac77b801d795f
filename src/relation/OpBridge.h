// Internal: the bridge from the check's values to the op table (OpBridge.cpp).
// A node's OpInputs carry its inputs' shapes, dtypes, integer values and
// constant data, plus callbacks into the integer index values and the prover
// (is this size >= 0?). The rank world, the reference walk and the reference
// interpreter of the witness phase all evaluate nodes through it.
#pragma once

#include "Classes.h"
#include "IndexValues.h"
#include "Prover.h"
#include "Values.h"

#include "shardproof/ir/Ops.h"

#include <optional>
#include <string>
#include <vector>

namespace shardproof::relation {

class OpBridge {
public:
  OpBridge(ClassTable &classes, Prover &prover, IndexValues &ints, int worldSize)
      : classes(classes), prover(prover), ints(ints), worldSize(worldSize) {}
  /// What the op table needs to know of node `n`'s inputs; nullopt (with
  /// `why`) when an input is unsupported or has no known shape.
  std::optional<ir::OpInputs> gather(const ir::Graph &g, const ir::Node &n, const std::vector<ValueInfo> &values,
                                     std::string &why) const;

private:
  ClassTable &classes;
  Prover &prover;
  IndexValues &ints;
  int worldSize;
};

} // namespace shardproof::relation
