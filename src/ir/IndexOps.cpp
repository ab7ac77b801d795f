// Index-driven operators: Gather with known indices (shape arithmetic and
// constant picks), ConstantOfShape, Expand, Tile, DepthToSpace, OneHot, Trilu (causal masks), and the
// comparison/selection ops that build masks (Equal, Less, Greater, Not, And,
// Or, Where). Masks made of index conditions stay index conditions, so a
// Where over a causal mask becomes a Select the prover can split on.
#include "shardproof/ir/Ops.h"

#include <cmath>

namespace shardproof::ir {
namespace {

using smt::Expr;

// Applies f to every leaf of a tree of Selects (the branches of a mask).
Term mapLeaves(const Term &t, const std::function<Term(const Term &)> &f) {
  if (t->kind == TermKind::Select)
    return mkSelect(t->cond, mapLeaves(t->args[0], f), mapLeaves(t->args[1], f));
  return f(t);
}

// --- Gather ------------------------------------------------------------------
// Gather and GatherElements: the gathered axis and, for Gather, either indices
// read from data or the normalised constant indices.
struct GatherState : OpState {
  int64_t axis = 0;
  bool dataIndices = false;
  std::vector<Expr> indices;
  void forEachExpr(const ExprFn &fn) const override { each(indices, fn); }
};

// The integer value of index tensor `ind` (input 1) at fresh positions g!0..,
// with the bound "g is a position of ind": what a data-dependent Gather or
// GatherElements reads at. Values the spec does not bound are unsupported.
struct DataIndex {
  IndexVec pos;
  Expr value;
  std::vector<Expr> inside;
};
static llvm::Expected<DataIndex> dataIndexAt(const OpInputs &in, const Shape &ind) {
  DataIndex di;
  di.pos = indexVars("g", static_cast<unsigned>(ind.rank()));
  auto v = in.inputValue(1, di.pos);
  if (!v)
    return unsupportedError("node " + describe(in.node) + ": the indices are data whose values are not known " +
                            "(give integer inputs a `values` range in the spec; indices computed from floats, " +
                            "as by ArgMax or TopK, have none)");
  di.value = *v;
  for (size_t d = 0; d < ind.rank(); ++d)
    di.inside.push_back(inRange(di.pos[d], Expr::intConst(0), ind.dims[d]));
  return di;
}
// Every index read is in [-n, n) (negative ones count from the end), on every rank.
static void requireIndicesInRange(OpResult &r, const OpInputs &in, const DataIndex &di, const Expr &n) {
  r.obligations.push_back({"every index of " + describe(in.node) + " is in range [-" + n.str() + ", " + n.str() + ")",
                           smt::implies(smt::conj(di.inside), inRange(di.value, -n, n))});
}

llvm::Expected<OpResult> inferGather(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs data and indices");
  const Shape &data = *in.shapes[0], &ind = *in.shapes[1];
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), data.rank());
  if (!axis)
    return axis.takeError();
  bool dataIndices = in.values.size() < 2 || !in.values[1];
  if (dataIndices && !in.inputValue)
    return unsupportedError("node " + describe(in.node) + ": Gather with data-dependent indices needs their values");
  Shape out;
  for (int64_t d = 0; d < *axis; ++d)
    out.dims.push_back(data.dims[d]);
  for (auto &d : ind.dims)
    out.dims.push_back(d);
  for (size_t d = *axis + 1; d < data.rank(); ++d)
    out.dims.push_back(data.dims[d]);
  OpResult r = one(out, in.dtypes[0]);
  const Expr &n = data.dims[*axis];
  if (dataIndices) {
    // An embedding lookup: every index must be in range for every admissible
    // input (a rank whose range check is off by one reads past its shard).
    auto di = dataIndexAt(in, ind);
    if (!di)
      return di.takeError();
    requireIndicesInRange(r, in, *di, n);
    GatherState &st = r.makeState<GatherState>();
    st.axis = *axis;
    st.dataIndices = true;
    return r;
  }
  GatherState &st = r.makeState<GatherState>();
  st.axis = *axis;
  // Normalized index values; negative ones count from the end.
  for (auto &v : in.values[1]->vals) {
    Expr idx = v.asInt() && *v.asInt() < 0 ? (n + v).simplify() : v;
    if (auto c = idx.asInt(); c && n.asInt() && (*c < 0 || *c >= *n.asInt()))
      return userError("node " + describe(in.node) + ": index " + v.str() + " out of range for size " + n.str());
    if (!idx.asInt() || !n.asInt())
      r.obligations.push_back({"Gather index of " + describe(in.node) + " is in range",
                               inRange(idx, Expr::intConst(0), n)});
    st.indices.push_back(idx);
  }
  // Picking from a shape vector: keep the symbolic values.
  if (in.values[0] && data.rank() == 1) {
    IntTensor v;
    v.dims = in.values[1]->dims;
    for (auto &i : st.indices)
      if (auto c = i.asInt(); c && *c < static_cast<int64_t>(in.values[0]->size()))
        v.vals.push_back(in.values[0]->vals[*c]);
    if (v.vals.size() == st.indices.size())
      r.values = {v};
  }
  return r;
}

