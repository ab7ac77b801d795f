// Layout operators: pure index remaps (views) and shape arithmetic.
#include "shardproof/ir/Ops.h"

#include <limits>

namespace shardproof::ir {

// Shared with Slice (SliceOps.cpp). Gathers a small integer tensor's values into `outDims`, element k of the
// result taking source element srcIndex(multi-index of k) (row-major both).
std::optional<IntTensor> remapValues(const IntTensor &v, const std::vector<int64_t> &outDims,
                                     const std::function<std::vector<int64_t>(const std::vector<int64_t> &)> &srcIndex) {
  IntTensor r;
  r.dims = outDims;
  int64_t count = 1;
  for (int64_t d : outDims)
    count *= d;
  std::vector<int64_t> i(outDims.size(), 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t rem = k;
    for (size_t d = outDims.size(); d-- > 0;) {
      i[d] = rem % outDims[d];
      rem /= outDims[d];
    }
    std::vector<int64_t> src = srcIndex(i);
    if (src.size() != v.dims.size())
      return std::nullopt;
    int64_t flat = 0;
    for (size_t d = 0; d < src.size(); ++d) {
      if (src[d] < 0 || src[d] >= v.dims[d])
        return std::nullopt;
      flat = flat * v.dims[d] + src[d];
    }
    if (flat >= static_cast<int64_t>(v.size()))
      return std::nullopt;
    r.vals.push_back(v.vals[flat]);
  }
  return r;
}

namespace {

using smt::Expr;

// The axes a view moves: Transpose's permutation, Unsqueeze's inserted and
// Squeeze's removed axes (sorted).
struct AxesState : OpState {
  std::vector<int64_t> axes;
};

// Concat's inputs and Split's outputs along `axis`: where each piece starts.
struct PiecesState : OpState {
  int64_t axis = 0;
  std::vector<Expr> offsets;
  void forEachExpr(const ExprFn &fn) const override { each(offsets, fn); }
};

// --- Transpose ---------------------------------------------------------------
llvm::Expected<OpResult> inferTranspose(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  std::vector<int64_t> perm = attrInts(in.node, "perm");
  if (perm.empty())
    for (size_t d = 0; d < s.rank(); ++d)
      perm.insert(perm.begin(), static_cast<int64_t>(d));
  if (perm.size() != s.rank())
    return userError("node " + describe(in.node) + ": perm has " + std::to_string(perm.size()) +
                     " entries for rank " + std::to_string(s.rank()));
  Shape out;
  std::vector<bool> seen(s.rank());
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(s.rank()) || seen[p])
      return userError("node " + describe(in.node) + ": perm is not a permutation");
    seen[p] = true;
    out.dims.push_back(s.dims[p]);
  }
  OpResult r = one(out, in.dtypes[0]);
  r.makeState<AxesState>().axes = perm;
  // Small integer tensors keep their values: torch's F.pad builds its pads with a Transpose.
  if (in.values.size() && in.values[0]) {
    std::vector<int64_t> outDims;
    for (int64_t p : perm)
      outDims.push_back(p < static_cast<int64_t>(in.values[0]->dims.size()) ? in.values[0]->dims[p] : -1);
    if (in.values[0]->dims.size() == perm.size())
      if (auto v = remapValues(*in.values[0], outDims, [&](const std::vector<int64_t> &i) {
            std::vector<int64_t> src(i.size());
            for (size_t d = 0; d < i.size(); ++d)
              src[perm[d]] = i[d];
            return src;
          }))
        r.values = {*v};
  }
  return r;
}
Term transpose(const OpInputs &, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::vector<int64_t> &perm = r.stateAs<AxesState>().axes;
  IndexVec src(idx.size());
  for (size_t d = 0; d < idx.size(); ++d)
    src[perm[d]] = idx[d];
  return read(0, src, level);
}

