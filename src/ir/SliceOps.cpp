// Slicing and padding: Slice with any constant step (negative included) and
// Pad (constant, edge, reflect), with ONNX's clamping of starts, ends and pads.
#include "shardproof/ir/Ops.h"

#include <limits>

namespace shardproof::ir {
namespace {

using smt::Expr;

// --- Slice (any constant step) ---------------------------------------------------
// Per axis: the first element read and the step (start 0, step 1 on axes not sliced).
struct SliceState : OpState {
  std::vector<Expr> begin;
  std::vector<int64_t> step;
  void forEachExpr(const ExprFn &fn) const override { each(begin, fn); }
};
// Clamps like ONNX: negative starts/ends count from the end; both are clipped to [0, dim].
Expr clampIndex(const Expr &v, const Expr &dim) {
  if (auto c = v.asInt()) {
    if (*c >= (int64_t(1) << 62))
      return dim; // "to the end" sentinel (INT64_MAX): no real dim is that large
    if (*c < 0)
      return max(dim + *c, Expr::intConst(0));
    return min(v, dim);
  }
  // A computed start/end may be negative at some sizes: then it counts from the end.
  Expr zero = Expr::intConst(0);
  return ite(v < zero, max(dim + v, zero), min(v, dim));
}

// For a negative step ONNX clamps start to [0, dim-1] and end to [-1, dim-1]
// (end -1 means "through index 0"), after adding dim to a negative value;
// torch's flip ends at -INT64_MAX. `lowest` is 0 for a start, -1 for an end.
Expr clampIndexReverse(const Expr &v, const Expr &dim, int64_t lowest) {
  Expr low = Expr::intConst(lowest);
  if (auto c = v.asInt()) {
    if (*c >= (int64_t(1) << 62))
      return dim - 1;
    if (*c <= -(int64_t(1) << 62))
      return low;
    if (*c < 0)
      return max(dim + *c, low);
    return min(v, dim - 1);
  }
  return ite(v < Expr::intConst(0), max(dim + v, low), min(v, dim - 1));
}

llvm::Expected<OpResult> inferSlice(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  auto starts = intsFrom(in, 1, "starts");
  auto ends = intsFrom(in, 2, "ends");
  if (!starts)
    return starts.takeError();
  if (!ends)
    return ends.takeError();
  std::vector<Expr> axes, steps;
  if (in.has(3) || in.node.attr("axes")) {
    auto a = intsFrom(in, 3, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  } else {
    for (size_t d = 0; d < starts->size(); ++d)
      axes.push_back(Expr::intConst(static_cast<int64_t>(d)));
  }
  if (in.has(4)) {
    auto st = intInput(in, 4, "steps");
    if (!st)
      return st.takeError();
    steps = *st;
  }
  if (starts->size() != ends->size() || axes.size() != starts->size())
    return userError("node " + describe(in.node) + ": starts, ends and axes differ in length");
  Shape out = s;
  OpResult r;
  SliceState &st = r.makeState<SliceState>();
  st.begin.assign(s.rank(), Expr::intConst(0));
  st.step.assign(s.rank(), 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    auto ax = constInt(in.node, axes[k], "a Slice axis");
    if (!ax)
      return ax.takeError();
    auto a = normAxis(in.node, *ax, s.rank());
    if (!a)
      return a.takeError();
    int64_t step = 1;
    if (k < steps.size()) {
      auto st = steps[k].asInt();
      // A step only known at run time would make the output length data-dependent.
      if (!st)
        return unsupportedError("node " + describe(in.node) + ": Slice with a step that is not a constant");
      if (*st == 0)
        return userError("node " + describe(in.node) + ": Slice step 0");
      // Bounded so b + i * step cannot overflow for any real dim.
      if (*st > (int64_t(1) << 31) || *st < -(int64_t(1) << 31))
        return unsupportedError("node " + describe(in.node) + ": Slice step beyond 2^31");
      step = *st;
    }
    Expr b, len;
    if (step > 0) {
      b = clampIndex((*starts)[k], s.dims[*a]).simplify();
      Expr e = clampIndex((*ends)[k], s.dims[*a]);
      len = step == 1 ? max(e - b, Expr::intConst(0)) : max(floorDiv(e - b + (step - 1), Expr::intConst(step)), Expr::intConst(0));
    } else {
      b = clampIndexReverse((*starts)[k], s.dims[*a], 0).simplify();
      Expr e = clampIndexReverse((*ends)[k], s.dims[*a], -1);
      len = max(floorDiv(b - e + (-step - 1), Expr::intConst(-step)), Expr::intConst(0));
    }
    out.dims[*a] = len.simplify();
    st.begin[*a] = b;
    st.step[*a] = step;
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  if (in.values.size() && in.values[0] && in.values[0]->dims.size() == s.rank()) {
    // Slicing a small integer tensor (a shape vector, torch's pads matrix): keep its values.
    std::vector<int64_t> outDims, begin;
    bool known = true;
    for (size_t d = 0; d < s.rank(); ++d) {
      auto n = out.dims[d].asInt();
      auto b = st.begin[d].asInt();
      known = known && n && b;
      outDims.push_back(n ? *n : 0);
      begin.push_back(b ? *b : 0);
    }
    if (known)
      if (auto v = remapValues(*in.values[0], outDims, [&](const std::vector<int64_t> &i) {
            std::vector<int64_t> src(i.size());
            for (size_t d = 0; d < i.size(); ++d)
              src[d] = begin[d] + i[d] * st.step[d];
            return src;
          }))
        r.values = {*v};
  }
  return r;
}
Term slice(const OpInputs &, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const SliceState &st = r.stateAs<SliceState>();
  IndexVec src;
  for (size_t d = 0; d < idx.size(); ++d)
    src.push_back(st.step[d] == 1 ? idx[d] + st.begin[d] : idx[d] * st.step[d] + st.begin[d]);
  return read(0, src, level);
}

// --- Pad (constant, edge, reflect) -----------------------------------------------
enum PadMode : int64_t { PadConstant = 0, PadEdge = 1, PadReflect = 2 };

struct PadState : OpState {
  PadMode mode = PadConstant;
  std::vector<Expr> pads; // ONNX order: all befores, then all afters
  void forEachExpr(const ExprFn &fn) const override { each(pads, fn); }
};

llvm::Expected<OpResult> inferPad(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  const Attribute *m = in.node.attr("mode");
  std::string mode = m && m->kind == Attribute::Kind::String ? m->s : "constant";
  int64_t kind = mode == "constant" ? int64_t{PadConstant}
                 : mode == "edge"   ? int64_t{PadEdge}
                 : mode == "reflect" ? int64_t{PadReflect}
                                     : -1;
  if (kind < 0)
    return unsupportedError("node " + describe(in.node) + ": Pad mode '" + mode + "' (constant, edge, reflect are supported)");
  if (in.has(3))
    return unsupportedError("node " + describe(in.node) + ": Pad with an axes input");
  // The fill value must be a known number: an unknown one would be a silent default.
  if (kind == PadConstant && in.has(2) && !(in.data.size() > 2 && in.data[2] && in.data[2]->numElements() == 1))
    return unsupportedError("node " + describe(in.node) + ": Pad constant_value that is not a constant scalar");
  auto pads = intsFrom(in, 1, "pads");
  if (!pads)
    return pads.takeError();
  if (pads->size() != 2 * s.rank())
    return userError("node " + describe(in.node) + ": pads has " + std::to_string(pads->size()) +
                     " values, the input has rank " + std::to_string(s.rank()) + " (2 per axis expected)");
  OpResult r;
  Shape out = s;
  for (size_t d = 0; d < s.rank(); ++d) {
    Expr before = (*pads)[d], after = (*pads)[d + s.rank()];
    out.dims[d] = (s.dims[d] + before + after).simplify();
    r.obligations.push_back({"the padded size of " + describe(in.node) + " is not negative",
                             out.dims[d] >= Expr::intConst(0)});
    if (kind == PadConstant) {
      continue;
    }
    // Edge and reflect read the input's border: it must exist and, for reflect, be wider than the pad.
    Expr zero = Expr::intConst(0);
    r.obligations.push_back({"pads of " + describe(in.node) + " are not negative in " + mode + " mode",
                             before >= zero && after >= zero});
    Expr limit = kind == PadEdge ? Expr::intConst(1) : before + 1;
    Expr limit2 = kind == PadEdge ? Expr::intConst(1) : after + 1;
    r.obligations.push_back({"the input of " + describe(in.node) + " is wide enough for " + mode + " padding",
                             ite(before + after > zero, s.dims[d] >= limit && s.dims[d] >= limit2, Expr::boolConst(true))});
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  PadState &st = r.makeState<PadState>();
  st.mode = static_cast<PadMode>(kind);
  st.pads = *pads;
  return r;
}
Term pad(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const Shape &s = *in.shapes[0];
  size_t n = s.rank();
  const PadState &st = r.stateAs<PadState>();
  IndexVec src;
  Expr inside = Expr::boolConst(true);
  for (size_t d = 0; d < n; ++d) {
    Expr j = idx[d] - st.pads[d], dim = s.dims[d];
    switch (st.mode) {
    case PadConstant:
      inside = inside && j >= Expr::intConst(0) && j < dim;
      src.push_back(j);
      break;
    case PadEdge:
      src.push_back(min(max(j, Expr::intConst(0)), dim - 1));
      break;
    default: // reflect about the first and last element, which are not repeated
      src.push_back(ite(j < Expr::intConst(0), Expr::intConst(0) - j, ite(j >= dim, (dim - 1) * 2 - j, j)));
    }
  }
  if (st.mode != PadConstant)
    return read(0, src, level);
  double fill = in.data.size() > 2 && in.data[2] ? in.data[2]->at(0) : 0.0;
  return mkSelect(inside.simplify(), read(0, src, level), mkConst(fill));
}

} // namespace

std::vector<OpDef> sliceOps() {
  using C = OpClass;
  return {
      opRow("Slice", C::View, {1, 5}, inferSlice, slice),
      opRow("Pad", C::Compute, {1, 4}, inferPad, pad),
  };
}

} // namespace shardproof::ir