Term gather(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const GatherState &st = r.stateAs<GatherState>();
  int64_t axis = st.axis;
  size_t indRank = in.shapes[1]->rank();
  bool dataIndices = st.dataIndices;
  // Output index = [pre..., positions in indices..., post...].
  auto source = [&](const Expr &picked) {
    IndexVec src;
    for (int64_t d = 0; d < axis; ++d)
      src.push_back(idx[d]);
    src.push_back(picked);
    for (size_t d = axis + indRank; d < idx.size(); ++d)
      src.push_back(idx[d]);
    return src;
  };
  if (dataIndices) {
    IndexVec pos(idx.begin() + axis, idx.begin() + axis + indRank);
    Term t = read(1, pos, level);
    auto v = t && in.indexValue ? in.indexValue(t) : std::nullopt;
    if (!v)
      return nullptr;
    // Negative indices count from the end; the prover prunes the case the
    // value range rules out.
    const Expr &n = in.shapes[0]->dims[axis];
    return mkSelect(*v < Expr::intConst(0), read(0, source(*v + n), level), read(0, source(*v), level));
  }
  if (indRank == 0)
    return read(0, source(st.indices[0]), level);
  if (indRank != 1)
    return nullptr; // multi-dimensional constant indices: not yet
  Term t = read(0, source(st.indices.back()), level);
  for (size_t p = st.indices.size() - 1; p-- > 0;)
    t = mkSelect(idx[axis] == Expr::intConst(static_cast<int64_t>(p)), read(0, source(st.indices[p]), level), t);
  return t;
}

// --- GatherElements (torch.gather) -----------------------------------------------
// y[i] = x[i with axis := v(i)], v(i) the integer value of indices[i]: the
// target logit of a cross-entropy (`logp.gather(-1, target[..., None])`).
llvm::Expected<OpResult> inferGatherElements(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs data and indices");
  const Shape &data = *in.shapes[0], &ind = *in.shapes[1];
  if (data.rank() != ind.rank())
    return userError("node " + describe(in.node) + ": data and indices have different ranks (" +
                     std::to_string(data.rank()) + " and " + std::to_string(ind.rank()) + ")");
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), data.rank());
  if (!axis)
    return axis.takeError();
  if (!in.inputValue)
    return unsupportedError("node " + describe(in.node) + ": GatherElements needs the values of its indices");
  OpResult r = one(ind, in.dtypes[0]);
  auto di = dataIndexAt(in, ind);
  if (!di)
    return di.takeError();
  // Off the gathered axis, indices must fit inside data (ONNX requires it).
  for (size_t d = 0; d < ind.rank(); ++d)
    if (static_cast<int64_t>(d) != *axis && !ind.dims[d].same(data.dims[d]))
      r.obligations.push_back({"indices of " + describe(in.node) + " fit inside data in dim " + std::to_string(d),
                               ind.dims[d] <= data.dims[d]});
  requireIndicesInRange(r, in, *di, data.dims[*axis]);
  r.makeState<GatherState>().axis = *axis;
  return r;
}

Term gatherElements(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read,
                    int level) {
  Term t = read(1, idx, level);
  auto v = t && in.indexValue ? in.indexValue(t) : std::nullopt;
  if (!v)
    return nullptr;
  int64_t axis = r.stateAs<GatherState>().axis;
  const Expr &n = in.shapes[0]->dims[axis];
  IndexVec neg = idx, pos = idx;
  neg[axis] = *v + n;
  pos[axis] = *v;
  return mkSelect(*v < Expr::intConst(0), read(0, neg, level), read(0, pos, level));
}

