// The witness behind a REFUTED output: both sides evaluated on numbers.
//
// The region where two terms are not *structurally* equal over-approximates
// where they differ (at seq = 1 a wrong causal mask may only produce NaN, and
// one point of a region may happen to agree). So instead of trusting one point,
// every element of the output is evaluated at a few small admissible sizes,
// with one memo per size assignment, and the first finite difference wins; a
// finite value against a NaN/inf one is kept as a fallback.
#include "Session.h"

#include <cmath>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

constexpr int kSizeCandidates = 4;      // size assignments tried
constexpr int64_t kMaxElements = 1 << 14; // per assignment; beyond, only the model's index

bool sameNumber(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b))
    return a == b;
  return std::abs(a - b) <= 1e-6 * (1 + std::abs(a) + std::abs(b));
}

// Row-major successor of `idx` within `dims`; false after the last one.
bool nextIndex(std::vector<int64_t> &idx, const std::vector<int64_t> &dims) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < dims[d])
      return true;
    idx[d] = 0;
  }
  return false;
}

std::optional<int64_t> sizeOf(const Expr &e, const std::map<std::string, int64_t> &sizes) {
  return e.eval([&](const std::string &n) -> std::optional<int64_t> {
    auto it = sizes.find(n);
    return it == sizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
  });
}

std::optional<std::vector<int64_t>> dimsAt(const Shape &s, const std::map<std::string, int64_t> &sizes) {
  std::vector<int64_t> dims;
  for (auto &d : s.dims) {
    auto v = sizeOf(d, sizes);
    if (!v || *v < 0)
      return std::nullopt;
    dims.push_back(*v);
  }
  return dims;
}

// Every element of a tensor of `dims`, computed by `f(idx)`; nullopt if too large.
template <class F>
std::optional<std::vector<double>> tabulate(const std::vector<int64_t> &dims, F f) {
  int64_t total = 1;
  for (auto d : dims)
    total *= d;
  if (total > kMaxElements)
    return std::nullopt;
  std::vector<double> data;
  data.reserve(total);
  std::vector<int64_t> idx(dims.size(), 0);
  if (total > 0)
    do {
      auto v = f(idx);
      if (!v)
        return std::nullopt;
      data.push_back(*v);
    } while (nextIndex(idx, dims));
  return data;
}

} // namespace

// A CPU interpreter of the reference graph built from the op table: each node's
// element map reads its inputs as materialized constant tensors, so every
// tensor costs only its own op's work (the composed relation term of a deep
// output would repeat shared sub-computations exponentially). Reference inputs
// are their relations evaluated over the ranks' leaf data, so both sides see
// the same numbers.
std::optional<std::vector<double>> Session::runReference(int outputId, const std::map<std::string, int64_t> &sizes) {
  ClassTable local;
  std::vector<std::optional<ClassId>> mat(ref.values.size());
  Replayer leaves(classes, sizes);
  auto materialize = [&](int id, const std::vector<int64_t> &dims, const std::vector<double> &data) {
    mat[id] = local.constant("ref:" + ref.values[id].name, dims, data);
  };
  auto fromTerm = [&](int id) -> bool {
    const ValueInfo &v = refValues[id];
    if (!v.term || !v.shape)
      return false;
    auto dims = dimsAt(*v.shape, sizes);
    if (!dims)
      return false;
    auto data = tabulate(*dims, [&](const std::vector<int64_t> &idx) -> std::optional<double> {
      double x = leaves.at(v.term, idx);
      return leaves.complete() ? std::optional<double>(x) : std::nullopt;
    });
    if (data)
      materialize(id, *dims, *data);
    return data.has_value();
  };
  for (int id : ref.inputs)
    fromTerm(id);
  for (int id : ref.initializers)
    fromTerm(id);
  for (const Node &n : ref.nodes) {
    const OpDef *def = lookupOp(n.domain, n.opType);
    if (!def || def->cls == OpClass::ShapeOnly || def->cls == OpClass::Collective)
      continue;
    if (n.opType == "Constant") {
      for (int o : n.outputs)
        fromTerm(o);
      continue;
    }
    std::string why;
    auto in = gatherInputs(ref, n, refValues, why);
    if (!in)
      continue;
    // Indices read back from this run's own materialized tensors.
    in->indexValue = [this, &local](const Term &t) { return indexValue(local, t); };
    auto res = def->infer(*in);
    if (!res) {
      llvm::consumeError(res.takeError());
      continue;
    }
    for (size_t s = 0; s < n.outputs.size() && s < res->shapes.size(); ++s) {
      int o = n.outputs[s];
      if (!refValues[o].term)
        continue; // shape data
      auto dims = dimsAt(res->shapes[s], sizes);
      if (!dims)
        return std::nullopt;
      bool missing = false;
      ReadFn read = [&](unsigned input, const IndexVec &idx, int) -> Term {
        int id = n.inputs[input];
        if (id < 0 || !mat[id]) {
          missing = true;
          return mkConst(0);
        }
        return mkRead(*mat[id], idx);
      };
      Replayer rp(local, sizes);
      auto data = tabulate(*dims, [&](const std::vector<int64_t> &idx) -> std::optional<double> {
        IndexVec at;
        for (auto i : idx)
          at.push_back(Expr::intConst(i));
        Term t = def->element(*in, *res, static_cast<unsigned>(s), at, read, 0);
        if (!t || missing)
          return std::nullopt;
        double x = rp.at(t, {});
        return rp.complete() ? std::optional<double>(x) : std::nullopt;
      });
      if (!data)
        return std::nullopt;
      materialize(o, *dims, *data);
    }
  }
  if (!mat[outputId])
    return std::nullopt;
  return local[*mat[outputId]].data;
}

