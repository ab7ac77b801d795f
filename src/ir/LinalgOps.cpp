// MatMul, Gemm and Einsum: reductions over the shared dimensions.
#include "shardproof/ir/Ops.h"

#include <algorithm>
#include <map>

namespace shardproof::ir {
namespace {

// MatMul follows numpy: 1-D operands are promoted ([K] -> [1, K] / [K, 1]) and
// the promoted dim is dropped from the result; leading dims broadcast.
// MatMul: whether each operand is a vector (rank 1), and the contracted length.
struct MatMulState : OpState {
  bool aVec = false, bVec = false;
  smt::Expr inner;
  void forEachExpr(const ExprFn &fn) const override { fn(inner); }
};

// Gemm: whether each operand is transposed, and the contracted length.
struct GemmState : OpState {
  bool ta = false, tb = false;
  smt::Expr inner;
  void forEachExpr(const ExprFn &fn) const override { fn(inner); }
};

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
  MatMulState &st = r.makeState<MatMulState>();
  st.aVec = aVec;
  st.bVec = bVec;
  st.inner = ka;
  return r;
}

Term matmul(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const MatMulState &st = r.stateAs<MatMulState>();
  bool aVec = st.aVec, bVec = st.bVec;
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
  return mkSum(level, smt::Expr::intConst(0), st.inner, body);
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
  // C is added to [M, N] one way (a C with more dims, or one the output would
  // have to grow to, is no Gemm ONNX runs).
  if (in.has(2))
    if (auto e = broadcastsTo(in.node, "C", *in.shapes[2], out, r.obligations))
      return std::move(e);
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  GemmState &st = r.makeState<GemmState>();
  st.ta = ta;
  st.tb = tb;
  st.inner = ka;
  return r;
}

static double attrFloat(const Node &n, const char *name, double d) {
  const Attribute *a = n.attr(name);
  return a && a->kind == Attribute::Kind::Float ? a->f : d;
}

Term gemm(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const GemmState &st = r.stateAs<GemmState>();
  bool ta = st.ta, tb = st.tb;
  smt::Expr k = boundVar(level);
  IndexVec ai = ta ? IndexVec{k, idx[0]} : IndexVec{idx[0], k};
  IndexVec bi = tb ? IndexVec{idx[1], k} : IndexVec{k, idx[1]};
  Term prod = mkSum(level, smt::Expr::intConst(0), st.inner,
                    mkMul({read(0, ai, level + 1), read(1, bi, level + 1)}));
  double alpha = attrFloat(in.node, "alpha", 1.0), beta = attrFloat(in.node, "beta", 1.0);
  Term y = mkMul({mkConst(alpha), prod});
  if (in.has(2) && beta != 0)
    y = mkAdd({y, mkMul({mkConst(beta), read(2, broadcastIndex(*in.shapes[2], idx), level)})});
  return y;
}

// --- Einsum ----------------------------------------------------------------------
// One letter per axis of each operand; `...` stands for the leading batch dims,
// right-aligned across operands; a dim of 1 broadcasts against its label's size. The output's
// letters (explicit after `->`, else `...` then the letters used once, sorted)
// index it; every other letter is summed over: y[out] = sum over contracted
// letters of the product of the operands' reads.
struct EinsumState : OpState {
  std::vector<int64_t> operandIds; // every operand's dims' label ids in order; -1: a broadcast 1, read at 0
  std::vector<int64_t> outputIds;  // the output dims' label ids
  std::vector<smt::Expr> sizes;    // the dim of each label id
  void forEachExpr(const ExprFn &fn) const override { each(sizes, fn); }
};

struct EinsumSpec {
  std::vector<std::string> operands; // letters, '.' for an ellipsis
  std::string output;
  bool explicitOut = false;
};

bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

llvm::Expected<EinsumSpec> parseEinsum(const Node &n, size_t inputs) {
  const Attribute *a = n.attr("equation");
  if (!a || a->kind != Attribute::Kind::String)
    return userError("node " + describe(n) + ": Einsum without a string 'equation'");
  std::string eq;
  for (char c : a->s)
    if (c != ' ')
      eq += c;
  auto bad = [&](const std::string &why) { return userError("node " + describe(n) + ": equation '" + a->s + "' " + why); };
  EinsumSpec spec;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  spec.explicitOut = arrow != std::string::npos;
  // Each term's "..." becomes one '.'; anything else that is not a letter is malformed.
  auto term = [&](std::string t, std::string &out) -> llvm::Error {
    size_t dots = t.find("...");
    if (dots != std::string::npos)
      t.replace(dots, 3, ".");
    if (std::count(t.begin(), t.end(), '.') > (dots != std::string::npos ? 1 : 0))
      return bad("has a term '" + t + "' with a stray '.' or more than one ellipsis");
    for (char c : t)
      if (!isLetter(c) && c != '.')
        return bad("has a term '" + t + "' that is not letters");
    out = t;
    return llvm::Error::success();
  };
  if (spec.explicitOut) {
    if (eq.find("->", arrow + 2) != std::string::npos)
      return bad("has more than one '->'");
    if (auto e = term(eq.substr(arrow + 2), spec.output))
      return e;
  }
  size_t at = 0;
  for (size_t comma;; at = comma + 1) {
    comma = lhs.find(',', at);
    spec.operands.emplace_back();
    if (auto e = term(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at), spec.operands.back()))
      return e;
    if (comma == std::string::npos)
      break;
  }
  std::map<char, int> uses;
  for (auto &t : spec.operands)
    for (char c : t) {
      // A letter twice in one operand takes a diagonal (trace): not modelled.
      if (c != '.' && std::count(t.begin(), t.end(), c) > 1)
        return unsupportedError("node " + describe(n) + ": Einsum taking a diagonal ('" + t + "' in '" + a->s + "')");
      if (c != '.')
        ++uses[c];
    }
  if (spec.operands.size() != inputs)
    return bad("has " + std::to_string(spec.operands.size()) + " operands, the node " + std::to_string(inputs) +
               " inputs");
  bool anyEllipsis = std::any_of(spec.operands.begin(), spec.operands.end(),
                                 [](const std::string &t) { return t.find('.') != std::string::npos; });
  if (spec.explicitOut) {
    for (char c : spec.output) {
      if (c == '.')
        continue;
      if (std::count(spec.output.begin(), spec.output.end(), c) > 1)
        return bad("repeats '" + std::string(1, c) + "' in its output");
      if (!uses.count(c))
        return bad("has output letter '" + std::string(1, c) + "' in no operand");
    }
    // Summing the broadcast dims away: numpy's rule for it is not ONNX's to rely on.
    if (anyEllipsis && spec.output.find('.') == std::string::npos)
      return unsupportedError("node " + describe(n) + ": Einsum summing over the dims of an ellipsis ('" + a->s + "')");
  } else {
    if (anyEllipsis)
      spec.output = ".";
    for (auto &[c, k] : uses) // std::map: sorted by character, as numpy's implicit output
      if (k == 1)
        spec.output += c;
  }
  return spec;
}