// --- ConstantOfShape / Expand ------------------------------------------------
llvm::Expected<Shape> shapeFromValues(const OpInputs &in, unsigned i, const char *what) {
  auto vals = intInput(in, i, what);
  if (!vals)
    return vals.takeError();
  Shape s;
  for (auto &v : *vals) {
    if (auto c = v.asInt(); c && *c < 0)
      return userError("node " + describe(in.node) + ": " + what + " has negative size " + std::to_string(*c) +
                       " on axis " + std::to_string(s.rank()));
    s.dims.push_back(v);
  }
  return s;
}

double fillValue(const Node &n) {
  const Attribute *a = n.attr("value");
  return a && a->tensor && a->tensor->numElements() == 1 ? a->tensor->at(0) : 0.0;
}

llvm::Expected<OpResult> inferConstantOfShape(const OpInputs &in) {
  auto s = shapeFromValues(in, 0, "the shape");
  if (!s)
    return s.takeError();
  const Attribute *a = in.node.attr("value");
  DType t = a && a->tensor ? a->tensor->dtype : DType::Float;
  OpResult r = one(*s, t);
  for (auto &d : s->dims)
    r.obligations.push_back({"sizes given to " + describe(in.node) + " are not negative", d >= Expr::intConst(0)});
  // Small integer fills stay known values (shape arithmetic).
  Expr count = product(*s, 0, s->rank()).simplify();
  if (!isFloating(t) && count.asInt() && *count.asInt() <= 64) {
    IntTensor v;
    for (auto &d : s->dims)
      v.dims.push_back(*d.asInt());
    v.vals.assign(*count.asInt(), Expr::intConst(static_cast<int64_t>(fillValue(in.node))));
    r.values = {v};
  }
  return r;
}
Term constantOfShape(const OpInputs &in, const OpResult &, unsigned, const IndexVec &, const ReadFn &, int) {
  return mkConst(fillValue(in.node));
}

llvm::Expected<OpResult> inferExpand(const OpInputs &in) {
  auto target = shapeFromValues(in, 1, "the target shape");
  if (!target)
    return target.takeError();
  OpResult r;
  auto s = broadcastShapes(in.node, {*in.shapes[0], *target}, r.obligations);
  if (!s)
    return s.takeError();
  r.shapes = {*s};
  r.dtypes = {in.dtypes[0]};
  return r;
}
Term expand(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return read(0, broadcastIndex(*in.shapes[0], idx), level);
}

// --- Tile (x.repeat) -----------------------------------------------------------
// y[i] = x[i mod n] on every axis; output dim n * repeats.
struct TileState : OpState {
  std::vector<bool> unrepeated; // the axis's index passes through unchanged
};

