// Shape arithmetic: integer values of small tensors computed from the integer
// values of their inputs, symbolically (`seq * 2`, `ite(seq == -1, 1, seq)`).
// torch.onnx.export writes a dynamic `expand` or `view` as Shape -> Gather ->
// Concat -> Mul / Equal / Where -> Reshape -> Expand; following those values is
// what gives the Expand or Reshape at the end its symbolic target shape.
#include "shardproof/ir/Ops.h"

namespace shardproof::ir {
namespace {

using smt::Expr;

constexpr int64_t kMaxValues = 64; // shape vectors are tiny; larger tensors are data

Expr truth(const Expr &b) { return ite(b, Expr::intConst(1), Expr::intConst(0)); }
Expr isTrue(const Expr &v) { return v != Expr::intConst(0); }

// Element `flat` of the output, read from input `in` broadcast numpy-style.
const Expr &broadcastRead(const IntTensor &in, const std::vector<int64_t> &outDims, int64_t flat) {
  std::vector<int64_t> idx(outDims.size());
  for (size_t d = outDims.size(); d-- > 0;) {
    idx[d] = flat % outDims[d];
    flat /= outDims[d];
  }
  int64_t src = 0;
  size_t lead = outDims.size() - in.dims.size();
  for (size_t d = 0; d < in.dims.size(); ++d)
    src = src * in.dims[d] + (in.dims[d] == 1 ? 0 : idx[lead + d]);
  return in.vals[src];
}

// ONNX integer Div truncates toward zero; Mod is Python's % (the divisor's
// sign) or, with fmod=1, C's (the dividend's). Exact for every sign; a
// dividend proven >= 0 gets the plain form the index simplifier knows. A
// divisor that may be 0 is an obligation of the node (inferIntDivMod).
std::optional<Expr> divMod(const OpInputs &in, const std::string &op, const Expr &a, const Expr &b) {
  bool nonNeg = (a.asInt() && *a.asInt() >= 0) || (in.nonNegative && in.nonNegative(a));
  Expr r = op == "Div" ? truncDiv(a, b, nonNeg)
           : attrInt(in.node, "fmod", 0) == 1 ? truncMod(a, b, nonNeg) : floorModSigned(a, b, nonNeg);
  return r.isValid() ? std::optional<Expr>(r) : std::nullopt;
}

std::optional<Expr> scalarOp(const OpInputs &in, const std::string &op, const std::vector<Expr> &a) {
  if (op == "Add") return a[0] + a[1];
  if (op == "Sub") return a[0] - a[1];
  if (op == "Mul") return a[0] * a[1];
  if (op == "Div" || op == "Mod") return divMod(in, op, a[0], a[1]);
  if (op == "Max") return max(a[0], a[1]);
  if (op == "Min") return min(a[0], a[1]);
  if (op == "Equal") {
    // A size compared with -1 (torch's expand writes Where(shape == -1, 1,
    // shape)) is never equal: folding it keeps the size itself as the dim.
    auto negative = [](const Expr &e) { return e.asInt() && *e.asInt() < 0; };
    if (in.nonNegative && ((negative(a[1]) && !a[0].asInt() && in.nonNegative(a[0])) ||
                           (negative(a[0]) && !a[1].asInt() && in.nonNegative(a[1]))))
      return Expr::intConst(0);
    return truth(a[0] == a[1]);
  }
  if (op == "Less") return truth(a[0] < a[1]);
  if (op == "Greater") return truth(a[0] > a[1]);
  if (op == "LessOrEqual") return truth(a[0] <= a[1]);
  if (op == "GreaterOrEqual") return truth(a[0] >= a[1]);
  if (op == "And") return truth(isTrue(a[0]) && isTrue(a[1]));
  if (op == "Or") return truth(isTrue(a[0]) || isTrue(a[1]));
  if (op == "Where") return ite(isTrue(a[0]), a[1], a[2]);
  if (op == "Neg") return -a[0];
  if (op == "Not") return truth(!isTrue(a[0]));
  if (op == "Abs") return ite(a[0] < Expr::intConst(0), -a[0], a[0]);
  if (op == "Identity" || op == "Cast") return a[0];
  return std::nullopt;
}

bool sameLayout(const std::string &op) {
  // The values are unchanged, only the shape differs.
  return op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" || op == "Expand";
}

// Reductions of a small integer tensor (torch's x.std writes the element
// count as ReduceProd over a slice of Shape): the reduced axes are the op's
// ReduceState (inferReduce).
std::optional<IntTensor> foldReduce(const OpInputs &in, const OpResult &r, IntTensor out) {
  const std::string &op = in.node.opType;
  Fn red = op == "ReduceSum" ? Fn::Add : op == "ReduceProd" ? Fn::Mul : op == "ReduceMax" ? Fn::Max2 : Fn::Min2;
  const ReduceState *st = r.stateIf<ReduceState>();
  if (in.values.empty() || !in.values[0] || !st)
    return std::nullopt;
  const IntTensor &x = *in.values[0];
  int64_t inCount = 1;
  for (auto d : x.dims)
    inCount *= d;
  if (inCount != static_cast<int64_t>(x.size()) || x.dims.size() != in.shapes[0]->rank())
    return std::nullopt;
  std::vector<bool> reduced(x.dims.size(), false);
  for (int64_t a : st->axes)
    reduced[a] = true;
  int64_t outCount = 1;
  for (auto d : out.dims)
    outCount *= d;
  std::vector<std::optional<Expr>> acc(outCount);
  for (int64_t f = 0; f < inCount; ++f) {
    // The output position of input element f: its kept coordinates, row-major.
    int64_t rest = f, o = 0, stride = 1;
    for (size_t d = x.dims.size(); d-- > 0;) {
      int64_t c = rest % x.dims[d];
      rest /= x.dims[d];
      if (!reduced[d]) {
        o += c * stride;
        stride *= x.dims[d];
      }
    }
    const Expr &v = x.vals[f];
    auto &a = acc[o];
    a = !a ? v : red == Fn::Add ? *a + v : red == Fn::Mul ? *a * v : red == Fn::Max2 ? max(*a, v) : min(*a, v);
  }
  for (auto &a : acc) {
    // An empty reduction: the identity (no integer one for max/min).
    if (!a && (red == Fn::Max2 || red == Fn::Min2))
      return std::nullopt;
    out.vals.push_back(a ? a->simplify() : Expr::intConst(red == Fn::Mul ? 1 : 0));
  }
  return out;
}

} // namespace

std::optional<IntTensor> foldIntValues(const OpInputs &in, const OpResult &r, unsigned slot) {
  const Node &n = in.node;
  if (!n.domain.empty() || slot != 0 || r.shapes.empty() || isFloating(r.dtypes[0]))
    return std::nullopt;
  std::vector<int64_t> outDims;
  int64_t count = 1;
  for (auto &d : r.shapes[0].dims) {
    auto v = d.asInt();
    if (!v || *v < 0)
      return std::nullopt;
    outDims.push_back(*v);
    count *= *v;
  }
  if (count > kMaxValues)
    return std::nullopt;
  IntTensor out;
  out.dims = outDims;
  const std::string &op = n.opType;
  if (op == "ReduceSum" || op == "ReduceProd" || op == "ReduceMax" || op == "ReduceMin")
    return foldReduce(in, r, out);
  if (op == "Clip") {
    // Optional bounds: min(max(x, lo), hi) with the absent ones left out.
    for (unsigned i = 0; i < 3; ++i)
      if (in.has(i) && (i >= in.values.size() || !in.values[i] || (i > 0 && in.values[i]->size() != 1)))
        return std::nullopt;
    if (!in.has(0) || in.values[0]->size() != static_cast<size_t>(count))
      return std::nullopt;
    for (auto v : in.values[0]->vals) {
      if (in.has(1))
        v = max(v, in.values[1]->vals[0]);
      if (in.has(2))
        v = min(v, in.values[2]->vals[0]);
      out.vals.push_back(v.simplify());
    }
    return out;
  }
  // Only the data input carries values for layout ops (the rest is the shape).
  size_t nInputs = sameLayout(op) ? 1 : in.values.size();
  std::vector<const IntTensor *> args;
  for (size_t i = 0; i < nInputs; ++i) {
    if (i >= in.values.size() || !in.values[i])
      return std::nullopt;
    args.push_back(&*in.values[i]);
  }
  if (args.empty())
    return std::nullopt;
  if (sameLayout(op) && op != "Expand") {
    if (static_cast<int64_t>(args[0]->size()) != count)
      return std::nullopt;
    out.vals = args[0]->vals;
    return out;
  }
  for (auto *a : args)
    if (a->dims.size() > outDims.size())
      return std::nullopt;
  for (int64_t f = 0; f < count; ++f) {
    std::vector<Expr> xs;
    for (auto *a : args)
      xs.push_back(broadcastRead(*a, outDims, f));
    auto v = op == "Expand" ? std::optional<Expr>(xs[0]) : scalarOp(in, op, xs);
    if (!v)
      return std::nullopt;
    out.vals.push_back(v->simplify());
  }
  return out;
}

} // namespace shardproof::ir
