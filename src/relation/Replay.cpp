// The witness behind a REFUTED output: both sides evaluated on numbers.
//
// The region where two terms are not *structurally* equal over-approximates
// where they differ (at seq = 1 a wrong causal mask may only produce NaN, and
// one point of a region may happen to agree). So instead of trusting one point,
// every element of the output is evaluated at a few small admissible sizes,
// with one memo per size assignment, and the first finite difference wins; a
// finite value against a NaN/inf one is kept as a fallback.
#include "Witness.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

constexpr int kSizeCandidates = 4;      // size assignments tried
constexpr int64_t kMaxElements = 1 << 14; // per assignment; beyond, only the model's index

} // namespace

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

namespace {

std::optional<int64_t> sizeOf(const Expr &e, const std::map<std::string, int64_t> &sizes) {
  return e.eval([&](const std::string &n) -> std::optional<int64_t> {
    auto it = sizes.find(n);
    return it == sizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
  });
}

} // namespace

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

namespace {

// Every element of a tensor of `dims`, computed by `f(idx)`; nullopt if too large.
template <class F>
std::optional<std::vector<double>> tabulate(const std::vector<int64_t> &dims, F f) {
  // Overflow-checked: sizes near 2^60 must say "too large", not wrap around.
  int64_t total = 1;
  for (auto d : dims)
    if (d < 0 || __builtin_mul_overflow(total, d, &total) || total > kMaxElements)
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
std::optional<std::vector<double>> Witness::runReference(int outputId, const std::map<std::string, int64_t> &sizes,
                                                         std::optional<int64_t> intOffset) {
  ClassTable local;
  std::vector<std::optional<ClassId>> mat(ref.values.size());
  Replayer leaves(classes, sizes, intOffset);
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
  // Shape arithmetic (a sequence shard's start, seq // 2) has no element term
  // but its values are size expressions: evaluated at these sizes.
  auto fromValue = [&](int id) {
    const ValueInfo &v = refValues[id];
    if (!v.value)
      return;
    std::vector<double> data;
    for (auto &e : v.value->vals) {
      auto x = sizeOf(e, sizes);
      if (!x)
        return;
      data.push_back(static_cast<double>(*x));
    }
    materialize(id, v.value->dims, data);
  };
  for (int id : ref.inputs)
    fromTerm(id);
  for (int id : ref.initializers)
    fromTerm(id);
  for (const Node &n : ref.nodes) {
    const OpDef *def = opOf(n);
    if (!def || def->cls == OpClass::ShapeOnly || def->cls == OpClass::Collective)
      continue;
    if (n.opType == "Constant") {
      for (int o : n.outputs)
        fromTerm(o);
      continue;
    }
    std::string why;
    auto in = ops.gather(ref, n, refValues, why);
    if (!in)
      continue;
    // Indices read back from this run's own materialized tensors.
    in->indexValue = [this, &local](const Term &t) { return ints.indexValue(local, t); };
    auto res = inferNode(*def, *in);
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
        if (id >= 0 && !mat[id])
          fromValue(id);
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

// Mask-leak probe: record the leaf elements the reference inputs read at these
// sizes, then evaluate the implementation with every other leaf element
// changed. A different number shows content the reference never sees
// (padding) reaching this element.
std::optional<double> Witness::unreadProbe(const Term &actual, const std::vector<int64_t> &idx,
                                           const std::map<std::string, int64_t> &sizes,
                                           std::optional<int64_t> intOffset) {
  Replayer::LeafSet read;
  Replayer rec(classes, sizes, intOffset);
  rec.recordLeafReads(&read);
  std::vector<int> sources = ref.inputs;
  sources.insert(sources.end(), ref.initializers.begin(), ref.initializers.end());
  for (int id : sources) {
    const ValueInfo &v = refValues[id];
    if (!v.term || !v.shape)
      continue;
    auto dims = dimsAt(*v.shape, sizes);
    if (!dims)
      return std::nullopt;
    auto data = tabulate(*dims, [&](const std::vector<int64_t> &i) -> std::optional<double> {
      double x = rec.at(v.term, i);
      return rec.complete() ? std::optional<double>(x) : std::nullopt;
    });
    if (!data)
      return std::nullopt;
  }
  Replayer probe(classes, sizes, intOffset);
  probe.perturbUnread(&read);
  double moved = probe.at(actual, idx);
  return probe.complete() ? std::optional<double>(moved) : std::nullopt;
}

std::string Witness::renderWithModel(const Render &render, const Term &t, const smt::Model &m) {
  std::vector<Expr> from, to;
  for (auto &[n, v] : m.values) {
    // Sizes and the element's indices only: a reduction's bound variable k!L
    // ranges over its sum, whatever value the model happened to give it.
    if (n.rfind("k!", 0) == 0)
      continue;
    from.push_back(Expr::intVar(n));
    to.push_back(Expr::intConst(v));
  }
  Term c = mapExprs(t, [&](const Expr &e) { return e.substitute(from, to).simplify(); });
  return render(c);
}

// For display: unfold the highest rank class on either side a few layers, so
// `y@*` reads `b2 + b2 + ...` and the bug shows in the expressions too.
std::pair<Term, Term> Witness::readableSides(Term a, Term b) {
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

std::optional<Counterexample> Witness::search(const Expr &region, int outputId, int rank, const Shape &shape,
                                                     const Term &expected, const Term &actual, int maxAttempts) {
  const std::string &tensor = ref.values[outputId].name;
  const std::vector<std::string> &syms = symbols;
  std::vector<std::string> order = syms;
  for (size_t d = 0; d < shape.rank(); ++d)
    order.push_back("i!" + std::to_string(d));
  std::optional<Counterexample> fallback; // a NaN/inf on one side only
  // The smallest sizes first (shrunk models), then sizes of at least 2 and 3
  // everywhere: a softmax over one key hides a wrong scale, a size of 1 hides
  // a broadcast. Every attempt excludes the sizes tried before.
  Expr tried = Expr::boolConst(true);
  struct Round {
    int64_t floor;
    int attempts;
  };
  const Round rounds[] = {{1, kSizeCandidates}, {2, 2}, {3, 2}};
  int attempts = 0;
  for (const Round &round : rounds)
    for (int attempt = 0; attempt < round.attempts && attempts++ < maxAttempts; ++attempt) {
      Expr query = region && tried;
      if (round.floor > 1)
        for (auto &n : syms)
          query = query && Expr::intVar(n) >= Expr::intConst(round.floor);
      query = query.simplify();
      smt::CheckResult r = solver.check("witness.sizes", query);
      if (r.result != smt::Result::Sat)
        break; // no more sizes at this floor
      // Each attempt shrinks the sizes in another order, so every size in
      // turn is the one left to grow past the sizes tried (an uneven split
      // shows at batch 5, after batch 4 with every seq).
      std::vector<std::string> shrinkOrder = order;
      if (!syms.empty())
        std::rotate(shrinkOrder.begin(), shrinkOrder.begin() + (attempts - 1) % static_cast<int>(syms.size()),
                    shrinkOrder.begin() + static_cast<long>(syms.size()));
      smt::Model m = solver.shrink("witness", query, r.model, shrinkOrder);
      std::map<std::string, int64_t> sizes;
      std::vector<Expr> fixed;
      for (auto &n : syms)
        if (auto v = m.get(n)) {
          sizes[n] = *v;
          fixed.push_back(Expr::intVar(n) == Expr::intConst(*v));
        }
      // The next attempt must use other sizes.
      tried = (tried && !smt::conj(fixed)).simplify();

      auto dimsOr = dimsAt(shape, sizes);
      if (!dimsOr)
        return fallback;
      std::vector<int64_t> dims = *dimsOr;
      // The element count, saturating at kMaxElements + 1 (sizes near 2^60 must
      // not wrap around): past the limit only the solver's point is compared.
      if (std::find(dims.begin(), dims.end(), 0) != dims.end())
        continue; // no element to compare
      int64_t total = 1;
      for (auto d : dims)
        if (__builtin_mul_overflow(total, d, &total) || total > kMaxElements) {
          total = kMaxElements + 1;
          break;
        }
      for (auto offset : intStrategies(sizes)) {
      // The reference side from the interpreter when it can run at these sizes,
      // else from the relation term (fine when that term is shallow).
      auto refData = runReference(outputId, sizes, offset);
      Replayer rp(classes, sizes, offset);
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
        if (std::isfinite(a) && std::isfinite(b))
          if (auto moved = unreadProbe(actual, idx, sizes, offset); moved && !sameNumber(*moved, b))
            cex.leakValue = *moved;
        if (offset)
          cex.intInputs = describeIntStrategy(sizes, *offset);
        cex.intOffset = offset;
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
        // A NaN reference is IEEE execution (a softmax over no key), while the
        // implementation's number comes from its element term over the reals,
        // where such a row is 0: not a difference execution would show.
        if (!fallback && !std::isnan(a))
          fallback = cex; // keep looking for a finite difference
      } while (total <= kMaxElements && nextIndex(idx, dims));
      }
    }
  return fallback;
}

// The widths of the `values` ranges at these sizes (inputs the spec bounds but
// does not fix).
static std::vector<int64_t> rangeWidths(const ClassTable &classes, const std::map<std::string, int64_t> &sizes) {
  std::vector<int64_t> out;
  auto env = [&](const std::string &n) -> std::optional<int64_t> {
    auto it = sizes.find(n);
    return it == sizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  for (ClassId c = 0; c < classes.size(); ++c) {
    const ClassInfo &ci = classes[c];
    if (ci.kind != ClassInfo::Leaf || !ci.valueRange || ci.exactValue)
      continue;
    auto lo = ci.valueRange->first.eval(env), hi = ci.valueRange->second.eval(env);
    if (lo && hi && *hi >= *lo)
      out.push_back(*hi - *lo);
  }
  return out;
}

// How integer inputs are filled, in the order tried: seeded random values
// first; then, when some input has a `values` range, every element at one
// value: each value of a range of at most 16 (an id on a shard boundary is
// what an off-by-one range check gets wrong, and random ids rarely hit it),
// else both bounds.
std::vector<std::optional<int64_t>> Witness::intStrategies(const std::map<std::string, int64_t> &sizes) const {
  std::vector<std::optional<int64_t>> out = {std::nullopt};
  int64_t widest = -1;
  for (auto w : rangeWidths(classes, sizes))
    widest = std::max(widest, w);
  if (widest < 0)
    return out;
  if (widest < 16)
    for (int64_t o = 0; o <= widest; ++o)
      out.push_back(o);
  else
    out.insert(out.end(), {int64_t{0}, widest});
  return out;
}

std::string Witness::describeIntStrategy(const std::map<std::string, int64_t> &sizes, int64_t offset) const {
  auto env = [&](const std::string &n) -> std::optional<int64_t> {
    auto it = sizes.find(n);
    return it == sizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  std::string out;
  for (ClassId c = 0; c < classes.size(); ++c) {
    const ClassInfo &ci = classes[c];
    if (ci.kind != ClassInfo::Leaf || !ci.valueRange || ci.exactValue)
      continue;
    auto lo = ci.valueRange->first.eval(env), hi = ci.valueRange->second.eval(env);
    if (!lo || !hi || *hi < *lo)
      continue;
    out += (out.empty() ? "every element of " : ", of ") + ci.label + " = " +
           std::to_string(*lo + std::min(offset, *hi - *lo));
  }
  return out;
}

} // namespace shardproof::relation