// --- Reshape -------------------------------------------------------------------
llvm::Expected<OpResult> inferReshape(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  auto target = intInput(in, 1, "the target shape");
  if (!target)
    return target.takeError();
  bool allowZero = attrInt(in.node, "allowzero", 0);
  Shape out;
  int minusOne = -1;
  for (size_t d = 0; d < target->size(); ++d) {
    const Expr &e = (*target)[d];
    auto v = e.asInt();
    if (v && *v == -1) {
      if (minusOne >= 0)
        return userError("node " + describe(in.node) + ": more than one -1 in the target shape");
      minusOne = static_cast<int>(d);
      out.dims.push_back(Expr::intConst(1));
    } else if (v && *v < -1) {
      return userError("node " + describe(in.node) + ": the target shape has negative size " + std::to_string(*v) +
                       " on axis " + std::to_string(d) + " (only -1, 'infer this size', is allowed)");
    } else if (v && *v == 0 && !allowZero) {
      if (d >= s.rank())
        return userError("node " + describe(in.node) + ": 0 in target shape beyond the input rank");
      out.dims.push_back(s.dims[d]);
    } else {
      out.dims.push_back(e);
    }
  }
  OpResult r;
  Expr total = product(s, 0, s.rank());
  if (minusOne >= 0) {
    Expr rest = product(out, 0, out.rank());
    out.dims[minusOne] = floorDiv(total, rest);
    r.obligations.push_back({"element count of " + describe(in.node) + " divides evenly",
                             mod(total, rest) == Expr::intConst(0)});
  } else {
    r.obligations.push_back({"element count preserved by " + describe(in.node),
                             total == product(out, 0, out.rank())});
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  return r;
}

namespace {
bool sameSize(const Expr &a, const Expr &b) {
  if (a.same(b))
    return true;
  auto d = (a - b).simplify().asInt();
  return d && *d == 0;
}
} // namespace

// The shapes cut where their prefix products agree: [b, s, 8, 4] -> [b*s, 32]
// is [b, s] -> [b*s] and [8, 4] -> [32], each group unflattened on its own
// (a row-major index is the prefix's index times the rest plus the rest's),
// so [b, s, h] -> [b, s, n, hd] reads in[i0, i1, i2*hd + i3] and no index
// crosses a cut as (32*k + i) div (32*s).
Term reshape(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const Shape &src = *in.shapes[0], &dst = r.shapes[0];
  // Every cut, so an axis of 1 on one side is a group of its own (read at 0).
  std::vector<std::pair<size_t, size_t>> cuts{{0, 0}};
  for (size_t j = 0; j < src.rank(); ++j) {
    Expr ps = product(src, 0, j);
    bool matched = false;
    for (size_t m = cuts.back().second; m < dst.rank(); ++m) {
      if (!sameSize(ps, product(dst, 0, m))) {
        if (matched)
          break;
        continue;
      }
      matched = true;
      if (cuts.back() != std::make_pair(j, m))
        cuts.push_back({j, m});
    }
  }
  cuts.push_back({src.rank(), dst.rank()});
  IndexVec out(src.rank());
  for (size_t g = 0; g + 1 < cuts.size(); ++g) {
    auto [s0, d0] = cuts[g];
    auto [s1, d1] = cuts[g + 1];
    Expr flat = Expr::intConst(0);
    for (size_t d = d0; d < d1; ++d)
      flat = d == d0 ? idx[d] : flat * dst.dims[d] + idx[d];
    for (size_t d = s0; d < s1; ++d) {
      Expr q = d + 1 == s1 ? flat : floorDiv(flat, product(src, d + 1, s1));
      out[d] = d == s0 ? q : mod(q, src.dims[d]);
    }
  }
  return read(0, out, level);
}

// --- Flatten ------------------------------------------------------------------
// [d0..dn) -> [prod(d[:axis]), prod(d[axis:])]: a Reshape whose element map is Reshape's.
llvm::Expected<OpResult> inferFlatten(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  int64_t rank = static_cast<int64_t>(s.rank()), axis = attrInt(in.node, "axis", 1);
  // Unlike most axes, axis == rank is allowed (output [prod, 1]).
  if (axis < -rank || axis > rank)
    return userError("node " + describe(in.node) + ": axis " + std::to_string(axis) + " out of range for rank " +
                     std::to_string(rank));
  if (axis < 0)
    axis += rank;
  Shape out;
  out.dims = {product(s, 0, axis).simplify(), product(s, axis, rank).simplify()};
  return one(out, in.dtypes[0]);
}

// --- Concat ---------------------------------------------------------------------
llvm::Expected<OpResult> inferConcat(const OpInputs &in) {
  if (in.shapes.empty() || !in.has(0))
    return userError("node " + describe(in.node) + " has no inputs");
  const Shape &s0 = *in.shapes[0];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), s0.rank());
  if (!axis)
    return axis.takeError();
  OpResult r;
  PiecesState &st = r.makeState<PiecesState>();
  st.axis = *axis;
  Shape out = s0;
  Expr off = Expr::intConst(0);
  bool allValues = true;
  IntTensor vals;
  for (unsigned i = 0; i < in.shapes.size(); ++i) {
    const Shape &s = *in.shapes[i];
    if (s.rank() != s0.rank())
      return userError("node " + describe(in.node) + ": inputs differ in rank");
    for (size_t d = 0; d < s.rank(); ++d)
      if (d != static_cast<size_t>(*axis) && !s.dims[d].same(s0.dims[d]))
        r.obligations.push_back({"non-concat dims of " + describe(in.node) + " agree", s.dims[d] == s0.dims[d]});
    st.offsets.push_back(off);
    off = (off + s.dims[*axis]).simplify();
    if (in.values.size() > i && in.values[i])
      vals.vals.insert(vals.vals.end(), in.values[i]->vals.begin(), in.values[i]->vals.end());
    else
      allValues = false;
  }
  out.dims[*axis] = off;
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  if (allValues && s0.rank() == 1) {
    vals.dims = {static_cast<int64_t>(vals.vals.size())};
    r.values = {vals};
  }
  return r;
}
Term concat(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  auto axis = static_cast<size_t>(r.stateAs<PiecesState>().axis);
  return concatAlong(
             in.shapes.size(), axis, idx, [&](size_t i) { return in.shapes[i]->dims[axis]; },
             [&](size_t i, const IndexVec &src) { return read(static_cast<unsigned>(i), src, level); })
      .first;
}

