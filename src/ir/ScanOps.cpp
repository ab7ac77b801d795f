// Ops that rank or accumulate along one axis: CumSum (a sum whose range ends at
// the output's own index), ArgMax/ArgMin and TopK. ArgMax and TopK need no
// new term kind: positions are written as counts (sum over [0, k) of 1, the
// form Range uses) and the data comparisons as the opaque Equal/Greater/Where
// the comparison ops build, which Eval computes exactly.
#include "shardproof/ir/Ops.h"

namespace shardproof::ir {
namespace {

using smt::Expr;

// The integer `e` as a term: a count, sum(k!level in [0, e): 1), built at `level`.
Term countTerm(const Expr &e, int level) {
  if (auto v = e.simplify().asInt(); v && *v >= 0)
    return mkConst(static_cast<double>(*v));
  return mkSum(level, Expr::intConst(0), e, mkConst(1));
}

Term opaque(const char *name, std::vector<Term> args) { return mkApply(Fn::Opaque, std::move(args), name); }

// An attribute that must be 0 or 1; any other value is not a mode we model.
llvm::Expected<bool> flagAttr(const Node &n, const char *name, int64_t dflt) {
  int64_t v = attrInt(n, name, dflt);
  if (v != 0 && v != 1)
    return unsupportedError("node " + describe(n) + ": " + name + "=" + std::to_string(v));
  return v == 1;
}

// --- CumSum ------------------------------------------------------------------
struct CumSumState : OpState {
  int64_t axis = 0;
  bool exclusive = false, reverse = false;
};

// y[..i..] = sum of x[..k..] for k in [0, i] ([0, i) exclusive; [i, n) and
// (i, n) reversed) along the axis given as a constant scalar input.
llvm::Expected<OpResult> inferCumSum(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs x and axis");
  const Shape &s = *in.shapes[0];
  auto raw = intInput(in, 1, "the CumSum axis");
  if (!raw)
    return raw.takeError();
  if (raw->size() != 1)
    return userError("node " + describe(in.node) + ": axis has " + std::to_string(raw->size()) + " values, not one");
  auto v = constInt(in.node, (*raw)[0], "the CumSum axis");
  if (!v)
    return v.takeError();
  auto axis = normAxis(in.node, *v, s.rank());
  if (!axis)
    return axis.takeError();
  auto exclusive = flagAttr(in.node, "exclusive", 0);
  if (!exclusive)
    return exclusive.takeError();
  auto reverse = flagAttr(in.node, "reverse", 0);
  if (!reverse)
    return reverse.takeError();
  OpResult r = one(s, in.dtypes[0]);
  CumSumState &st = r.makeState<CumSumState>();
  st.axis = *axis;
  st.exclusive = *exclusive;
  st.reverse = *reverse;
  return r;
}

Term cumSum(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const CumSumState &st = r.stateAs<CumSumState>();
  int64_t axis = st.axis;
  bool exclusive = st.exclusive, reverse = st.reverse;
  const Expr &i = idx[axis], &n = in.shapes[0]->dims[axis];
  Expr one = Expr::intConst(1);
  Expr lo = reverse ? (exclusive ? i + one : i) : Expr::intConst(0);
  Expr hi = reverse ? n : (exclusive ? i : i + one);
  IndexVec src = idx;
  src[axis] = boundVar(level);
  return mkSum(level, lo, hi, read(0, src, level + 1));
}

// --- ArgMax / ArgMin -----------------------------------------------------------
// argmax = min over k of Where(Equal(x[k], max_j x[j]), k, n): the first index
// holding the maximum; with select_last_index, max over k of Where(.., k, -1).
struct ArgState : OpState {
  int64_t axis = 0;
  bool keep = true, last = false;
};

llvm::Expected<OpResult> inferArg(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  const Shape &s = *in.shapes[0];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), s.rank());
  if (!axis)
    return axis.takeError();
  auto keep = flagAttr(in.node, "keepdims", 1);
  if (!keep)
    return keep.takeError();
  auto last = flagAttr(in.node, "select_last_index", 0);
  if (!last)
    return last.takeError();
  Shape out;
  for (size_t d = 0; d < s.rank(); ++d)
    if (static_cast<int64_t>(d) != *axis)
      out.dims.push_back(s.dims[d]);
    else if (*keep)
      out.dims.push_back(Expr::intConst(1));
  OpResult r = one(out, DType::Int64);
  // The index of the extremum of nothing is not defined.
  r.obligations.push_back({"the reduced axis of " + describe(in.node) + " is not empty",
                           s.dims[*axis] >= Expr::intConst(1)});
  ArgState &st = r.makeState<ArgState>();
  st.axis = *axis;
  st.keep = *keep;
  st.last = *last;
  return r;
}

