// MatMul and Gemm: reductions over the shared dimension.
#include "shardproof/ir/Ops.h"

namespace shardproof::ir {
namespace {

// MatMul follows numpy: 1-D operands are promoted ([K] -> [1, K] / [K, 1]) and
// the promoted dim is dropped from the result; leading dims broadcast.
llvm::Expected<OpResult> inferMatMul(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs two inputs");
  Shape a = *in.shapes[0], b = *in.shapes[1];
  if (a.rank() == 0 || b.rank() == 0)
    return userError("node " + describe(in.node) + ": MatMul of a scalar");
  bool aVec = a.rank() == 1, bVec = b.rank() == 1;
  if (aVec)
    a.dims.insert(a.dims.begin(), smt::Expr::intConst(1));
  if (bVec)
    b.dims.push_back(smt::Expr::intConst(1));
  OpResult r;
  const Dim &ka = a.dims[a.rank() - 1], &kb = b.dims[b.rank() - 2];
  if (auto x = ka.asInt(), y = kb.asInt(); x && y && *x != *y)
    return userError("node " + describe(in.node) + ": inner dims differ (" + std::to_string(*x) +
                     " vs " + std::to_string(*y) + ")");
  if (!ka.same(kb))
    r.obligations.push_back({"inner dims of " + describe(in.node) + " agree: " + ka.str() + " == " + kb.str(),
                             ka == kb});
  Shape ba, bb;
  ba.dims.assign(a.dims.begin(), a.dims.end() - 2);
  bb.dims.assign(b.dims.begin(), b.dims.end() - 2);
  auto batch = broadcastShapes(in.node, {ba, bb}, r.obligations);
  if (!batch)
    return batch.takeError();
  Shape out = *batch;
  if (!aVec)
    out.dims.push_back(a.dims[a.rank() - 2]);
  if (!bVec)
    out.dims.push_back(b.dims[b.rank() - 1]);
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  r.aux = {aVec, bVec};
  r.auxExprs = {ka};
  return r;
}

Term matmul(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  bool aVec = r.aux[0], bVec = r.aux[1];
  const Shape &a = *in.shapes[0], &b = *in.shapes[1];
  size_t batchRank = idx.size() - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  IndexVec batch(idx.begin(), idx.begin() + batchRank);
  smt::Expr m = aVec ? smt::Expr() : idx[batchRank];
  smt::Expr n = bVec ? smt::Expr() : idx[idx.size() - 1];
  smt::Expr k = boundVar(level);
  IndexVec ai, bi;
  if (!aVec) {
    Shape ab;
    ab.dims.assign(a.dims.begin(), a.dims.end() - 2);
    ai = broadcastIndex(ab, batch);
    ai.push_back(m);
  }
  ai.push_back(k);
  if (!bVec) {
    Shape bb;
    bb.dims.assign(b.dims.begin(), b.dims.end() - 2);
    bi = broadcastIndex(bb, batch);
  }
  bi.push_back(k);
  if (!bVec)
    bi.push_back(n);
  Term body = mkMul({read(0, ai, level + 1), read(1, bi, level + 1)});
  return mkSum(level, smt::Expr::intConst(0), r.auxExprs[0], body);
}

llvm::Expected<OpResult> inferGemm(const OpInputs &in) {
  if (!in.has(0) || !in.has(1))
    return userError("node " + describe(in.node) + " needs inputs A and B");
  const Shape &a = *in.shapes[0], &b = *in.shapes[1];
  if (a.rank() != 2 || b.rank() != 2)
    return userError("node " + describe(in.node) + ": Gemm needs 2-D A and B");
  bool ta = attrInt(in.node, "transA", 0), tb = attrInt(in.node, "transB", 0);
  Dim m = ta ? a.dims[1] : a.dims[0], ka = ta ? a.dims[0] : a.dims[1];
  Dim kb = tb ? b.dims[1] : b.dims[0], n = tb ? b.dims[0] : b.dims[1];
  OpResult r;
  if (!ka.same(kb))
    r.obligations.push_back({"inner dims of " + describe(in.node) + " agree", ka == kb});
  Shape out;
  out.dims = {m, n};
  if (in.has(2)) {
    auto s = broadcastShapes(in.node, {out, *in.shapes[2]}, r.obligations);
    if (!s)
      return s.takeError();
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  r.aux = {ta, tb};
  r.auxExprs = {ka};
  return r;
}

static double attrFloat(const Node &n, const char *name, double d) {
  const Attribute *a = n.attr(name);
  return a && a->kind == Attribute::Kind::Float ? a->f : d;
}

Term gemm(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  bool ta = r.aux[0], tb = r.aux[1];
  smt::Expr k = boundVar(level);
  IndexVec ai = ta ? IndexVec{k, idx[0]} : IndexVec{idx[0], k};
  IndexVec bi = tb ? IndexVec{idx[1], k} : IndexVec{k, idx[1]};
  Term prod = mkSum(level, smt::Expr::intConst(0), r.auxExprs[0],
                    mkMul({read(0, ai, level + 1), read(1, bi, level + 1)}));
  double alpha = attrFloat(in.node, "alpha", 1.0), beta = attrFloat(in.node, "beta", 1.0);
  Term y = mkMul({mkConst(alpha), prod});
  if (in.has(2) && beta != 0)
    y = mkAdd({y, mkMul({mkConst(beta), read(2, broadcastIndex(*in.shapes[2], idx), level)})});
  return y;
}

} // namespace

std::vector<OpDef> linalgOps() {
  return {
      OpDef{"", "MatMul", OpClass::Compute, inferMatMul, matmul},
      OpDef{"", "Gemm", OpClass::Compute, inferGemm, gemm},
  };
}

} // namespace shardproof::ir
