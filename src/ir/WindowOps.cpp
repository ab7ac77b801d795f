// Sliding-window ops: Conv, AveragePool, MaxPool, GlobalAveragePool,
// GlobalMaxPool, and Resize (nearest, asymmetric, floor). Each output element
// is a reduction over the window's taps (nested Sum binders, one per spatial
// axis; Conv adds one over the input channels of its group). A tap that falls
// into the padding is a Select on its index condition, so the term stays exact:
// 0 for a convolution or a padded average, -inf for a max. Kernel sizes, strides,
// pads and dilations are constants; the spatial sizes may be symbolic.
#include "shardproof/ir/Ops.h"

#include <cmath>

namespace shardproof::ir {
namespace {

using smt::Expr;

// The geometry of a window op along its n spatial axes (attribute values).
struct Window {
  int64_t n = 0;
  std::vector<int64_t> k, s, pb, pe, d; // kernel, stride, pad before/after, dilation
  bool ceil = false;
  bool countPad = false; // AveragePool count_include_pad
  int64_t group = 1;     // Conv

  int64_t extent(int64_t j) const { return d[j] * (k[j] - 1) + 1; }
  // Taps of axis j that can fall before the input (a leading pad) or past its
  // end (a trailing pad, or a ceil-mode window hanging over the edge).
  bool checkLow(int64_t j) const { return pb[j] > 0; }
  bool checkHigh(int64_t j) const { return pe[j] > 0 || ceil; }
};

// What a window op's element map needs: its geometry and, for a grouped Conv,
// the output channels per group.
struct WindowState : OpState {
  Window w;
  std::optional<Expr> perGroup;
  void forEachExpr(const ExprFn &fn) const override {
    if (perGroup)
      fn(*perGroup);
  }
};

// Resize's integer scale per axis.
struct ResizeState : OpState {
  std::vector<int64_t> scale;
};

// An ints attribute of exactly `count` values, `dflt` repeated when absent.
llvm::Expected<std::vector<int64_t>> intsAttr(const Node &n, const char *name, size_t count, int64_t dflt) {
  const Attribute *a = n.attr(name);
  if (!a)
    return std::vector<int64_t>(count, dflt);
  if (a->kind != Attribute::Kind::Ints)
    return userError("node " + describe(n) + ": attribute " + name + " is not a list of ints");
  if (a->ints.size() != count)
    return userError("node " + describe(n) + ": attribute " + name + " has " + std::to_string(a->ints.size()) +
                     " values, " + std::to_string(count) + " expected");
  return a->ints;
}

llvm::Expected<int64_t> intAttrStrict(const Node &n, const char *name, int64_t dflt) {
  const Attribute *a = n.attr(name);
  if (!a)
    return dflt;
  if (a->kind != Attribute::Kind::Int)
    return userError("node " + describe(n) + ": attribute " + name + " is not an int");
  return a->i;
}

llvm::Expected<std::string> stringAttr(const Node &n, const char *name, const std::string &dflt) {
  const Attribute *a = n.attr(name);
  if (!a)
    return dflt;
  if (a->kind != Attribute::Kind::String)
    return userError("node " + describe(n) + ": attribute " + name + " is not a string");
  return a->s;
}

// Reads the window attributes shared by Conv and the pools; `kernel` is the
// kernel size per spatial axis (from W for Conv, kernel_shape for the pools).
llvm::Expected<Window> parseWindow(const Node &node, std::vector<int64_t> kernel, bool hasCeil) {
  Window w;
  w.n = static_cast<int64_t>(kernel.size());
  w.k = std::move(kernel);
  auto autoPad = stringAttr(node, "auto_pad", "NOTSET");
  if (!autoPad)
    return autoPad.takeError();
  // SAME_UPPER/SAME_LOWER/VALID derive the pads from the sizes: not modelled.
  if (*autoPad != "NOTSET")
    return unsupportedError("node " + describe(node) + ": auto_pad '" + *autoPad + "' (only NOTSET is supported)");
  auto s = intsAttr(node, "strides", w.n, 1);
  auto d = intsAttr(node, "dilations", w.n, 1);
  auto p = intsAttr(node, "pads", 2 * w.n, 0);
  if (!s)
    return s.takeError();
  if (!d)
    return d.takeError();
  if (!p)
    return p.takeError();
  w.s = *s;
  w.d = *d;
  w.pb.assign(p->begin(), p->begin() + w.n);
  w.pe.assign(p->begin() + w.n, p->end());
  for (int64_t j = 0; j < w.n; ++j) {
    if (w.k[j] < 1 || w.s[j] < 1 || w.d[j] < 1)
      return userError("node " + describe(node) + ": kernel sizes, strides and dilations must be positive");
    if (w.pb[j] < 0 || w.pe[j] < 0)
      return userError("node " + describe(node) + ": negative pads");
  }
  if (hasCeil) {
    auto c = intAttrStrict(node, "ceil_mode", 0);
    if (!c)
      return c.takeError();
    w.ceil = *c != 0;
  }
  return w;
}

// Output length along spatial axis j of an input of length `len`, with the
// obligation that at least one window fits.
Expr windowOutput(const Node &node, const Window &w, int64_t j, const Expr &len, std::vector<Obligation> &obl) {
  Expr room = (len + w.pb[j] + w.pe[j] - w.extent(j)).simplify();
  obl.push_back({"a window of " + describe(node) + " fits in spatial axis " + std::to_string(j) + ": " + room.str() +
                     " >= 0",
                 room >= Expr::intConst(0)});
  Expr s = Expr::intConst(w.s[j]);
  return ((w.ceil ? ceilDiv(room, s) : floorDiv(room, s)) + 1).simplify();
}

// The input index of tap t (an index expression) of output position o along axis j.
Expr tapPosition(const Window &w, int64_t j, const Expr &o, const Expr &t) {
  return o * w.s[j] + t * w.d[j] - w.pb[j];
}

// Whether the tap at `pos` along axis j reads the input rather than padding.
Expr tapInside(const Window &w, int64_t j, const Expr &pos, const Expr &len) {
  Expr c = Expr::boolConst(true);
  if (w.checkLow(j))
    c = c && pos >= Expr::intConst(0);
  if (w.checkHigh(j))
    c = c && pos < len;
  return c;
}

// Nested reductions over the taps of every spatial axis: body(positions,
// inside, depth) is built with the taps bound at levels [level, level + n).
Term overTaps(const Window &w, const Shape &x, const IndexVec &out, int level, Fn op,
              const std::function<Term(const IndexVec &, const Expr &, int)> &body) {
  IndexVec pos;
  Expr inside = Expr::boolConst(true);
  for (int64_t j = 0; j < w.n; ++j) {
    Expr p = tapPosition(w, j, out[2 + j], boundVar(level + static_cast<int>(j)));
    inside = inside && tapInside(w, j, p, x.dims[2 + j]);
    pos.push_back(p);
  }
  Term t = body(pos, inside.simplify(), level + static_cast<int>(w.n));
  for (int64_t j = w.n; j-- > 0;)
    t = mkReduce(op, level + static_cast<int>(j), Expr::intConst(0), Expr::intConst(w.k[j]), t);
  return t;
}

bool isTrue(const Expr &c) { return c.simplify().asBool().value_or(false); }

// --- Conv ---------------------------------------------------------------------
llvm::Expected<OpResult> inferConv(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs inputs X and W");
  const Shape &x = *in.shapes[0], &wt = *in.shapes[1];
  if (x.rank() < 3 || wt.rank() != x.rank())
    return userError("node " + describe(in.node) + ": X " + x.str() + " and W " + wt.str() +
                     " must have the same rank, at least 3");
  std::vector<int64_t> kernel;
  for (size_t j = 2; j < wt.rank(); ++j) {
    auto k = constInt(in.node, wt.dims[j], "a Conv kernel size");
    if (!k)
      return k.takeError();
    kernel.push_back(*k);
  }
  if (const Attribute *ks = in.node.attr("kernel_shape")) {
    if (ks->kind != Attribute::Kind::Ints || ks->ints != kernel)
      return userError("node " + describe(in.node) + ": kernel_shape does not match W " + wt.str());
  }
  auto w = parseWindow(in.node, kernel, /*hasCeil=*/false);
  if (!w)
    return w.takeError();
  auto group = intAttrStrict(in.node, "group", 1);
  if (!group)
    return group.takeError();
  if (*group < 1)
    return userError("node " + describe(in.node) + ": group must be positive");
  w->group = *group;
  OpResult r;
  Expr g = Expr::intConst(*group), m = wt.dims[0];
  Expr channels = (g * wt.dims[1]).simplify();
  if (!isTrue(x.dims[1] == channels))
    r.obligations.push_back({"input channels of " + describe(in.node) + " are group * W's second dim: " +
                                 x.dims[1].str() + " == " + channels.str(),
                             x.dims[1] == channels});
  if (*group > 1 && !isTrue(mod(m, g) == Expr::intConst(0)))
    r.obligations.push_back({"output channels of " + describe(in.node) + " are divisible by group",
                             mod(m, g) == Expr::intConst(0)});
  if (in.has(2)) {
    const Shape &b = *in.shapes[2];
    if (b.rank() != 1)
      return userError("node " + describe(in.node) + ": bias B must be 1-D, got " + b.str());
    if (!b.dims[0].same(m))
      r.obligations.push_back({"bias of " + describe(in.node) + " has one value per output channel",
                               b.dims[0] == m});
  }
  Shape out;
  out.dims = {x.dims[0], m};
  for (int64_t j = 0; j < w->n; ++j)
    out.dims.push_back(windowOutput(in.node, *w, j, x.dims[2 + j], r.obligations));
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  WindowState &st = r.makeState<WindowState>();
  st.w = *w;
  st.perGroup = floorDiv(m, g).simplify();
  return r;
}

// y[n, oc, o...] = sum_{ic < C/group, taps t...} x[n, g*C/group + ic, o*s + t*d - pb] * w[oc, ic, t...] (+ B[oc]),
// with g = oc / (M/group) and padding reads 0.
Term conv(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const WindowState &st = r.stateAs<WindowState>();
  const Window &w = st.w;
  const Shape &x = *in.shapes[0], &wt = *in.shapes[1];
  Expr oc = idx[1], cg = wt.dims[1];
  Expr base = w.group == 1 ? Expr::intConst(0) : floorDiv(oc, *st.perGroup) * cg;
  Expr ic = boundVar(level);
  Term sum = overTaps(w, x, idx, level + 1, Fn::Add, [&](const IndexVec &pos, const Expr &inside, int l) {
    IndexVec xi{idx[0], base + ic}, wi{oc, ic};
    for (int64_t j = 0; j < w.n; ++j) {
      xi.push_back(pos[j]);
      wi.push_back(boundVar(level + 1 + static_cast<int>(j)));
    }
    Term prod = mkMul({read(0, xi, l), read(1, wi, l)});
    return isTrue(inside) ? prod : mkSelect(inside, prod, mkConst(0));
  });
  Term y = mkSum(level, Expr::intConst(0), cg, sum);
  if (in.has(2))
    y = mkAdd({y, read(2, {oc}, level)});
  return y;
}

// --- AveragePool / MaxPool ------------------------------------------------------
llvm::Expected<OpResult> inferPool(const OpInputs &in, bool isMax) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  const Shape &x = *in.shapes[0];
  if (x.rank() < 3)
    return userError("node " + describe(in.node) + ": input " + x.str() + " has no spatial axes");
  size_t n = x.rank() - 2;
  const Attribute *ks = in.node.attr("kernel_shape");
  if (!ks || ks->kind != Attribute::Kind::Ints || ks->ints.size() != n)
    return userError("node " + describe(in.node) + ": kernel_shape must list " + std::to_string(n) + " sizes");
  // MaxPool's second output (Indices) is the argmax as a flat index: not modelled.
  if (isMax && in.node.outputs.size() > 1)
    return unsupportedError("node " + describe(in.node) + ": MaxPool's Indices output");
  if (!isMax) {
    // AveragePool has no dilations before opset 19.
    auto d = intsAttr(in.node, "dilations", n, 1);
    if (!d)
      return d.takeError();
    for (int64_t v : *d)
      if (v != 1)
        return unsupportedError("node " + describe(in.node) + ": AveragePool with dilations");
  }
  auto w = parseWindow(in.node, ks->ints, /*hasCeil=*/true);
  if (!w)
    return w.takeError();
  if (!isMax) {
    auto cip = intAttrStrict(in.node, "count_include_pad", 0);
    if (!cip)
      return cip.takeError();
    w->countPad = *cip != 0;
    // Over a ceil-mode overhang torch divides by the clipped window and
    // onnxruntime by the whole kernel: no single meaning to model.
    if (w->countPad && w->ceil)
      return unsupportedError("node " + describe(in.node) + ": AveragePool with count_include_pad and ceil_mode");
  }
  for (int64_t j = 0; j < w->n; ++j) {
    // A window made only of padding has no value (an average of nothing).
    if (w->pb[j] >= w->extent(j) || w->pe[j] >= w->extent(j))
      return unsupportedError("node " + describe(in.node) + ": pads as wide as the window");
    // A dilated window can straddle the input with every tap in the padding
    // (onnxruntime's max is then the lowest float, ours -inf): dilation only
    // where no tap can leave the input.
    if (w->d[j] > 1 && (w->checkLow(j) || w->checkHigh(j)))
      return unsupportedError("node " + describe(in.node) + ": MaxPool with dilations and pads or ceil_mode");
    // With ceil_mode, torch drops a last window that starts in the trailing
    // padding and onnxruntime (opset 17) keeps it; they agree when that
    // cannot happen: stride + trailing pad <= the window's extent.
    if (w->ceil && w->s[j] + w->pe[j] > w->extent(j))
      return unsupportedError("node " + describe(in.node) + ": ceil_mode with a stride wider than the window");
  }
  OpResult r;
  Shape out;
  out.dims = {x.dims[0], x.dims[1]};
  for (int64_t j = 0; j < w->n; ++j)
    out.dims.push_back(windowOutput(in.node, *w, j, x.dims[2 + j], r.obligations));
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  r.makeState<WindowState>().w = *w;
  return r;
}

llvm::Expected<OpResult> inferAveragePool(const OpInputs &in) { return inferPool(in, false); }
llvm::Expected<OpResult> inferMaxPool(const OpInputs &in) { return inferPool(in, true); }

IndexVec tapIndex(const IndexVec &idx, const IndexVec &pos) {
  IndexVec xi{idx[0], idx[1]};
  xi.append(pos.begin(), pos.end());
  return xi;
}

// Max over the taps; padding reads -inf (what onnxruntime's max starts from).
Term maxPool(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const Window &w = r.stateAs<WindowState>().w;
  return overTaps(w, *in.shapes[0], idx, level, Fn::Max2, [&](const IndexVec &pos, const Expr &inside, int l) {
    Term v = read(0, tapIndex(idx, pos), l);
    return isTrue(inside) ? v : mkSelect(inside, v, mkConst(-INFINITY));
  });
}

// Sum over the taps divided by the kernel size (count_include_pad=1, or no tap
// can fall outside) or by the number of taps inside the input.
Term averagePool(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
                 int level) {
  const Window &w = r.stateAs<WindowState>().w;
  const Shape &x = *in.shapes[0];
  bool anyCheck = false;
  int64_t kernel = 1;
  for (int64_t j = 0; j < w.n; ++j) {
    anyCheck |= w.checkLow(j) || w.checkHigh(j);
    kernel *= w.k[j];
  }
  Term sum = overTaps(w, x, idx, level, Fn::Add, [&](const IndexVec &pos, const Expr &inside, int l) {
    Term v = read(0, tapIndex(idx, pos), l);
    return isTrue(inside) ? v : mkSelect(inside, v, mkConst(0));
  });
  if (w.countPad || !anyCheck)
    return mkMul({mkConst(1.0 / static_cast<double>(kernel)), sum});
  Term count = overTaps(w, x, idx, level, Fn::Add, [&](const IndexVec &, const Expr &inside, int) {
    return isTrue(inside) ? mkConst(1) : mkSelect(inside, mkConst(1), mkConst(0));
  });
  return mkMul({sum, mkApply(Fn::Recip, {count})});
}

// --- GlobalAveragePool / GlobalMaxPool --------------------------------------------
llvm::Expected<OpResult> inferGlobalPool(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  const Shape &x = *in.shapes[0];
  if (x.rank() < 3)
    return userError("node " + describe(in.node) + ": input " + x.str() + " has no spatial axes");
  Shape out = x;
  for (size_t d = 2; d < x.rank(); ++d)
    out.dims[d] = Expr::intConst(1);
  return one(out, in.dtypes[0]);
}

// The reduction `op` over every spatial position of channel [n, c] of `body`.
Term overSpatial(const Shape &x, const IndexVec &idx, int level, Fn op,
                 const std::function<Term(const IndexVec &, int)> &body) {
  IndexVec src{idx[0], idx[1]};
  size_t n = x.rank() - 2;
  for (size_t j = 0; j < n; ++j)
    src.push_back(boundVar(level + static_cast<int>(j)));
  Term t = body(src, level + static_cast<int>(n));
  for (size_t j = n; j-- > 0;)
    t = mkReduce(op, level + static_cast<int>(j), Expr::intConst(0), x.dims[2 + j], t);
  return t;
}

Term globalMax(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return overSpatial(*in.shapes[0], idx, level, Fn::Max2,
                     [&](const IndexVec &src, int l) { return read(0, src, l); });
}

// Mean over the spatial positions; 1/N as a number when N is constant, else the
// reciprocal of a sum of ones (exact at every size, as ReduceMean does).
Term globalAverage(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read,
                   int level) {
  const Shape &x = *in.shapes[0];
  Term sum = overSpatial(x, idx, level, Fn::Add, [&](const IndexVec &src, int l) { return read(0, src, l); });
  if (auto v = product(x, 2, x.rank()).simplify().asInt(); v && *v > 0)
    return mkMul({mkConst(1.0 / static_cast<double>(*v)), sum});
  Term count = overSpatial(x, idx, level, Fn::Add, [](const IndexVec &, int) { return mkConst(1); });
  return mkMul({sum, mkApply(Fn::Recip, {count})});
}

// --- Resize (nearest) ------------------------------------------------------------
// Only mode=nearest with coordinate_transformation_mode=asymmetric and
// nearest_mode=floor (torch's F.interpolate(mode="nearest")) and an integer
// scale per axis: y[i] = x[floor(i / scale)], output length in * scale.
// (onnxruntime computes i / scale in float; floor of it is exact for i < 2^24.)
llvm::Expected<OpResult> inferResize(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  const Shape &x = *in.shapes[0];
  // {attribute, its ONNX default, the only value modelled}
  const char *modes[][3] = {{"mode", "nearest", "nearest"},
                            {"coordinate_transformation_mode", "half_pixel", "asymmetric"},
                            {"nearest_mode", "round_prefer_floor", "floor"}};
  for (auto &m : modes) {
    auto v = stringAttr(in.node, m[0], m[1]);
    if (!v)
      return v.takeError();
    if (*v != m[2])
      return unsupportedError("node " + describe(in.node) + ": Resize " + m[0] + " '" + *v +
                              "' (only mode nearest, coordinate_transformation_mode asymmetric, nearest_mode floor)");
  }
  // Opset 18's antialias/axes/keep_aspect_ratio_policy change the meaning when set.
  for (const char *a : {"antialias", "axes", "keep_aspect_ratio_policy"})
    if (in.node.attr(a))
      return unsupportedError("node " + describe(in.node) + ": Resize attribute " + a);
  if (in.opset < 11)
    return unsupportedError("node " + describe(in.node) + ": Resize before opset 11");
  auto data = [&](unsigned i) -> std::shared_ptr<const TensorData> {
    return i < in.data.size() ? in.data[i] : nullptr;
  };
  bool hasScales = in.has(2) && !(data(2) && data(2)->numElements() == 0);
  bool hasSizes = in.has(3) && !(data(3) && data(3)->numElements() == 0);
  if (hasScales == hasSizes)
    return userError("node " + describe(in.node) + ": Resize needs exactly one of scales and sizes");
  std::vector<int64_t> scale;
  OpResult r;
  Shape out = x;
  if (hasScales) {
    auto sc = data(2);
    if (!sc)
      return unsupportedError("node " + describe(in.node) + ": Resize scales that are not a constant");
    if (sc->numElements() != static_cast<int64_t>(x.rank()))
      return userError("node " + describe(in.node) + ": Resize has " + std::to_string(sc->numElements()) +
                       " scales for rank " + std::to_string(x.rank()));
    for (size_t d = 0; d < x.rank(); ++d) {
      double v = sc->at(static_cast<int64_t>(d));
      if (!(v >= 1) || v != std::floor(v) || v > 1 << 20)
        return unsupportedError("node " + describe(in.node) + ": Resize scale " + std::to_string(v) +
                                " (only integer scales >= 1)");
      scale.push_back(static_cast<int64_t>(v));
      out.dims[d] = (x.dims[d] * scale.back()).simplify();
    }
  } else {
    auto sizes = intInput(in, 3, "Resize sizes");
    if (!sizes)
      return sizes.takeError();
    if (sizes->size() != x.rank())
      return userError("node " + describe(in.node) + ": Resize has " + std::to_string(sizes->size()) +
                       " sizes for rank " + std::to_string(x.rank()));
    for (size_t d = 0; d < x.rank(); ++d) {
      Expr sz = (*sizes)[d].simplify(), len = x.dims[d].simplify();
      auto a = sz.asInt(), b = len.asInt();
      if (sz.same(len))
        scale.push_back(1);
      else if (a && b && *b > 0 && *a % *b == 0 && *a >= *b)
        scale.push_back(*a / *b);
      else
        return unsupportedError("node " + describe(in.node) + ": Resize size " + sz.str() + " for an axis of " +
                                len.str() + " (only integer multiples of a constant length)");
      out.dims[d] = sz;
    }
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  r.makeState<ResizeState>().scale = scale;
  return r;
}

Term resize(const OpInputs &, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::vector<int64_t> &scale = r.stateAs<ResizeState>().scale;
  IndexVec src;
  for (size_t d = 0; d < idx.size(); ++d)
    src.push_back(scale[d] == 1 ? idx[d] : floorDiv(idx[d], Expr::intConst(scale[d])));
  return read(0, src, level);
}

} // namespace

std::vector<OpDef> windowOps() {
  return {
      opRow("Conv", OpClass::Compute, {2, 3}, inferConv, conv),
      opRow("AveragePool", OpClass::Compute, {1, 1}, inferAveragePool, averagePool),
      opRow("MaxPool", OpClass::Compute, {1, 1}, inferMaxPool, maxPool),
      opRow("GlobalAveragePool", OpClass::Compute, {1, 1}, inferGlobalPool, globalAverage),
      opRow("GlobalMaxPool", OpClass::Compute, {1, 1}, inferGlobalPool, globalMax),
      opRow("Resize", OpClass::View, {1, 4}, inferResize, resize),
  };
}

} // namespace shardproof::ir
