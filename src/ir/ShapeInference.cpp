// inferShapes: the op table's shape inference over a whole graph, in order.
#include "shardproof/ir/ShapeInference.h"

namespace shardproof::ir {

namespace {

// Integer data small enough to be shape arithmetic, as symbolic values.
std::optional<IntTensor> intValues(const TensorData &d) {
  if (!d.isInteger() || d.numElements() > 64)
    return std::nullopt;
  IntTensor t;
  t.dims = d.dims;
  for (int64_t x : d.ints)
    t.vals.push_back(smt::Expr::intConst(x));
  return t;
}

} // namespace

std::vector<InferredValue> inferShapes(const Graph &g, int worldSize, std::vector<Obligation> *obligations) {
  std::vector<InferredValue> out(g.values.size());
  for (size_t id = 0; id < g.values.size(); ++id) {
    const Value &v = g.values[id];
    out[id].dtype = v.dtype;
    if (v.init) {
      Shape s;
      for (int64_t d : v.init->dims)
        s.dims.push_back(smt::Expr::intConst(d));
      out[id].shape = s;
      out[id].data = v.init;
      out[id].value = intValues(*v.init);
    } else if (v.producer < 0 && v.declared) {
      out[id].shape = v.declared; // a graph input
    }
  }
  int64_t opset = 17;
  if (auto it = g.opsets.find(""); it != g.opsets.end())
    opset = it->second;
  for (const Node &n : g.nodes) {
    const OpDef *def = opOf(n);
    if (!def)
      continue;
    OpInputs in{n, {}, {}, {}, {}, worldSize, opset, {}, {}, {}};
    // Data-dependent indices (token ids) do not change a shape: their value is
    // some integer, named so that nothing mistakes it for a size.
    in.inputValue = [](unsigned, const IndexVec &) -> std::optional<smt::Expr> {
      return smt::Expr::intVar("data.value?");
    };
    bool known = true;
    for (int id : n.inputs) {
      if (id < 0) {
        in.addOmitted();
        continue;
      }
      known = known && out[id].shape.has_value();
      in.shapes.push_back(out[id].shape);
      in.dtypes.push_back(out[id].dtype);
      in.values.push_back(out[id].value);
      in.data.push_back(out[id].data);
    }
    if (!known)
      continue;
    auto res = inferNode(*def, in);
    if (!res) {
      llvm::consumeError(res.takeError());
      continue;
    }
    if (obligations)
      obligations->insert(obligations->end(), res->obligations.begin(), res->obligations.end());
    for (size_t s = 0; s < n.outputs.size() && s < res->shapes.size(); ++s) {
      InferredValue &o = out[n.outputs[s]];
      o.shape = res->shapes[s];
      if (s < res->dtypes.size())
        o.dtype = res->dtypes[s];
      if (s < res->values.size())
        o.value = res->values[s];
      // Shape arithmetic on small integer tensors (Mul of a dim by 2, ...).
      if (!o.value)
        o.value = foldIntValues(in, *res, static_cast<unsigned>(s));
    }
    // A Constant's data, for the shape arithmetic that reads it.
    if (n.opType == "Constant" && n.outputs.size() == 1)
      if (const Attribute *a = n.attr("value"); a && a->tensor) {
        out[n.outputs[0]].data = a->tensor;
        if (!out[n.outputs[0]].value)
          out[n.outputs[0]].value = intValues(*a->tensor);
      }
  }
  return out;
}

} // namespace shardproof::ir