// --- Split ------------------------------------------------------------------------
llvm::Expected<OpResult> inferSplit(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), s.rank());
  if (!axis)
    return axis.takeError();
  size_t n = in.node.outputs.size();
  std::vector<Expr> sizes;
  if (in.has(1) || in.node.attr("split")) {
    auto sp = intsFrom(in, 1, "split");
    if (!sp)
      return sp.takeError();
    sizes = *sp;
  }
  OpResult r;
  PiecesState &st = r.makeState<PiecesState>();
  st.axis = *axis;
  if (sizes.empty()) {
    // Equal parts (opset 18 num_outputs rounds up: ceil(dim / n) with a short last part).
    Expr part = ceilDiv(s.dims[*axis], Expr::intConst(static_cast<int64_t>(n)));
    for (size_t i = 0; i < n; ++i)
      sizes.push_back(i + 1 < n ? part : s.dims[*axis] - part * static_cast<int64_t>(n - 1));
  }
  if (sizes.size() != n)
    return userError("node " + describe(in.node) + ": split has " + std::to_string(sizes.size()) +
                     " sizes for " + std::to_string(n) + " outputs");
  Expr off = Expr::intConst(0);
  for (size_t i = 0; i < n; ++i) {
    Shape o = s;
    o.dims[*axis] = sizes[i].simplify();
    r.shapes.push_back(o);
    r.dtypes.push_back(in.dtypes[0]);
    st.offsets.push_back(off);
    off = (off + sizes[i]).simplify();
  }
  r.obligations.push_back({"split sizes of " + describe(in.node) + " add up to the axis", off == s.dims[*axis]});
  // Splitting a small integer vector (torch's repeat_interleave splits its repeats): keep the values.
  if (s.rank() == 1 && in.values.size() && in.values[0]) {
    int64_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      auto len = r.shapes[i].dims[0].asInt();
      if (!len || *len < 0 || at + *len > static_cast<int64_t>(in.values[0]->size()))
        break;
      IntTensor v;
      v.dims = {*len};
      v.vals.assign(in.values[0]->vals.begin() + at, in.values[0]->vals.begin() + at + *len);
      r.values.resize(n);
      r.values[i] = v;
      at += *len;
    }
  }
  return r;
}
Term split(const OpInputs &, const OpResult &r, unsigned slot, const IndexVec &idx, const ReadFn &read, int level) {
  const PiecesState &st = r.stateAs<PiecesState>();
  IndexVec src = idx;
  src[st.axis] = idx[st.axis] + st.offsets[slot];
  return read(0, src, level);
}

