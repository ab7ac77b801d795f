// Collectives: shapes only. Their element maps read other ranks' tensors, so
// the relation layer, which sees every rank, builds them.
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
  r->aux = {*axis};
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
  r->aux = {*axis};
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
  r->aux = {*split, *cat};
  return r;
}

} // namespace

std::vector<OpDef> collectiveOps() {
  using C = OpClass;
  std::vector<OpDef> out;
  for (const char *dom : {"com.microsoft", "shardproof"}) {
    out.push_back(OpDef{dom, "AllReduce", C::Collective, inferAllReduce, nullptr});
    out.push_back(OpDef{dom, "AllGather", C::Collective, inferAllGather, nullptr});
  }
  out.push_back(OpDef{"shardproof", "ReduceScatter", C::Collective, inferReduceScatter, nullptr});
  out.push_back(OpDef{"shardproof", "AllToAll", C::Collective, inferAllToAll, nullptr});
  return out;
}

} // namespace shardproof::ir