Term argExtremum(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
                 int level) {
  const Shape &s = *in.shapes[0];
  const ArgState &st = r.stateAs<ArgState>();
  int64_t axis = st.axis;
  bool keep = st.keep, last = st.last;
  Fn extremum = in.node.opType == "ArgMax" ? Fn::Max2 : Fn::Min2;
  IndexVec at;
  for (size_t d = 0, o = 0; d < s.rank(); ++d) {
    if (static_cast<int64_t>(d) == axis) {
      at.push_back(Expr::intConst(0));
      o += keep;
    } else {
      at.push_back(idx[o++]);
    }
  }
  const Expr &n = s.dims[axis];
  // Binders: k at `level` (the candidate), j at level + 1 (the extremum's range).
  IndexVec atK = at, atJ = at;
  atK[axis] = boundVar(level);
  atJ[axis] = boundVar(level + 1);
  Term best = mkReduce(extremum, level + 1, Expr::intConst(0), n, read(0, atJ, level + 2));
  Term hit = opaque("Equal", {read(0, atK, level + 1), best});
  Term k = countTerm(boundVar(level), level + 1);
  Term miss = last ? mkConst(-1) : countTerm(n, level + 1);
  return mkReduce(last ? Fn::Max2 : Fn::Min2, level, Expr::intConst(0), n, opaque("Where", {hit, k, miss}));
}

// --- TopK ----------------------------------------------------------------------
// Exact via ranks: rank(k) = #{j < k : x[j] >= x[k]} + #{j > k : x[j] > x[k]}
// (largest; <= and < for smallest) is k's place in the output order, ties to
// the lower index as ONNX specifies. values[t] = sum over k of
// Where(rank(k) == t, x[k], 0); indices[t] the same with k for x[k].
struct TopKState : OpState {
  int64_t axis = 0;
  bool largest = true;
};

llvm::Expected<OpResult> inferTopK(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs X and K");
  if (in.node.outputs.size() != 2)
    return userError("node " + describe(in.node) + " must have two outputs (Values, Indices)");
  const Shape &s = *in.shapes[0];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", -1), s.rank());
  if (!axis)
    return axis.takeError();
  auto largest = flagAttr(in.node, "largest", 1);
  if (!largest)
    return largest.takeError();
  auto sorted = flagAttr(in.node, "sorted", 1);
  if (!sorted)
    return sorted.takeError();
  // Unsorted output order is left to the implementation: no exact semantics.
  if (!*sorted)
    return unsupportedError("node " + describe(in.node) + ": TopK with sorted=0 (order unspecified)");
  auto kv = intInput(in, 1, "K of TopK");
  if (!kv)
    return kv.takeError();
  if (kv->size() != 1)
    return userError("node " + describe(in.node) + ": K has " + std::to_string(kv->size()) + " values, not one");
  Expr K = (*kv)[0];
  Shape out = s;
  out.dims[*axis] = K;
  OpResult r;
  r.shapes = {out, out};
  r.dtypes = {in.dtypes[0], DType::Int64};
  r.obligations.push_back({"K of " + describe(in.node) + " is in [0, " + s.dims[*axis].str() + "]",
                           Expr::intConst(0) <= K && K <= s.dims[*axis]});
  TopKState &st = r.makeState<TopKState>();
  st.axis = *axis;
  st.largest = *largest;
  return r;
}

Term topK(const OpInputs &in, const OpResult &r, unsigned slot, const IndexVec &idx, const ReadFn &read,
          int level) {
  const TopKState &st = r.stateAs<TopKState>();
  int64_t axis = st.axis;
  bool largest = st.largest;
  const Expr &n = in.shapes[0]->dims[axis];
  // Binders: k at `level` (the element placed), j at level + 1 (those before it).
  IndexVec atK = idx, atJ = idx;
  atK[axis] = boundVar(level);
  atJ[axis] = boundVar(level + 1);
  Term xj = read(0, atJ, level + 2), xk = read(0, atK, level + 2);
  Term before = mkSelect(boundVar(level + 1) < boundVar(level), opaque(largest ? "GreaterOrEqual" : "LessOrEqual", {xj, xk}),
                         opaque(largest ? "Greater" : "Less", {xj, xk}));
  Term rank = mkSum(level + 1, Expr::intConst(0), n, before);
  Term placed = opaque("Equal", {rank, countTerm(idx[axis], level + 1)});
  Term what = slot == 0 ? read(0, atK, level + 1) : countTerm(boundVar(level), level + 1);
  return mkSum(level, Expr::intConst(0), n, opaque("Where", {placed, what, mkConst(0)}));
}

} // namespace

std::vector<OpDef> scanOps() {
  using C = OpClass;
  return {
      opRow("CumSum", C::Compute, {2, 2}, inferCumSum, cumSum),
      opRow("ArgMax", C::Compute, {1, 1}, inferArg, argExtremum),
      opRow("ArgMin", C::Compute, {1, 1}, inferArg, argExtremum),
      opRow("TopK", C::Compute, {2, 2}, inferTopK, topK),
  };
}

} // namespace shardproof::ir
