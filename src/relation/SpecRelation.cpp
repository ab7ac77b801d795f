// Compiling the spec's relation expressions (concat, sum, mean, slice, pad,
// transpose, reshape over NAME@RANK) into element terms.
#include "RankSides.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

static llvm::Expected<int64_t> constKw(const spec::RelExpr &e, const char *key) {
  const auto *kw = e.kwarg(key);
  if (!kw || kw->values.empty())
    return userError(e.fn + "(...) needs " + key + "=", e.loc);
  auto v = kw->values[0].simplify().asInt();
  if (!v)
    return userError(std::string(key) + " of " + e.fn + "(...) must be a constant", kw->loc);
  return *v;
}

static llvm::Expected<Expr> exprKw(const spec::RelExpr &e, const char *key) {
  const auto *kw = e.kwarg(key);
  if (!kw || kw->values.empty())
    return userError(e.fn + "(...) needs " + key + "=", e.loc);
  return kw->values[0];
}

// A leaf NAME@RANK: the rank's tensor as computed so far.
llvm::Expected<std::pair<Term, Shape>> RankSides::rankTensor(const spec::RelExpr &e) {
  if (e.rank < 0 || e.rank >= worldSize())
    return userError("rank " + std::to_string(e.rank) + " out of range for world_size " +
                         std::to_string(worldSize()),
                     e.loc);
  auto id = ranks[e.rank].find(e.name);
  if (!id)
    return userError("rank " + std::to_string(e.rank) + " has no tensor '" + e.name + "'" +
                         didYouMean(e.name, ranks[e.rank].valueNames()),
                     e.loc);
  const ValueInfo &v = rankValue(rankValues, pending, e.rank, *id);
  if (!v.term || !v.shape)
    return unsupportedError("rank " + std::to_string(e.rank) + " tensor '" + e.name + "': " +
                            (v.unsupported.empty() ? "not known yet at this point" : v.unsupported));
  return std::make_pair(v.term, *v.shape);
}

llvm::Expected<std::pair<Term, Shape>> RankSides::compileRelation(const spec::RelExpr &e) {
  if (e.kind == spec::RelExpr::Kind::Tensor)
    return rankTensor(e);
  Args args;
  for (auto &a : e.args) {
    auto c = compileRelation(a);
    if (!c)
      return c.takeError();
    args.push_back(*c);
  }
  if (args.empty())
    return userError(e.fn + "(...) needs at least one tensor", e.loc);
  if (e.fn == "sum" || e.fn == "mean")
    return sumOf(e, args);
  if (e.fn == "concat")
    return concatOf(e, args);
  if (e.fn == "slice" || e.fn == "pad")
    return sliceOrPad(e, args);
  if (e.fn == "transpose")
    return transposeOf(e, args);
  if (e.fn == "reshape")
    return reshapeOf(e, args);
  return userError("unknown relation function '" + e.fn + "'", e.loc);
}

// The constant `axis=` of `e`, inside the rank of its first tensor.
static llvm::Expected<int64_t> axisKw(const spec::RelExpr &e, const Shape &s0) {
  auto a = constKw(e, "axis");
  if (!a)
    return a.takeError();
  int64_t r = static_cast<int64_t>(s0.rank());
  if (*a < -r || *a >= r)
    return userError("axis " + std::to_string(*a) + " out of range for rank " + std::to_string(r), e.loc);
  return *a < 0 ? *a + r : *a;
}

llvm::Expected<std::pair<Term, Shape>> RankSides::sumOf(const spec::RelExpr &e, const Args &args) {
  const Shape &s0 = args[0].second;
  std::vector<Term> ts;
  for (auto &a : args) {
    if (a.second.rank() != s0.rank())
      return userError(e.fn + "(...) of tensors of different rank", e.loc);
    ts.push_back(a.first);
  }
  // mean: the average of its arguments, so mean(x@*) is the sum over the ranks / world_size.
  if (e.fn == "mean")
    return std::make_pair(mkMul({mkConst(1.0 / static_cast<double>(ts.size())), mkAdd(ts)}), s0);
  return std::make_pair(mkAdd(ts), s0);
}

llvm::Expected<std::pair<Term, Shape>> RankSides::concatOf(const spec::RelExpr &e, const Args &args) {
  const Shape &s0 = args[0].second;
  IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
  auto ax = axisKw(e, s0);
  if (!ax)
    return ax.takeError();
  auto [t, total] = concatAlong(
      args.size(), *ax, iv, [&](size_t i) { return args[i].second.dims[*ax]; },
      [&](size_t i, const IndexVec &src) { return instantiate(args[i].first, iv, src, 0); });
  Shape s = s0;
  s.dims[*ax] = total;
  return std::make_pair(t, s);
}

llvm::Expected<std::pair<Term, Shape>> RankSides::sliceOrPad(const spec::RelExpr &e, const Args &args) {
  const Shape &s0 = args[0].second;
  IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
  auto ax = axisKw(e, s0);
  if (!ax)
    return ax.takeError();
  auto a = exprKw(e, e.fn == "slice" ? "start" : "before");
  auto b = exprKw(e, e.fn == "slice" ? "end" : "after");
  if (!a)
    return a.takeError();
  if (!b)
    return b.takeError();
  Shape s = s0;
  IndexVec src = iv;
  if (e.fn == "slice") {
    src[*ax] = iv[*ax] + *a;
    s.dims[*ax] = (*b - *a).simplify();
    raised.push_back({{"slice(...) in the spec stays inside its tensor: 0 <= start <= end <= size",
                       Expr::intConst(0) <= *a && *a <= *b && *b <= s0.dims[*ax]},
                      -1, "", ""});
    return std::make_pair(instantiate(args[0].first, iv, src, 0), s);
  }
  src[*ax] = iv[*ax] - *a;
  s.dims[*ax] = (s0.dims[*ax] + *a + *b).simplify();
  Term inside = instantiate(args[0].first, iv, src, 0);
  return std::make_pair(mkSelect(inRange(iv[*ax], *a, *a + s0.dims[*ax]), inside, mkConst(0)), s);
}