// For display: unfold the highest rank class on either side a few layers, so
// `y@*` reads `b2 + b2 + ...` and the bug shows in the expressions too.
std::pair<Term, Term> Session::readableSides(Term a, Term b) {
  constexpr size_t kMaxShown = 400; // term nodes
  auto unfold = [&](Term t) {
    for (int layer = 0; layer < 8; ++layer) {
      ClassId c = Prover::highestComputed(t, classes);
      if (c == static_cast<ClassId>(-1))
        break;
      Term n = prover.expandClass(t, c, 0);
      if (termSize(n) > kMaxShown)
        break;
      t = n;
    }
    return t;
  };
  return {unfold(a), unfold(b)};
}

std::optional<Counterexample> Session::searchWitness(const Expr &region, int outputId, int rank, const Shape &shape,
                                                     const Term &expected, const Term &actual) {
  const std::string &tensor = ref.values[outputId].name;
  std::vector<std::string> syms = symbolNames();
  std::vector<std::string> order = syms;
  for (size_t d = 0; d < shape.rank(); ++d)
    order.push_back("i!" + std::to_string(d));
  std::optional<Counterexample> fallback; // a NaN/inf on one side only
  Expr query = region;
  for (int attempt = 0; attempt < kSizeCandidates; ++attempt) {
    smt::CheckResult r = solver.check("witness.sizes", query);
    if (r.result != smt::Result::Sat)
      break;
    smt::Model m = solver.shrink("witness", query, r.model, order);
    std::map<std::string, int64_t> sizes;
    std::vector<Expr> fixed;
    for (auto &n : syms)
      if (auto v = m.get(n)) {
        sizes[n] = *v;
        fixed.push_back(Expr::intVar(n) == Expr::intConst(*v));
      }
    // The next attempt must use other sizes.
    query = (query && !smt::conj(fixed)).simplify();

    auto dimsOr = dimsAt(shape, sizes);
    if (!dimsOr)
      return fallback;
    std::vector<int64_t> dims = *dimsOr;
    int64_t total = 1;
    for (auto d : dims)
      total *= d;
    if (total == 0)
      continue;
    // The reference side from the interpreter when it can run at these sizes,
    // else from the relation term (fine when that term is shallow).
    auto refData = runReference(outputId, sizes);
    Replayer rp(classes, sizes);
    std::vector<int64_t> idx(dims.size(), 0);
    int64_t flat = 0;
    if (total > kMaxElements) // too many to scan: the point the solver found
      for (size_t d = 0; d < dims.size(); ++d)
        idx[d] = m.get("i!" + std::to_string(d)).value_or(0);
    do {
      double a = refData && flat < static_cast<int64_t>(refData->size()) && total <= kMaxElements
                     ? (*refData)[flat++]
                     : rp.at(expected, idx);
      double b = rp.at(actual, idx);
      if (!rp.complete())
        break; // out of budget at these sizes: nothing below can be trusted
      if (sameNumber(a, b))
        continue;
      Counterexample cex;
      cex.tensor = tensor;
      cex.rank = rank;
      for (auto &n : syms)
        if (sizes.count(n))
          cex.sizes.push_back({n, sizes[n]});
      cex.index = idx;
      cex.expectedValue = a;
      cex.expectedByInterpreter = refData.has_value();
      cex.actualValue = b;
      cex.replayed = true;
      smt::Model at;
      for (auto &[n, v] : sizes)
        at.values.push_back({n, v});
      for (size_t d = 0; d < idx.size(); ++d)
        at.values.push_back({"i!" + std::to_string(d), idx[d]});
      auto [shownA, shownB] = readableSides(expected, actual);
      cex.expected = renderAt(shownA, at);
      cex.actual = renderAt(shownB, at);
      if (std::isfinite(a) && std::isfinite(b))
        return cex;
      if (!fallback)
        fallback = cex; // keep looking for a finite difference
    } while (total <= kMaxElements && nextIndex(idx, dims));
  }
  return fallback;
}

} // namespace shardproof::relation