llvm::Expected<OpResult> inferEinsum(const OpInputs &in) {
  if (in.shapes.empty())
    return userError("node " + describe(in.node) + " has no inputs");
  for (unsigned i = 0; i < in.shapes.size(); ++i)
    if (!in.has(i))
      return userError("node " + describe(in.node) + ": input " + std::to_string(i) + " is missing");
  auto spec = parseEinsum(in.node, in.shapes.size());
  if (!spec)
    return spec.takeError();
  // The ellipsis of each operand covers the dims its letters leave; all of them
  // right-align into one frame of `frame` dims, labelled 256 + position.
  std::vector<size_t> ellRank(spec->operands.size(), 0);
  size_t frame = 0;
  for (size_t i = 0; i < spec->operands.size(); ++i) {
    const std::string &t = spec->operands[i];
    size_t rank = in.shapes[i]->rank(), named = t.size() - (t.find('.') != std::string::npos ? 1 : 0);
    if (t.find('.') == std::string::npos ? named != rank : named > rank)
      return userError("node " + describe(in.node) + ": operand " + std::to_string(i) + " has rank " +
                       std::to_string(rank) + " but the equation gives it " + std::to_string(named) + " letters ('" +
                       t + "')");
    ellRank[i] = t.find('.') != std::string::npos ? rank - named : 0;
    frame = std::max(frame, ellRank[i]);
  }
  auto labels = [&](const std::string &t, size_t ell) {
    std::vector<int> out;
    for (char c : t) {
      if (c != '.') {
        out.push_back(static_cast<unsigned char>(c));
        continue;
      }
      for (size_t e = 0; e < ell; ++e)
        out.push_back(256 + static_cast<int>(frame - ell + e));
    }
    return out;
  };
  OpResult r;
  EinsumState &st = r.makeState<EinsumState>();
  std::map<int, int64_t> id;
  std::vector<std::vector<int>> opLabels;
  for (size_t i = 0; i < spec->operands.size(); ++i)
    opLabels.push_back(labels(spec->operands[i], ellRank[i]));
  auto name = [](int l) { return l < 256 ? "letter '" + std::string(1, static_cast<char>(l)) + "'"
                                         : "ellipsis dim " + std::to_string(l - 256); };
  auto isOne = [](const Dim &d) { return d.asInt() && *d.asInt() == 1; };
  // A label's size: its first dim that is not 1; a dim of 1 broadcasts (numpy,
  // onnxruntime and torch do this for letters as well as for the ellipsis).
  for (size_t i = 0; i < opLabels.size(); ++i)
    for (size_t d = 0; d < opLabels[i].size(); ++d) {
      int l = opLabels[i][d];
      const Dim &now = in.shapes[i]->dims[d];
      auto [it, fresh] = id.emplace(l, static_cast<int64_t>(st.sizes.size()));
      if (fresh)
        st.sizes.push_back(now);
      else if (isOne(st.sizes[it->second]))
        st.sizes[it->second] = now;
    }
  for (size_t i = 0; i < opLabels.size(); ++i)
    for (size_t d = 0; d < opLabels[i].size(); ++d) {
      int l = opLabels[i][d];
      const Dim &size = st.sizes[id.at(l)], &now = in.shapes[i]->dims[d];
      if (isOne(now) && !isOne(size)) {
        st.operandIds.push_back(-1); // broadcast along this dim: always element 0
        continue;
      }
      st.operandIds.push_back(id.at(l));
      if (auto x = size.asInt(), y = now.asInt(); x && y && *x != *y)
        return userError("node " + describe(in.node) + ": " + name(l) + " has sizes " + std::to_string(*x) + " and " +
                         std::to_string(*y));
      if (!size.same(now))
        r.obligations.push_back(
            {"dims of " + name(l) + " in " + describe(in.node) + " agree: " + size.str() + " == " + now.str(), size == now});
    }
  Shape out;
  for (int l : labels(spec->output, frame)) {
    st.outputIds.push_back(id.at(l));
    out.dims.push_back(st.sizes[id.at(l)]);
  }
  r.shapes = {out};
  r.dtypes = {in.dtypes[0]};
  return r;
}