llvm::Expected<std::pair<Term, Shape>> RankSides::transposeOf(const spec::RelExpr &e, const Args &args) {
  const Shape &s0 = args[0].second;
  IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
  const auto *kw = e.kwarg("perm");
  if (!kw || kw->values.size() != s0.rank())
    return userError("transpose(...) needs perm=[...] with one entry per dim", e.loc);
  IndexVec src(s0.rank());
  Shape s;
  for (size_t d = 0; d < s0.rank(); ++d) {
    auto p = kw->values[d].simplify().asInt();
    if (!p || *p < 0 || *p >= static_cast<int64_t>(s0.rank()))
      return userError("transpose perm entries must be constant dims", kw->loc);
    src[*p] = iv[d];
    s.dims.push_back(s0.dims[*p]);
  }
  return std::make_pair(instantiate(args[0].first, iv, src, 0), s);
}

llvm::Expected<std::pair<Term, Shape>> RankSides::reshapeOf(const spec::RelExpr &e, const Args &args) {
  const Shape &s0 = args[0].second;
  IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
  const auto *kw = e.kwarg("shape");
  if (!kw || kw->values.empty())
    return userError("reshape(...) needs shape=[...]", e.loc);
  Shape s;
  for (auto &v : kw->values)
    s.dims.push_back(v.simplify());
  IndexVec ov = indexVars("i", static_cast<unsigned>(s.rank()));
  Expr flat = Expr::intConst(0), total = Expr::intConst(1), stotal = Expr::intConst(1);
  for (size_t d = 0; d < s.rank(); ++d) {
    flat = flat * s.dims[d] + ov[d];
    total = total * s.dims[d];
  }
  IndexVec src(s0.rank());
  for (size_t d = s0.rank(); d-- > 0;) {
    src[d] = d == 0 ? floorDiv(flat, stotal) : mod(floorDiv(flat, stotal), s0.dims[d]);
    stotal = stotal * s0.dims[d];
  }
  raised.push_back({{"reshape(...) in the spec keeps the element count", total == stotal}, -1, "", ""});
  return std::make_pair(instantiate(args[0].first, iv, src, 0), s);
}

// Element term of the implementation side of an output for one placement.
llvm::Expected<std::vector<std::pair<int, std::pair<Term, Shape>>>>
RankSides::ofClaim(const std::string &name, const spec::Placement &pl) {
  using K = spec::Placement::Kind;
  int P = worldSize();
  std::vector<std::pair<int, std::pair<Term, Shape>>> out;
  auto placedTensor = [&](int r) -> llvm::Expected<std::pair<Term, Shape>> {
    std::string rn = spec::Spec::rankName(name, pl, r);
    auto id = ranks[r].find(rn);
    if (!id)
      return userError("rank " + std::to_string(r) + " (" + ranks[r].path + ") has no tensor '" + rn +
                           "' for spec output '" + name + "'" + didYouMean(rn, ranks[r].valueNames()),
                       pl.loc);
    const ValueInfo &v = rankValue(rankValues, pending, r, *id);
    if (!v.term)
      return unsupportedError("rank " + std::to_string(r) + " tensor '" + rn + "': " +
                              (v.unsupported.empty() ? "no element map" : v.unsupported));
    return std::make_pair(v.term, *v.shape);
  };
  if (pl.kind == K::Relation) {
    auto rel = compileRelation(*pl.relation);
    if (!rel)
      return rel.takeError();
    out.push_back({-1, *rel});
    return out;
  }
  std::vector<std::pair<Term, Shape>> parts;
  for (int r = 0; r < P; ++r) {
    auto t = placedTensor(r);
    if (!t)
      return t.takeError();
    parts.push_back(*t);
  }
  if (pl.kind == K::Replicated) {
    for (int r = 0; r < P; ++r)
      out.push_back({r, parts[r]});
    return out;
  }
  if (pl.kind == K::Partial) {
    std::vector<Term> ts;
    for (auto &p : parts)
      ts.push_back(p.first);
    out.push_back({-1, {mkAdd(ts), parts[0].second}});
    return out;
  }
  // Shard: concatenation along the axis.
  const Shape &s0 = parts[0].second;
  int64_t axis = pl.axis < 0 ? pl.axis + static_cast<int64_t>(s0.rank()) : pl.axis;
  if (axis < 0 || axis >= static_cast<int64_t>(s0.rank()))
    return userError("spec output '" + name + "': shard axis out of range", pl.loc);
  IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
  auto [t, total] = concatAlong(
      P, axis, iv, [&](size_t r) { return parts[r].second.dims[axis]; },
      [&](size_t r, const IndexVec &src) { return instantiate(parts[r].first, iv, src, 0); });
  Shape os = s0;
  os.dims[axis] = total;
  if (pl.split == spec::Placement::Split::PadToMultiple) {
    // Rows past the reference's length are pad: when the shards hold exactly
    // the padded length, the claim is about the first n rows only; any other
    // length stays a shape mismatch.
    auto refId = ref.find(name);
    if (refId && refValues[*refId].shape && refValues[*refId].shape->rank() == os.rank()) {
      Expr n = refValues[*refId].shape->dims[axis];
      os.dims[axis] = ite(total == paddedLength(pl, n), n, total).simplify();
    }
  }
  out.push_back({-1, {t, os}});
  return out;
}

} // namespace shardproof::relation