llvm::Expected<OpResult> inferTile(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs input and repeats");
  const Shape &s = *in.shapes[0];
  auto reps = intInput(in, 1, "repeats");
  if (!reps)
    return reps.takeError();
  if (reps->size() != s.rank())
    return userError("node " + describe(in.node) + ": repeats has " + std::to_string(reps->size()) +
                     " values for rank " + std::to_string(s.rank()));
  OpResult r;
  TileState &st = r.makeState<TileState>();
  Shape out;
  for (size_t d = 0; d < s.rank(); ++d) {
    const Expr &k = (*reps)[d];
    if (auto c = k.asInt(); c && *c < 0)
      return userError("node " + describe(in.node) + ": negative repeat " + std::to_string(*c) + " on axis " +
                       std::to_string(d));
    if (!k.asInt())
      r.obligations.push_back({"repeats of " + describe(in.node) + " are not negative", k >= Expr::intConst(0)});
    out.dims.push_back((s.dims[d] * k).simplify());
    st.unrepeated.push_back(k.asInt() == 1);
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  return r;
}
Term tile(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::vector<bool> &unrepeated = r.stateAs<TileState>().unrepeated;
  IndexVec src;
  for (size_t d = 0; d < idx.size(); ++d)
    src.push_back(unrepeated[d] ? idx[d] : mod(idx[d], in.shapes[0]->dims[d]));
  return read(0, src, level);
}

// --- DepthToSpace (F.pixel_shuffle) -------------------------------------------------
// [N, C, H, W] -> [N, C/(r*r), H*r, W*r]; y[n, c, h*r+i, w*r+j] reads channel
// c*r*r + i*r + j (CRD, torch's pixel_shuffle) or (i*r + j)*C/(r*r) + c (DCR, the default).
struct DepthToSpaceState : OpState {
  int64_t block = 1;
  bool crd = false;
};

llvm::Expected<OpResult> inferDepthToSpace(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  if (s.rank() != 4)
    return userError("node " + describe(in.node) + ": DepthToSpace needs a 4-D input, got rank " +
                     std::to_string(s.rank()));
  int64_t r = attrInt(in.node, "blocksize", 0);
  if (r < 1)
    return userError("node " + describe(in.node) + ": blocksize must be a positive integer");
  const Attribute *m = in.node.attr("mode");
  std::string mode = m && m->kind == Attribute::Kind::String ? m->s : "DCR";
  if (mode != "DCR" && mode != "CRD")
    return userError("node " + describe(in.node) + ": DepthToSpace mode '" + mode + "' (DCR or CRD)");
  OpResult res;
  Expr rr = Expr::intConst(r * r), c = s.dims[1];
  if (auto cv = c.asInt(); cv && *cv % (r * r) != 0)
    return userError("node " + describe(in.node) + ": " + std::to_string(*cv) + " channels do not divide into blocks of " +
                     std::to_string(r * r));
  if (!c.asInt())
    res.obligations.push_back({"the channels of " + describe(in.node) + " divide into blocks of " +
                                   std::to_string(r * r),
                               mod(c, rr) == Expr::intConst(0)});
  Shape out;
  out.dims = {s.dims[0], floorDiv(c, rr).simplify(), (s.dims[2] * r).simplify(), (s.dims[3] * r).simplify()};
  res.shapes = {out};
  res.dtypes = {in.dtypes[0]};
  DepthToSpaceState &st = res.makeState<DepthToSpaceState>();
  st.block = r;
  st.crd = mode == "CRD";
  return res;
}
Term depthToSpace(const OpInputs &, const OpResult &res, unsigned, const IndexVec &idx, const ReadFn &read,
                  int level) {
  const DepthToSpaceState &st = res.stateAs<DepthToSpaceState>();
  Expr r = Expr::intConst(st.block);
  Expr i = mod(idx[2], r), j = mod(idx[3], r);
  Expr ch = st.crd ? idx[1] * (st.block * st.block) + i * r + j : (i * r + j) * res.shapes[0].dims[1] + idx[1];
  return read(0, {idx[0], ch, floorDiv(idx[2], r), floorDiv(idx[3], r)}, level);
}

// --- OneHot (F.one_hot) ----------------------------------------------------------
// y[..., j, ...] = on if v == j (v = index + depth when negative) else off, the
// new axis j in [0, depth) at `axis`. An index outside [-depth, depth) matches no j:
// a row of `off` (ONNX), so it needs no obligation.
struct OneHotState : OpState {
  size_t axis = 0;
  Expr depth;
  void forEachExpr(const ExprFn &fn) const override { fn(depth); }
};

llvm::Expected<OpResult> inferOneHot(const OpInputs &in) {
  if (in.shapes.size() != 3 || !in.has(0) || !in.has(1) || !in.has(2))
    return userError("node " + describe(in.node) + " needs indices, depth and values");
  const Shape &ind = *in.shapes[0];
  int64_t outRank = static_cast<int64_t>(ind.rank()) + 1;
  auto axis = normAxis(in.node, attrInt(in.node, "axis", -1), static_cast<size_t>(outRank));
  if (!axis)
    return axis.takeError();
  auto depth = intInput(in, 1, "the depth");
  if (!depth)
    return depth.takeError();
  if (depth->size() != 1)
    return userError("node " + describe(in.node) + ": depth must be a single value");
  if (in.shapes[2]->rank() != 1 || !in.shapes[2]->dims[0].asInt() || *in.shapes[2]->dims[0].asInt() != 2)
    return userError("node " + describe(in.node) + ": values must be [off, on]");
  // The two values must be known numbers: an unknown one would be a silent default.
  if (!(in.data.size() > 2 && in.data[2] && in.data[2]->numElements() == 2))
    return unsupportedError("node " + describe(in.node) + ": OneHot values that are not a constant [off, on]");
  // The indices' integer values (token ids, expert ids); same requirement as Gather's data indices.
  if (!(in.values.size() && in.values[0]) &&
      !(in.inputValue && in.inputValue(0, indexVars("g", static_cast<unsigned>(ind.rank())))))
    return unsupportedError("node " + describe(in.node) + ": the indices are data whose values are not known " +
                            "(give integer inputs a `values` range in the spec)");
  Expr n = (*depth)[0].simplify();
  OpResult r;
  if (auto c = n.asInt(); c && *c < 0)
    return userError("node " + describe(in.node) + ": negative depth " + std::to_string(*c));
  if (!n.asInt())
    r.obligations.push_back({"the depth of " + describe(in.node) + " is not negative", n >= Expr::intConst(0)});
  Shape out = ind;
  out.dims.insert(out.dims.begin() + *axis, n);
  r.shapes = {out};
  r.dtypes = {in.dtypes[2]};
  OneHotState &st = r.makeState<OneHotState>();
  st.axis = static_cast<size_t>(*axis);
  st.depth = n;
  return r;
}
Term oneHot(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const OneHotState &st = r.stateAs<OneHotState>();
  size_t axis = st.axis;
  IndexVec pos;
  for (size_t d = 0; d < idx.size(); ++d)
    if (d != axis)
      pos.push_back(idx[d]);
  Term t = read(0, pos, level);
  auto v = t && in.indexValue ? in.indexValue(t) : std::nullopt;
  if (!v)
    return nullptr;
  const Expr &j = idx[axis], &n = st.depth;
  Expr zero = Expr::intConst(0);
  Expr hit = (*v >= zero && *v == j) || (*v < zero && *v + n == j);
  return mkMaskSelect(hit, mkConst(in.data[2]->at(1)), mkConst(in.data[2]->at(0)));
}

// --- Trilu ---------------------------------------------------------------------
struct TriluState : OpState {
  Expr k; // the diagonal offset
  bool upper = true;
  void forEachExpr(const ExprFn &fn) const override { fn(k); }
};

llvm::Expected<OpResult> inferTrilu(const OpInputs &in) {
  const Shape &s = *in.shapes[0];
  if (s.rank() < 2)
    return userError("node " + describe(in.node) + ": Trilu needs at least 2 dims");
  OpResult r = one(s, in.dtypes[0]);
  Expr k = Expr::intConst(0);
  if (in.has(1)) {
    auto v = intInput(in, 1, "the diagonal offset k");
    if (!v)
      return v.takeError();
    if (v->size() != 1)
      return userError("node " + describe(in.node) + ": k must be a scalar");
    k = (*v)[0];
  }
  TriluState &st = r.makeState<TriluState>();
  st.k = k;
  st.upper = attrInt(in.node, "upper", 1);
  return r;
}
Term trilu(const OpInputs &, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const TriluState &st = r.stateAs<TriluState>();
  const Expr &i = idx[idx.size() - 2], &j = idx[idx.size() - 1], &k = st.k;
  Expr keep = st.upper ? j - i >= k : j - i <= k;
  return mkSelect(keep, read(0, idx, level), mkConst(0));
}

// --- Range --------------------------------------------------------------------
// y[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0). The
// scalars come from shape arithmetic or from the spec's value bindings (a
// seq_len passed as data), so the length is symbolic (`seq`); delta must be a
// constant. The element is index-valued: i is written as sum(k in [0, i): 1),
// which the integer reasoning reads back as i, so Less(Range, seq_len) builds
// a mask over index ranges.
struct RangeState : OpState {
  Expr start;
  int64_t delta = 1;
  void forEachExpr(const ExprFn &fn) const override { fn(start); }
};

llvm::Expected<OpResult> inferRange(const OpInputs &in) {
  if (!in.has(0) || !in.has(1) || !in.has(2))
    return userError("node " + describe(in.node) + " needs start, limit and delta");
  for (unsigned i = 0; i < 3; ++i)
    if (in.shapes[i]->rank() != 0)
      return userError("node " + describe(in.node) + ": start, limit and delta must be scalars");
  auto scalar = [&](unsigned i, const char *what) -> llvm::Expected<Expr> {
    if (i < in.values.size() && in.values[i] && in.values[i]->size() == 1)
      return in.values[i]->vals[0];
    if (in.inputValue)
      if (auto v = in.inputValue(i, {}))
        return *v;
    return unsupportedError("node " + describe(in.node) + ": " + what +
                            " is not a constant, shape arithmetic or a spec value binding");
  };
  if (isFloating(in.dtypes[0]))
    return unsupportedError("node " + describe(in.node) + ": Range over floating values");
  auto start = scalar(0, "start");
  if (!start)
    return start.takeError();
  auto limit = scalar(1, "limit");
  if (!limit)
    return limit.takeError();
  auto delta = scalar(2, "delta");
  if (!delta)
    return delta.takeError();
  auto d = constInt(in.node, delta->simplify(), "delta");
  if (!d)
    return d.takeError();
  if (*d == 0)
    return userError("node " + describe(in.node) + ": Range with delta 0");
  Expr len = *d > 0 ? ceilDiv(*limit - *start, Expr::intConst(*d)) : ceilDiv(*start - *limit, Expr::intConst(-*d));
  len = len.simplify();
  if (len.hasApp())
    return unsupportedError("node " + describe(in.node) + ": the length of Range depends on data (" + len.str() +
                            "); bind it with `value:` in the spec");
  if (!in.nonNegative || !in.nonNegative(len))
    len = max(len, Expr::intConst(0)).simplify();
  OpResult r = one(Shape{{len}}, in.dtypes[0]);
  RangeState &st = r.makeState<RangeState>();
  st.start = start->simplify();
  st.delta = *d;
  if (auto n = len.asInt(); n && *n <= 64) {
    IntTensor t;
    t.dims = {*n};
    for (int64_t i = 0; i < *n; ++i)
      t.vals.push_back((st.start + Expr::intConst(i * *d)).simplify());
    r.values = {t};
  }
  return r;
}

// A count: sum(k in [0, E): 1) (how shape values and Range's own elements are
// written), or a non-negative integer constant; its E. The sum is max(E, 0):
// E is its value only where E >= 0 is known.
static std::optional<Expr> countOf(const Term &t) {
  if (t->kind == TermKind::Const && t->value >= 0 && t->value == std::floor(t->value) && t->value < 1e15)
    return Expr::intConst(static_cast<int64_t>(t->value));
  if (t->kind == TermKind::Sum && t->red == Fn::Add && t->args[0]->kind == TermKind::Const &&
      t->args[0]->value == 1 && t->lo.asInt() == 0)
    return t->hi;
  return std::nullopt;
}

Term range(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const RangeState &st = r.stateAs<RangeState>();
  Term start = st.start.asInt() ? mkConst(static_cast<double>(*st.start.asInt())) : read(0, {}, level);
  // Positions from an offset (arange(start, start + seq), a sequence shard's
  // or a KV cache's positions): with start a count E and delta > 0, element i
  // is the count of [0, E + delta * i), so two ranges with the same positions
  // are the same term whatever their starts (rank r's i is the reference's
  // i + E) and unify index by index.
  if (auto e = countOf(start); e && st.delta > 0 && !(e->asInt() == 0) &&
                                (e->asInt() || (in.nonNegative && in.nonNegative(*e))))
    return mkSum(level, Expr::intConst(0), (*e + Expr::intConst(st.delta) * idx[0]).simplify(), mkConst(1));
  Term i = mkSum(level, Expr::intConst(0), idx[0], mkConst(1));
  return mkAdd({start, mkMul({mkConst(static_cast<double>(st.delta)), i})});
}

// --- Comparisons, logic and Where ------------------------------------------------
llvm::Expected<OpResult> inferCompare(const OpInputs &in) {
  bool where = in.node.opType == "Where" && in.dtypes.size() > 1;
  return broadcastResult(in, where ? in.dtypes[1] : DType::Bool);
}

// Folds to 0/1 when both sides are numbers; otherwise an opaque predicate.
Term compareLeaves(const std::string &op, const Term &a, const Term &b) {
  if (a->kind == TermKind::Const && b->kind == TermKind::Const) {
    double x = a->value, y = b->value;
    bool v = op == "Equal" ? x == y : op == "Less" ? x < y : op == "Greater" ? x > y
           : op == "LessOrEqual" ? x <= y : op == "GreaterOrEqual" ? x >= y
           : op == "And" ? (x != 0 && y != 0) : (x != 0 || y != 0);
    return mkConst(v ? 1 : 0);
  }
  return mkApply(Fn::Opaque, {a, b}, op);
}

// A comparison of two integer values the prover reads as index expressions
// (a token id against a column number: the one-hot of an embedding's or a
// cross-entropy's backward) as a condition: 1 where it holds, else 0.
static std::optional<Term> integerComparison(const OpInputs &in, const Term &a, const Term &b) {
  const std::string &op = in.node.opType;
  if (op == "And" || op == "Or" || !in.indexValue || isFloating(in.dtypes[0]) || isFloating(in.dtypes[1]))
    return std::nullopt;
  auto x = in.indexValue(a), y = in.indexValue(b);
  if (!x || !y)
    return std::nullopt;
  Expr holds = op == "Equal" ? *x == *y : op == "Less" ? *x < *y : op == "Greater" ? *x > *y
             : op == "LessOrEqual" ? *x <= *y : *x >= *y;
  return mkMaskSelect(holds, mkConst(1), mkConst(0));
}

Term compare(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const std::string &op = in.node.opType;
  Term a = read(0, broadcastIndex(*in.shapes[0], idx), level);
  Term b = read(1, broadcastIndex(*in.shapes[1], idx), level);
  if (auto c = integerComparison(in, a, b))
    return *c;
  return mapLeaves(a, [&](const Term &x) { return mapLeaves(b, [&](const Term &y) { return compareLeaves(op, x, y); }); });
}

Term logicalNot(const OpInputs &, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mapLeaves(read(0, idx, level), [](const Term &x) {
    return x->kind == TermKind::Const ? mkConst(x->value == 0 ? 1 : 0) : mkApply(Fn::Opaque, {x}, "Not");
  });
}

Term where(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term a = read(1, broadcastIndex(*in.shapes[1], idx), level);
  Term b = read(2, broadcastIndex(*in.shapes[2], idx), level);
  return mapLeaves(read(0, broadcastIndex(*in.shapes[0], idx), level), [&](const Term &c) {
    if (c->kind == TermKind::Const)
      return c->value != 0 ? a : b;
    // A mask computed from integer data (token ids against a shard's range)
    // is a condition the prover can split on.
    if (in.indexValue)
      if (auto v = in.indexValue(c))
        return mkMaskSelect(*v != Expr::intConst(0), a, b);
    return mkApply(Fn::Opaque, {c, a, b}, "Where");
  });
}

} // namespace