Term einsum(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const EinsumState &st = r.stateAs<EinsumState>();
  size_t letters = st.sizes.size();
  // Each letter's index: the output's, or the binder of its sum (in letter order).
  std::vector<smt::Expr> at(letters);
  std::vector<bool> bound(letters, false);
  for (size_t d = 0; d < idx.size(); ++d) {
    at[st.outputIds[d]] = idx[d];
    bound[st.outputIds[d]] = true;
  }
  std::vector<size_t> summed;
  for (size_t l = 0; l < letters; ++l)
    if (!bound[l]) {
      at[l] = boundVar(level + static_cast<int>(summed.size()));
      summed.push_back(l);
    }
  int inner = level + static_cast<int>(summed.size());
  std::vector<Term> factors;
  size_t k = 0;
  for (unsigned i = 0; i < in.shapes.size(); ++i) {
    IndexVec src;
    for (size_t d = 0; d < in.shapes[i]->rank(); ++d, ++k)
      src.push_back(st.operandIds[k] < 0 ? smt::Expr::intConst(0) : at[st.operandIds[k]]);
    factors.push_back(read(i, src, inner));
  }
  Term t = mkMul(factors);
  for (size_t s = summed.size(); s-- > 0;)
    t = mkSum(level + static_cast<int>(s), smt::Expr::intConst(0), st.sizes[summed[s]], t);
  return t;
}

} // namespace

std::vector<OpDef> linalgOps() {
  return {
      OpDef{"", "MatMul", OpClass::Compute, {2, 2}, inferMatMul, matmul},
      OpDef{"", "Gemm", OpClass::Compute, {2, 3}, inferGemm, gemm},
      OpDef{"", "Einsum", OpClass::Compute, {1, Arity::kAnyCount}, inferEinsum, einsum},
  };
}

} // namespace shardproof::ir