// --- Unsqueeze / Squeeze --------------------------------------------------------------
llvm::Expected<std::vector<int64_t>> axesOf(const OpInputs &in, size_t rank) {
  auto ax = intsFrom(in, 1, "axes");
  if (!ax)
    return ax.takeError();
  std::vector<int64_t> out;
  for (auto &e : *ax) {
    auto v = constInt(in.node, e, "an axis");
    if (!v)
      return v.takeError();
    auto a = normAxis(in.node, *v, rank);
    if (!a)
      return a.takeError();
    out.push_back(*a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

llvm::Expected<OpResult> inferUnsqueeze(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  auto nAxes = intsFrom(in, 1, "axes");
  if (!nAxes)
    return nAxes.takeError();
  auto axes = axesOf(in, s.rank() + nAxes->size());
  if (!axes)
    return axes.takeError();
  Shape out;
  size_t k = 0;
  for (size_t d = 0; d < s.rank() + axes->size(); ++d) {
    if (std::find(axes->begin(), axes->end(), static_cast<int64_t>(d)) != axes->end())
      out.dims.push_back(Expr::intConst(1));
    else
      out.dims.push_back(s.dims[k++]);
  }
  OpResult r = one(out, in.dtypes[0]);
  r.makeState<AxesState>().axes = *axes;
  if (in.values.size() && in.values[0]) {
    IntTensor v = *in.values[0];
    v.dims.clear();
    for (auto &d : out.dims)
      v.dims.push_back(*d.asInt());
    r.values = {v};
  }
  return r;
}
Term unsqueeze(const OpInputs &, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::vector<int64_t> &axes = r.stateAs<AxesState>().axes;
  IndexVec src;
  for (size_t d = 0; d < idx.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
      src.push_back(idx[d]);
  return read(0, src, level);
}

llvm::Expected<OpResult> inferSqueeze(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  std::vector<int64_t> axes;
  if (in.has(1) || in.node.attr("axes")) {
    auto a = axesOf(in, s.rank());
    if (!a)
      return a.takeError();
    axes = *a;
  } else {
    for (size_t d = 0; d < s.rank(); ++d)
      if (auto v = s.dims[d].asInt(); v && *v == 1)
        axes.push_back(static_cast<int64_t>(d));
  }
  OpResult r;
  Shape out;
  for (size_t d = 0; d < s.rank(); ++d) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end()) {
      if (!s.dims[d].asInt())
        r.obligations.push_back({"squeezed dim of " + describe(in.node) + " is 1", s.dims[d] == Expr::intConst(1)});
      continue;
    }
    out.dims.push_back(s.dims[d]);
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  r.makeState<AxesState>().axes = axes;
  if (in.values.size() && in.values[0]) {
    IntTensor v = *in.values[0];
    v.dims.clear();
    for (auto &d : out.dims)
      v.dims.push_back(d.asInt().value_or(1));
    r.values = {v};
  }
  return r;
}
Term squeeze(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::vector<int64_t> &axes = r.stateAs<AxesState>().axes;
  IndexVec src;
  size_t k = 0;
  for (size_t d = 0; d < in.shapes[0]->rank(); ++d) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end())
      src.push_back(Expr::intConst(0));
    else
      src.push_back(idx[k++]);
  }
  return read(0, src, level);
}

// --- Constant and Shape -------------------------------------------------------------------
llvm::Expected<OpResult> inferConstant(const OpInputs &in) {
  const Attribute *a = in.node.attr("value");
  if (!a || a->kind != Attribute::Kind::Tensor || !a->tensor)
    return unsupportedError("node " + describe(in.node) + ": Constant without a 'value' tensor");
  Shape s;
  for (auto d : a->tensor->dims)
    s.dims.push_back(Expr::intConst(d));
  OpResult r = one(s, a->tensor->dtype);
  if (!a->tensor->ints.empty() || !isFloating(a->tensor->dtype)) {
    IntTensor v;
    v.dims = a->tensor->dims;
    for (auto x : a->tensor->ints)
      v.vals.push_back(Expr::intConst(x));
    r.values = {v};
  }
  return r;
}
// Constant data is a leaf of its own (the relation layer keys it by content);
// only scalars become Const terms.
Term constant(const OpInputs &in, const OpResult &, unsigned, const IndexVec &, const ReadFn &, int) {
  const Attribute *a = in.node.attr("value");
  if (a && a->tensor && a->tensor->numElements() == 1)
    return mkConst(a->tensor->at(0));
  return nullptr;
}

llvm::Expected<OpResult> inferShape(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  int64_t rank = static_cast<int64_t>(s.rank());
  int64_t start = attrInt(in.node, "start", 0), end = attrInt(in.node, "end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
  IntTensor v;
  for (int64_t d = start; d < end; ++d)
    v.vals.push_back(s.dims[d]);
  v.dims = {static_cast<int64_t>(v.vals.size())};
  Shape out;
  out.dims = {Expr::intConst(static_cast<int64_t>(v.vals.size()))};
  OpResult r = one(out, DType::Int64);
  r.values = {v};
  return r;
}

} // namespace

std::vector<OpDef> layoutOps() {
  using C = OpClass;
  return {
      opRow("Transpose", C::View, {1, 1}, inferTranspose, transpose),
      opRow("Reshape", C::View, {1, 2}, inferReshape, reshape),
      opRow("Flatten", C::View, {1, 1}, inferFlatten, reshape),
      opRow("Concat", C::View, {1, Arity::kAnyCount}, inferConcat, concat),
      opRow("Split", C::View, {1, 2}, inferSplit, split),
      opRow("Unsqueeze", C::View, {1, 2}, inferUnsqueeze, unsqueeze),
      opRow("Squeeze", C::View, {1, 2}, inferSqueeze, squeeze),
      opRow("Constant", C::Compute, {0, 0}, inferConstant, constant),
      opRow("Shape", C::ShapeOnly, {1, 1}, inferShape, nullptr),
  };
}

} // namespace shardproof::ir
