// Collectives: each row has its one-rank shape inference (`infer`) and its
// element map across ranks (`CollectiveDef`): the obligations on the ranks'
// input shapes, each rank's output shape, and each rank's output element as
// reads of every rank's input. The relation layer, which walks the ranks in
// lock-step, evaluates these and knows no collective by name.
#include "shardproof/ir/Ops.h"

namespace shardproof::ir {
namespace {

using smt::Expr;

llvm::Expected<OpResult> inferAllReduce(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  const Attribute *op = in.node.attr("op");
  if (op && op->kind == Attribute::Kind::String && op->s != "sum" && op->s != "max" && op->s != "min")
    return userError("node " + describe(in.node) + ": unknown reduction op '" + op->s + "' (sum|max|min)");
  OpResult r;
  r.shapes = {*in.shapes[0]};
  r.dtypes = {in.dtypes[0]};
  return r;
}

llvm::Expected<int64_t> groupSize(const OpInputs &in) {
  int64_t g = attrInt(in.node, "group_size", in.worldSize);
  if (g != in.worldSize)
    return unsupportedError("node " + describe(in.node) + ": group_size " + std::to_string(g) +
                            " differs from world_size " + std::to_string(in.worldSize) +
                            " (sub-groups are not supported yet)");
  return g;
}

llvm::Expected<OpResult> inferAllGather(const OpInputs &in) {
  auto r = inferAllReduce(in);
  if (!r)
    return r.takeError();
  auto g = groupSize(in);
  if (!g)
    return g.takeError();
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), in.shapes[0]->rank());
  if (!axis)
    return axis.takeError();
  // The output shape is only known once every rank's input is; the relation
  // layer replaces this by the sum of the ranks' sizes.
  r->shapes[0].dims[*axis] = r->shapes[0].dims[*axis] * *g;
  return r;
}

llvm::Expected<OpResult> inferReduceScatter(const OpInputs &in) {
  auto r = inferAllReduce(in);
  if (!r)
    return r.takeError();
  auto g = groupSize(in);
  if (!g)
    return g.takeError();
  auto axis = normAxis(in.node, attrInt(in.node, "axis", 0), in.shapes[0]->rank());
  if (!axis)
    return axis.takeError();
  Expr d = in.shapes[0]->dims[*axis];
  r->obligations.push_back({"ReduceScatter axis of " + describe(in.node) + " divides by the group size",
                            mod(d, Expr::intConst(*g)) == Expr::intConst(0)});
  r->shapes[0].dims[*axis] = floorDiv(d, Expr::intConst(*g));
  return r;
}

// AllToAll: rank q cuts its input into group_size equal chunks along
// `split_axis`; rank r receives chunk r of every rank, concatenated in rank
// order along `concat_axis` (Ulysses-style sequence/head exchange).
llvm::Expected<OpResult> inferAllToAll(const OpInputs &in) {
  auto r = inferAllReduce(in);
  if (!r)
    return r.takeError();
  auto g = groupSize(in);
  if (!g)
    return g.takeError();
  size_t rank = in.shapes[0]->rank();
  auto split = normAxis(in.node, attrInt(in.node, "split_axis", 0), rank);
  if (!split)
    return split.takeError();
  auto cat = normAxis(in.node, attrInt(in.node, "concat_axis", 0), rank);
  if (!cat)
    return cat.takeError();
  Expr d = in.shapes[0]->dims[*split];
  r->obligations.push_back({"AllToAll split axis of " + describe(in.node) + " divides by the group size",
                            mod(d, Expr::intConst(*g)) == Expr::intConst(0)});
  Shape &out = r->shapes[0];
  out.dims[*split] = floorDiv(d, Expr::intConst(*g));
  out.dims[*cat] = out.dims[*cat] * *g;
  return r;
}

// --- element maps across ranks ------------------------------------------------

int worldOf(const std::vector<Shape> &ins) { return static_cast<int>(ins.size()); }