std::vector<OpDef> indexOps() {
  using C = OpClass;
  return {
      opRow("Gather", C::View, {2, 2}, inferGather, gather),
      opRow("GatherElements", C::View, {2, 2}, inferGatherElements, gatherElements),
      opRow("ConstantOfShape", C::Compute, {1, 1}, inferConstantOfShape, constantOfShape),
      opRow("Expand", C::View, {2, 2}, inferExpand, expand),
      opRow("Trilu", C::Compute, {1, 2}, inferTrilu, trilu),
      opRow("Tile", C::View, {2, 2}, inferTile, tile),
      opRow("DepthToSpace", C::View, {1, 1}, inferDepthToSpace, depthToSpace),
      opRow("OneHot", C::Compute, {3, 3}, inferOneHot, oneHot),
      opRow("Range", C::Compute, {3, 3}, inferRange, range),
      opRow("Equal", C::Compute, {2, 2}, inferCompare, compare),
      opRow("Less", C::Compute, {2, 2}, inferCompare, compare),
      opRow("Greater", C::Compute, {2, 2}, inferCompare, compare),
      opRow("LessOrEqual", C::Compute, {2, 2}, inferCompare, compare),
      opRow("GreaterOrEqual", C::Compute, {2, 2}, inferCompare, compare),
      opRow("And", C::Compute, {2, 2}, inferCompare, compare),
      opRow("Or", C::Compute, {2, 2}, inferCompare, compare),
      opRow("Not", C::Compute, {1, 1}, inferCompare, logicalNot),
      opRow("Where", C::Compute, {3, 3}, inferCompare, where),
  };
}

} // namespace shardproof::ir
