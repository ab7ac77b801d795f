// Reductions over axes: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/
// LogSumExp, Softmax/LogSoftmax, LayerNormalization and InstanceNormalization. Each is a Sum term (a sum, or the
// max/min binder) over the reduced axes (nested, one binder per axis), so sharding of a reduced axis shows up as a split sum and
// sharding of a kept axis passes straight through.
#include "shardproof/ir/Ops.h"

#include <algorithm>

namespace shardproof::ir {
namespace {

using smt::Expr;

// Sum over the axes in `axes` (sorted) of body(src, depth), where src is
// `idx` with each reduced axis replaced by its bound variable.
// `op` is the reduction: Fn::Add (a sum), Fn::Mul (a product), Fn::Max2 or Fn::Min2 (the max/min binder).
Term sumOver(const Shape &s, const std::vector<int64_t> &axes, IndexVec src, int level,
             const std::function<Term(const IndexVec &, int)> &body, Fn op = Fn::Add) {
  for (size_t k = 0; k < axes.size(); ++k)
    src[axes[k]] = boundVar(level + static_cast<int>(k));
  Term t = body(src, level + static_cast<int>(axes.size()));
  for (size_t k = axes.size(); k-- > 0;)
    t = mkReduce(op, level + static_cast<int>(k), Expr::intConst(0), s.dims[axes[k]], t);
  return t;
}

// 1/N for the number of reduced elements: a number when N is constant,
// otherwise the reciprocal of a sum of ones (still exact, and equal across
// graphs with the same symbolic N).
Term inverseCount(const Shape &s, const std::vector<int64_t> &axes, int level) {
  Expr n = Expr::intConst(1);
  for (auto a : axes)
    n = n * s.dims[a];
  if (auto v = n.simplify().asInt(); v && *v > 0)
    return mkConst(1.0 / static_cast<double>(*v));
  IndexVec dummy(s.rank(), Expr::intConst(0));
  return mkApply(Fn::Recip, {sumOver(s, axes, dummy, level, [](const IndexVec &, int) { return mkConst(1); })});
}

// Axes from the `axes` input (ReduceSum >= 13, every Reduce* >= 18) or attribute.
llvm::Expected<std::vector<int64_t>> reduceAxes(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  std::vector<int64_t> axes;
  bool fromInput = in.has(1);
  if (fromInput || in.node.attr("axes")) {
    auto raw = intsFrom(in, 1, "axes");
    if (!raw)
      return raw.takeError();
    for (auto &e : *raw) {
      auto v = constInt(in.node, e, "a reduction axis");
      if (!v)
        return v.takeError();
      auto a = normAxis(in.node, *v, s.rank());
      if (!a)
        return a.takeError();
      axes.push_back(*a);
    }
  }
  if (axes.empty() && !attrInt(in.node, "noop_with_empty_axes", 0))
    for (size_t d = 0; d < s.rank(); ++d)
      axes.push_back(static_cast<int64_t>(d));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

llvm::Expected<OpResult> inferReduce(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  auto axes = reduceAxes(in);
  if (!axes)
    return axes.takeError();
  const Shape &s = *in.shapes[0];
  bool keep = attrInt(in.node, "keepdims", 1);
  Shape out;
  for (size_t d = 0; d < s.rank(); ++d) {
    bool reduced = std::find(axes->begin(), axes->end(), static_cast<int64_t>(d)) != axes->end();
    if (!reduced)
      out.dims.push_back(s.dims[d]);
    else if (keep)
      out.dims.push_back(Expr::intConst(1));
  }
  OpResult r = one(out, in.dtypes[0]);
  ReduceState &st = r.makeState<ReduceState>();
  st.axes = *axes;
  st.keep = keep;
  return r;
}

// Input index for output index `idx`: kept axes copy through, reduced axes are
// filled in by sumOver.
IndexVec reducedSource(const OpInputs &in, const OpResult &r, const IndexVec &idx) {
  const Shape &s = *in.shapes[0];
  const ReduceState &st = r.stateAs<ReduceState>();
  bool keep = st.keep;
  IndexVec src(s.rank(), Expr::intConst(0));
  size_t k = 0;
  for (size_t d = 0; d < s.rank(); ++d) {
    bool reduced = std::find(st.axes.begin(), st.axes.end(), static_cast<int64_t>(d)) != st.axes.end();
    if (!reduced)
      src[d] = idx[k++];
    else if (keep)
      ++k;
  }
  return src;
}

Term reduceSum(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::vector<int64_t> &axes = r.stateAs<ReduceState>().axes;
  return sumOver(*in.shapes[0], axes, reducedSource(in, r, idx), level,
                 [&](const IndexVec &src, int l) { return read(0, src, l); });
}

template <Fn Op>
Term reduceBy(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
             int level) {
  const std::vector<int64_t> &axes = r.stateAs<ReduceState>().axes;
  return sumOver(
      *in.shapes[0], axes, reducedSource(in, r, idx), level,
      [&](const IndexVec &src, int l) { return read(0, src, l); }, Op);
}

// A sum over the reduced axes of f(x) (ReduceL1/L2/SumSquare/LogSumExp), then g.
Term reduceMapped(const OpInputs &in, const OpResult &r, const IndexVec &idx, const ReadFn &read, int level,
                  Term (*f)(const Term &)) {
  const std::vector<int64_t> &axes = r.stateAs<ReduceState>().axes;
  return sumOver(*in.shapes[0], axes, reducedSource(in, r, idx), level,
                 [&](const IndexVec &src, int l) { return f(read(0, src, l)); });
}
Term square(const Term &x) { return mkMul({x, x}); }
Term absOf(const Term &x) { return mkApply(Fn::Abs, {x}); }
Term expOf(const Term &x) { return mkApply(Fn::Exp, {x}); }

Term reduceL1(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return reduceMapped(in, r, idx, read, level, absOf);
}
Term reduceL2(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mkApply(Fn::Sqrt, {reduceMapped(in, r, idx, read, level, square)});
}
Term reduceSumSquare(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
                     int level) {
  return reduceMapped(in, r, idx, read, level, square);
}
Term reduceLogSum(const OpInputs &in, const OpResult &r, unsigned slot, const IndexVec &idx, const ReadFn &read,
                  int level) {
  return mkApply(Fn::Log, {reduceSum(in, r, slot, idx, read, level)});
}
// log(sum exp(x)) exactly as ONNX defines it; the row max is not subtracted
// (over the reals the two are equal, and Exp/Log are uninterpreted).
Term reduceLogSumExp(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
                     int level) {
  return mkApply(Fn::Log, {reduceMapped(in, r, idx, read, level, expOf)});
}

Term reduceMean(const OpInputs &in, const OpResult &r, unsigned slot, const IndexVec &idx, const ReadFn &read,
                int level) {
  const std::vector<int64_t> &axes = r.stateAs<ReduceState>().axes;
  return mkMul({inverseCount(*in.shapes[0], axes, level), reduceSum(in, r, slot, idx, read, level)});
}

// --- Softmax / LogSoftmax (opset >= 13: along one axis) -----------------------
struct SoftmaxState : OpState {
  int64_t axis = 0;
};

llvm::Expected<OpResult> inferSoftmax(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  const Shape &s = *in.shapes[0];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", -1), s.rank());
  if (!axis)
    return axis.takeError();
  // Before opset 13 the input was flattened from `axis` on: the same thing
  // only when `axis` is the last one.
  if (in.opset < 13 && *axis + 1 != static_cast<int64_t>(s.rank()))
    return unsupportedError("node " + describe(in.node) + ": " + in.node.opType + " before opset 13 on a non-last axis");
  OpResult r = one(s, in.dtypes[0]);
  r.makeState<SoftmaxState>().axis = *axis;
  return r;
}

Term expSum(const OpInputs &in, const OpResult &r, const IndexVec &idx, const ReadFn &read, int level) {
  return sumOver(*in.shapes[0], {r.stateAs<SoftmaxState>().axis}, idx, level,
                 [&](const IndexVec &src, int l) { return mkApply(Fn::Exp, {read(0, src, l)}); });
}

Term softmax(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mkMul({mkApply(Fn::Exp, {read(0, idx, level)}), mkApply(Fn::Recip, {expSum(in, r, idx, read, level)})});
}

// LogSoftmax as ONNX defines it (its function body): the row max is
// subtracted before exp, `(x - max) - log(sum exp(x - max))`. Exp and Log are
// uninterpreted, so this form is what a hand-written stable log-softmax or
// Megatron's vocab-parallel cross-entropy (max all-reduce, then shifted sums)
// is compared with.
Term logSoftmax(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const Shape &s = *in.shapes[0];
  int64_t axis = r.stateAs<SoftmaxState>().axis;
  auto rowMax = [&](const IndexVec &at, int l) {
    return sumOver(s, {axis}, at, l, [&](const IndexVec &src, int ll) { return read(0, src, ll); }, Fn::Max2);
  };
  Term shiftedSum = sumOver(s, {axis}, idx, level, [&](const IndexVec &src, int l) {
    return mkApply(Fn::Exp, {mkSub(read(0, src, l), rowMax(src, l))});
  });
  return mkSub(mkSub(read(0, idx, level), rowMax(idx, level)), mkApply(Fn::Log, {shiftedSum}));
}

// --- LayerNormalization (opset 17) -------------------------------------------
// The first normalized axis (LayerNormalization; the rest follow it) and
// epsilon, exact as the attribute's double.
struct NormState : OpState {
  int64_t axis = 0;
  double eps = 1e-5;
};

llvm::Expected<OpResult> inferLayerNorm(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs X and Scale");
  const Shape &s = *in.shapes[0];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", -1), s.rank());
  if (!axis)
    return axis.takeError();
  OpResult r;
  // Scale and bias broadcast against the normalized dims.
  Shape normalized;
  for (size_t d = *axis; d < s.rank(); ++d)
    normalized.dims.push_back(s.dims[d]);
  std::vector<Shape> bs = {normalized, *in.shapes[1]};
  if (in.has(2))
    bs.push_back(*in.shapes[2]);
  auto b = broadcastShapes(in.node, bs, r.obligations);
  if (!b)
    return b.takeError();
  if (b->rank() != normalized.rank())
    return userError("node " + describe(in.node) + ": Scale/B have more dims than the normalized axes");
  for (size_t d = 0; d < normalized.rank(); ++d)
    if (!b->dims[d].same(normalized.dims[d]))
      r.obligations.push_back({"Scale/B of " + describe(in.node) + " cover the normalized dims",
                               b->dims[d] == normalized.dims[d]});
  r.shapes = {s};
  r.dtypes = {in.dtypes[0]};
  // Mean and InvStdDev (outputs 1, 2) are reduced to 1 on the normalized axes.
  Shape stat = s;
  for (size_t d = *axis; d < s.rank(); ++d)
    stat.dims[d] = Expr::intConst(1);
  for (size_t o = 1; o < in.node.outputs.size(); ++o) {
    r.shapes.push_back(stat);
    r.dtypes.push_back(DType::Float);
  }
  const Attribute *eps = in.node.attr("epsilon");
  NormState &st = r.makeState<NormState>();
  st.axis = *axis;
  st.eps = eps && eps->kind == Attribute::Kind::Float ? eps->f : 1e-5;
  return r;
}

// x's element at `idx` normalized over `axes`: its mean, x - mean, and
// 1/sqrt(var + eps) with the biased variance (LayerNormalization and
// InstanceNormalization differ only in the axes and in what scales the result).
struct Normalized {
  Term mean, centered, invStd;
};
Normalized normalizeOver(const Shape &s, const std::vector<int64_t> &axes, const IndexVec &idx, int level,
                         const ReadFn &read, double eps) {
  auto mean = [&](const IndexVec &at, int l) {
    return mkMul({inverseCount(s, axes, l),
                  sumOver(s, axes, at, l, [&](const IndexVec &src, int ll) { return read(0, src, ll); })});
  };
  auto centered = [&](const IndexVec &at, int l) { return mkSub(read(0, at, l), mean(at, l)); };
  Term var = mkMul({inverseCount(s, axes, level), sumOver(s, axes, idx, level, [&](const IndexVec &src, int l) {
                      Term c = centered(src, l);
                      return mkMul({c, c});
                    })});
  Term invStd = mkApply(Fn::Recip, {mkApply(Fn::Sqrt, {mkAdd({var, mkConst(eps)})})});
  return {mean(idx, level), centered(idx, level), invStd};
}

Term layerNorm(const OpInputs &in, const OpResult &r, unsigned slot, const IndexVec &idx, const ReadFn &read,
               int level) {
  const Shape &s = *in.shapes[0];
  const NormState &st = r.stateAs<NormState>();
  std::vector<int64_t> axes;
  for (int64_t d = st.axis; d < static_cast<int64_t>(s.rank()); ++d)
    axes.push_back(d);
  Normalized n = normalizeOver(s, axes, idx, level, read, st.eps);
  if (slot == 1)
    return n.mean;
  if (slot == 2)
    return n.invStd;
  // Scale and B are indexed by the trailing (normalized) part of idx.
  IndexVec tail(idx.begin() + st.axis, idx.end());
  Term y = mkMul({n.centered, n.invStd, read(1, broadcastIndex(*in.shapes[1], tail), level)});
  if (in.has(2))
    y = mkAdd({y, read(2, broadcastIndex(*in.shapes[2], tail), level)});
  return y;
}

// --- InstanceNormalization ----------------------------------------------------
// y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c], mean and (biased)
// var over the spatial axes 2.. of each (n, c): F.instance_norm, and
// F.group_norm after a reshape to [N, groups, -1].
llvm::Expected<OpResult> inferInstanceNorm(const OpInputs &in) {
  if (!in.has(0) || !in.has(1) || !in.has(2))
    return userError("node " + describe(in.node) + " needs input, scale and B");
  const Shape &s = *in.shapes[0];
  // Rank 2 has no spatial axis: a mean over nothing, which we do not model.
  if (s.rank() < 3)
    return unsupportedError("node " + describe(in.node) + ": InstanceNormalization of a rank-" +
                            std::to_string(s.rank()) + " input (no spatial axis)");
  OpResult r = one(s, in.dtypes[0]);
  for (unsigned i = 1; i <= 2; ++i) {
    const Shape &p = *in.shapes[i];
    if (p.rank() != 1)
      return userError("node " + describe(in.node) + ": " + (i == 1 ? "scale" : "B") + " must be 1-D");
    if (!p.dims[0].same(s.dims[1]))
      r.obligations.push_back({std::string(i == 1 ? "scale" : "B") + " of " + describe(in.node) +
                                   " has one entry per channel",
                               p.dims[0] == s.dims[1]});
  }
  const Attribute *eps = in.node.attr("epsilon");
  if (eps && eps->kind != Attribute::Kind::Float)
    return userError("node " + describe(in.node) + ": epsilon is not a float");
  r.makeState<NormState>().eps = eps ? eps->f : 1e-5;
  return r;
}

Term instanceNorm(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
                  int level) {
  const Shape &s = *in.shapes[0];
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < static_cast<int64_t>(s.rank()); ++d)
    axes.push_back(d);
  Normalized n = normalizeOver(s, axes, idx, level, read, r.stateAs<NormState>().eps);
  IndexVec channel = {idx[1]};
  return mkAdd({mkMul({n.centered, n.invStd, read(1, channel, level)}), read(2, channel, level)});
}

} // namespace

std::vector<OpDef> reduceOps() {
  return {
      opRow("ReduceSum", OpClass::Compute, {1, 2}, inferReduce, reduceSum),
      opRow("ReduceMean", OpClass::Compute, {1, 2}, inferReduce, reduceMean),
      opRow("ReduceMax", OpClass::Compute, {1, 2}, inferReduce, reduceBy<Fn::Max2>),
      opRow("ReduceMin", OpClass::Compute, {1, 2}, inferReduce, reduceBy<Fn::Min2>),
      opRow("ReduceProd", OpClass::Compute, {1, 2}, inferReduce, reduceBy<Fn::Mul>),
      opRow("ReduceL1", OpClass::Compute, {1, 2}, inferReduce, reduceL1),
      opRow("ReduceL2", OpClass::Compute, {1, 2}, inferReduce, reduceL2),
      opRow("ReduceSumSquare", OpClass::Compute, {1, 2}, inferReduce, reduceSumSquare),
      opRow("ReduceLogSum", OpClass::Compute, {1, 2}, inferReduce, reduceLogSum),
      opRow("ReduceLogSumExp", OpClass::Compute, {1, 2}, inferReduce, reduceLogSumExp),
      opRow("InstanceNormalization", OpClass::Compute, {3, 3}, inferInstanceNorm, instanceNorm),
      opRow("Softmax", OpClass::Compute, {1, 1}, inferSoftmax, softmax),
      opRow("LogSoftmax", OpClass::Compute, {1, 1}, inferSoftmax, logSoftmax),
      opRow("LayerNormalization", OpClass::Compute, {2, 3}, inferLayerNorm, layerNorm),
  };
}

} // namespace shardproof::ir