// An axis attribute of the call, normalised against the input's rank (the
// relation layer has checked it is in range).
size_t axisOf(const Node &n, const char *name, const Shape &in) {
  int64_t a = attrInt(n, name, 0);
  return static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(in.rank()) : a);
}

// The length of one rank's chunk along `axis` when the input is cut in world-size equal parts.
Expr chunkOf(const std::vector<Shape> &ins, size_t axis) {
  return floorDiv(ins[0].dims[axis], Expr::intConst(worldOf(ins)));
}

// Reductions and exchanges read the same element on every rank: shapes must agree.
void equalShapes(const Node &n, const std::vector<Shape> &ins, std::vector<RankObligation> &out) {
  for (int r = 1; r < worldOf(ins); ++r)
    for (size_t d = 0; d < ins[0].rank(); ++d)
      out.push_back({r, {"ranks pass equal shapes to " + describe(n) + " (dim " + std::to_string(d) + ")",
                         ins[r].dims[d] == ins[0].dims[d]}});
}

Shape firstRankShape(const Node &, const std::vector<Shape> &ins, int) { return ins[0]; }

// AllReduce: every rank receives the sum (max, min) of all ranks' elements.
Term allReduceElement(const Node &n, const std::vector<Shape> &ins, int, const IndexVec &idx,
                      const RankReadFn &read) {
  const Attribute *a = n.attr("op");
  std::string op = a && a->kind == Attribute::Kind::String ? a->s : "sum";
  Term t;
  for (int q = 0; q < worldOf(ins); ++q) {
    Term x = read(q, idx);
    if (!t)
      t = x;
    else if (op == "sum")
      t = mkAdd({t, x});
    else
      t = mkApply(op == "max" ? Fn::Max2 : Fn::Min2, {t, x});
  }
  return t;
}

// AllGather: the concatenation of the ranks' inputs along `axis`, in rank
// order; the ranks' pieces may differ in length (uneven shards).
Shape allGatherShape(const Node &n, const std::vector<Shape> &ins, int) {
  size_t axis = axisOf(n, "axis", ins[0]);
  Shape os = ins[0];
  Expr total = Expr::intConst(0);
  for (const Shape &s : ins)
    total = (total + s.dims[axis]).simplify(); // as concatAlong adds them
  os.dims[axis] = total;
  return os;
}

Term allGatherElement(const Node &n, const std::vector<Shape> &ins, int, const IndexVec &idx,
                      const RankReadFn &read) {
  size_t axis = axisOf(n, "axis", ins[0]);
  return concatAlong(
             ins.size(), axis, idx, [&](size_t q) { return ins[q].dims[axis]; },
             [&](size_t q, const IndexVec &src) { return read(static_cast<int>(q), src); })
      .first;
}

// ReduceScatter: rank r receives chunk r (along `axis`) of the sum of all ranks' inputs.
void reduceScatterObligations(const Node &n, const std::vector<Shape> &ins, std::vector<RankObligation> &out) {
  equalShapes(n, ins, out);
  // Every rank receives an equal chunk: the length must divide (NCCL's rule).
  size_t axis = axisOf(n, "axis", ins[0]);
  Expr world = Expr::intConst(worldOf(ins));
  out.push_back({0, {"world_size " + std::to_string(worldOf(ins)) + " divides axis " + std::to_string(axis) +
                         " of the input to " + describe(n),
                     mod(ins[0].dims[axis], world) == Expr::intConst(0)}});
}

Shape reduceScatterShape(const Node &n, const std::vector<Shape> &ins, int) {
  size_t axis = axisOf(n, "axis", ins[0]);
  Shape os = ins[0];
  os.dims[axis] = chunkOf(ins, axis);
  return os;
}

