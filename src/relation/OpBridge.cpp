// What the op table needs to know of a node's inputs, gathered from the
// check's values (see OpBridge.h).
#include "OpBridge.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

std::optional<OpInputs> OpBridge::gather(const Graph &g, const Node &n, const std::vector<ValueInfo> &values,
                                         std::string &why) const {
  OpInputs in{n, {}, {}, {}, {}, worldSize};
  if (auto it = g.opsets.find(""); it != g.opsets.end())
    in.opset = it->second;
  in.indexValue = [this](const Term &t) { return ints.indexValue(classes, t); };
  in.nonNegative = [this](const Expr &e) {
    Expr x = e.simplify();
    if (ints.knownNonNegative(x))
      return true;
    if (!prover.implies(x >= Expr::intConst(0), "value.nonnegative"))
      return false;
    ints.provenNonNegative.push_back(x);
    return true;
  };
  in.inputValue = [this, &values, &n](unsigned i, const IndexVec &idx) -> std::optional<smt::Expr> {
    if (i >= n.inputs.size() || n.inputs[i] < 0 || !values[n.inputs[i]].term || !values[n.inputs[i]].shape)
      return std::nullopt;
    const ValueInfo &v = values[n.inputs[i]];
    return ints.indexValue(classes, instantiate(v.term, indexVars("i", static_cast<unsigned>(v.shape->rank())), idx, 0));
  };
  for (int id : n.inputs) {
    if (id < 0) {
      in.addOmitted();
      continue;
    }
    const ValueInfo &v = values[id];
    if (!v.unsupported.empty()) {
      why = v.unsupported;
      return std::nullopt;
    }
    if (!v.shape) {
      why = "no shape known for '" + g.values[id].name + "'";
      return std::nullopt;
    }
    in.shapes.push_back(v.shape);
    in.dtypes.push_back(v.dtype);
    in.values.push_back(v.value);
    in.data.push_back(v.data);
  }
  return in;
}

} // namespace shardproof::relation