Term reduceScatterElement(const Node &n, const std::vector<Shape> &ins, int r, const IndexVec &idx,
                          const RankReadFn &read) {
  size_t axis = axisOf(n, "axis", ins[0]);
  IndexVec src = idx;
  src[axis] = idx[axis] + chunkOf(ins, axis) * r;
  Term t;
  for (int q = 0; q < worldOf(ins); ++q)
    t = t ? mkAdd({t, read(q, src)}) : read(q, src);
  return t;
}

// AllToAll: rank r's output is chunk r (along `split_axis`) of every rank's
// input, concatenated in rank order along `concat_axis`.
Shape allToAllShape(const Node &n, const std::vector<Shape> &ins, int) {
  size_t split = axisOf(n, "split_axis", ins[0]), cat = axisOf(n, "concat_axis", ins[0]);
  Shape os = ins[0];
  os.dims[split] = chunkOf(ins, split);
  os.dims[cat] = os.dims[cat] * worldOf(ins);
  return os;
}

Term allToAllElement(const Node &n, const std::vector<Shape> &ins, int r, const IndexVec &idx,
                     const RankReadFn &read) {
  size_t split = axisOf(n, "split_axis", ins[0]), cat = axisOf(n, "concat_axis", ins[0]);
  Expr chunk = chunkOf(ins, split);
  // Extent of one rank's piece along the concat axis (a chunk if it is also the split axis).
  Expr piece = split == cat ? chunk : ins[0].dims[cat];
  // Piece q of rank r's output is chunk r of rank q's input.
  Term t;
  for (int q = worldOf(ins) - 1; q >= 0; --q) {
    IndexVec src = idx;
    src[cat] = idx[cat] - piece * q;
    src[split] = src[split] + chunk * r;
    Term x = read(q, src);
    t = t ? mkSelect(idx[cat] < piece * (q + 1), x, t) : x;
  }
  return t;
}

const CollectiveDef kAllReduce{true, {}, true, equalShapes, firstRankShape, allReduceElement};
const CollectiveDef kAllGather{false, {"axis"}, false, nullptr, allGatherShape, allGatherElement};
const CollectiveDef kReduceScatter{false, {"axis"}, true, reduceScatterObligations, reduceScatterShape,
                                   reduceScatterElement};
const CollectiveDef kAllToAll{false, {"split_axis", "concat_axis"}, false, equalShapes, allToAllShape,
                              allToAllElement};

} // namespace

std::string collectiveCall(const Node &n) {
  std::string call = n.opType;
  const OpDef *d = opOf(n);
  if (d && d->collective && d->collective->readsOp) {
    const Attribute *a = n.attr("op");
    call += ":" + (a && a->kind == Attribute::Kind::String ? a->s : std::string("sum"));
  }
  // Layout attributes are part of the call (the element maps use rank 0's).
  // Every one any collective reads counts, so two ranks that differ in one the
  // row does not read are still told apart before the attribute is rejected.
  for (const char *attr : {"axis", "split_axis", "concat_axis"})
    if (const Attribute *a = n.attr(attr); a && a->kind == Attribute::Kind::Int)
      call += std::string(" ") + attr + "=" + std::to_string(a->i);
  return call;
}

std::vector<OpDef> collectiveOps() {
  using C = OpClass;
  std::vector<OpDef> out;
  for (const char *dom : {"com.microsoft", "shardproof"}) {
    out.push_back(OpDef{dom, "AllReduce", C::Collective, {1, 1}, inferAllReduce, nullptr, &kAllReduce});
    out.push_back(OpDef{dom, "AllGather", C::Collective, {1, 1}, inferAllGather, nullptr, &kAllGather});
  }
  out.push_back(OpDef{"shardproof", "ReduceScatter", C::Collective, {1, 1}, inferReduceScatter, nullptr, &kReduceScatter});
  out.push_back(OpDef{"shardproof", "AllToAll", C::Collective, {1, 1}, inferAllToAll, nullptr, &kAllToAll});
  return out;
}

} // namespace shardproof::ir
