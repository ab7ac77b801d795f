// Equality of terms as linear combinations (real arithmetic): products
// distributed over sums, sums over a range split at their addends, adjacent
// ranges of one body merged, and the addends compared as a multiset. What it
// proves: an all-reduce moved through a linear op (sum over ranks of p_r @ w is
// (sum over ranks of p_r) @ w) and a sum over an axis cut into pieces.
// Addends that differ only in a coefficient c / N, N a size (the 1/(seq*batch)
// of a mean and of its backward), are matched when the solver proves the
// coefficients equal: a data-parallel rank's 1/2 * 1/(seq*batch_local) is the
// reference's 1/(seq*batch) where batch == 2 * batch_local.
#include "Prover.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

constexpr size_t kMaxAddends = 64;

bool isAdd(const Term &t) { return t->kind == TermKind::Apply && t->fn == Fn::Add; }

std::vector<Term> addends(const Term &t) {
  if (isAdd(t))
    return t->args;
  return {t};
}

// The factors of the integer a term of constants and sums of constants counts
// (`8 * sum(k in [0, batch*seq): 1)`, what ReduceMean divides by); each must
// be proven positive before it is used. False for anything else.
bool sizeFactors(const Term &t, const ClassTable &classes, int depth, std::vector<Expr> &out);

// The definition of a computed class read by `read` (at most 4 classes deep);
// the callers accept it only if it is a size or a coefficient throughout, and
// the same at every index.
const Term *uniformDef(const Term &read, const ClassTable &classes, int depth) {
  if (depth >= 4 || read->cls >= classes.size())
    return nullptr;
  const ClassInfo &ci = classes[read->cls];
  if (ci.kind != ClassInfo::Compute || !ci.def)
    return nullptr;
  return &ci.def;
}

bool noPatternIndex(const std::vector<Expr> &fs, size_t from, unsigned rank) {
  for (size_t i = from; i < fs.size(); ++i)
    for (unsigned u = 0; u < rank; ++u)
      if (fs[i].mentions("u!" + std::to_string(u)))
        return false;
  return true;
}

bool sizeFactors(const Term &t, const ClassTable &classes, int depth, std::vector<Expr> &out) {
  if (t->kind == TermKind::Read) {
    const Term *def = uniformDef(t, classes, depth);
    size_t from = out.size();
    return def && sizeFactors(*def, classes, depth + 1, out) &&
           noPatternIndex(out, from, classes[t->cls].shape.rank());
  }
  if (t->kind == TermKind::Const) {
    if (!(t->value >= 1 && t->value < 1e9 && t->value == std::floor(t->value)))
      return false;
    out.push_back(Expr::intConst(static_cast<int64_t>(t->value)));
    return true;
  }
  if (t->kind == TermKind::Apply && t->fn == Fn::Mul) {
    for (auto &a : t->args)
      if (!sizeFactors(a, classes, depth, out))
        return false;
    return true;
  }
  if (t->kind != TermKind::Sum || t->red != Fn::Add)
    return false;
  std::vector<Expr> body;
  if (!sizeFactors(t->args[0], classes, depth, body))
    return false;
  std::string k = "k!" + std::to_string(t->level);
  for (auto &f : body)
    if (f.mentions(k))
      return false; // a triangular count: not a product of lengths
  out.push_back((t->hi - t->lo).simplify());
  out.insert(out.end(), body.begin(), body.end());
  return true;
}

// An addend as c / (product of sizes) * rest: constants and reciprocals of
// sizes taken out of products and out of sums they do not depend on (linear).
struct Scaled {
  double c = 1;
  std::vector<Expr> sizes; // the denominator's factors
  Term rest;
};

// `classes`: a read of a computed class whose definition is such a
// coefficient at every index (a rank's `1 / (8 * seq * batch_local)` tensor
// that its gradients multiply by) is taken out too.
Scaled splitScaled(const Term &t, const ClassTable &classes, int depth = 0) {
  Scaled s;
  s.rest = t;
  if (t->kind == TermKind::Const) {
    s.c = t->value;
    s.rest = mkConst(1);
  } else if (t->kind == TermKind::Read) {
    const Term *def = uniformDef(t, classes, depth);
    if (!def)
      return s;
    Scaled d = splitScaled(*def, classes, depth + 1);
    if (d.sizes.empty() || d.rest->kind != TermKind::Const || d.rest->value != 1 ||
        !noPatternIndex(d.sizes, 0, classes[t->cls].shape.rank()))
      return s;
    return d;
  } else if (t->kind == TermKind::Apply && t->fn == Fn::Recip) {
    if (sizeFactors(t->args[0], classes, depth, s.sizes))
      s.rest = mkConst(1);
    else
      s.sizes.clear();
  } else if (t->kind == TermKind::Apply && t->fn == Fn::Mul) {
    std::vector<Term> rests;
    for (auto &a : t->args) {
      Scaled f = splitScaled(a, classes, depth);
      s.c *= f.c;
      s.sizes.insert(s.sizes.end(), f.sizes.begin(), f.sizes.end());
      rests.push_back(f.rest);
    }
    s.rest = mkMul(std::move(rests));
  } else if (t->kind == TermKind::Sum && t->red == Fn::Add) {
    Scaled b = splitScaled(t->args[0], classes, depth);
    std::string k = "k!" + std::to_string(t->level);
    for (auto &f : b.sizes)
      if (f.mentions(k))
        return s;
    s.c = b.c;
    s.sizes = std::move(b.sizes);
    s.rest = mkReduceLike(t, t->lo, t->hi, b.rest);
  }
  return s;
}

// c as p / q exactly (the double that p / q rounds to, q <= 4096): a mean's
// 1/3 is the fraction it was computed from.
std::optional<std::pair<int64_t, int64_t>> fraction(double c) {
  for (int64_t q = 1; q <= 4096; ++q) {
    double p = std::round(c * static_cast<double>(q));
    if (std::fabs(p) < 1e12 && p / static_cast<double>(q) == c)
      return std::make_pair(static_cast<int64_t>(p), q);
  }
  return std::nullopt;
}

// a * r + b * r + ... as (a + b + ...) * r, for constants of one sign whose
// sum is an exact fraction again (so -inf * 1/2 twice stays -inf, and no
// rounding enters): a row-parallel bias added as b / P on each of P ranks is b.
std::vector<Term> collectLikeAddends(const std::vector<Term> &xs) {
  struct Group {
    Term rest;
    std::vector<Term> members;
    int64_t p = 0, q = 1;
    bool exact = true;
  };
  std::vector<Group> groups;
  for (auto &x : xs) {
    double c = 1;
    Term rest = x;
    if (x->kind == TermKind::Apply && x->fn == Fn::Mul && x->args[0]->kind == TermKind::Const) {
      c = x->args[0]->value;
      rest = mkMul(std::vector<Term>(x->args.begin() + 1, x->args.end()));
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group &g) { return sameTerm(g.rest, rest); });
    if (it == groups.end())
      it = groups.insert(groups.end(), Group{rest, {}});
    auto f = fraction(c);
    bool sameSign = it->members.empty() || (it->p > 0) == (c > 0);
    it->members.push_back(x);
    if (!f || !sameSign || !it->exact) {
      it->exact = false; // and no more arithmetic on it: p and q could overflow
      continue;
    }
    int64_t p = it->p * f->second + f->first * it->q, q = it->q * f->second, g = std::gcd(p, q);
    it->p = p / g;
    it->q = q / g;
    it->exact = it->exact && it->q <= 4096 && std::abs(it->p) < (int64_t{1} << 40);
  }
  std::vector<Term> out;
  for (auto &g : groups) {
    double c = static_cast<double>(g.p) / static_cast<double>(g.q);
    auto back = g.exact ? fraction(c) : std::nullopt;
    if (g.members.size() > 1 && back && back->first == g.p && back->second == g.q)
      out.push_back(mkMul({mkConst(c), g.rest}));
    else
      out.insert(out.end(), g.members.begin(), g.members.end());
  }
  return out;
}

Expr product(const std::vector<Expr> &fs) {
  Expr n = Expr::intConst(1);
  for (auto &f : fs)
    n = n * f;
  return n;
}

} // namespace

// x and y as c_x / N_x * r and c_y / N_y * r: the same r, and c_x * N_y ==
// c_y * N_x for sizes proven positive (so each reciprocal is a real one).
static bool equalScaled(Prover &p, const Scaled &x, const Scaled &y, int level) {
  auto fx = fraction(x.c), fy = fraction(y.c);
  if (!fx || !fy)
    return false;
  Expr positive = Expr::boolConst(true);
  for (auto *side : {&x.sizes, &y.sizes})
    for (auto &f : *side)
      positive = positive && f > Expr::intConst(0);
  if (!p.implies(positive, "linear.scale.positive"))
    return false;
  Expr lhs = Expr::intConst(fx->first * fy->second) * product(y.sizes);
  Expr rhs = Expr::intConst(fy->first * fx->second) * product(x.sizes);
  if (!p.implies(lhs == rhs, "linear.scale"))
    return false;
  return p.equal(x.rest, y.rest, level);
}

// a * (b + c) = a*b + a*c and sum_k (b + c) = sum_k b + sum_k c, recursively
// through Add, Mul and sums; nullopt past kMaxAddends (no blow-up).
std::optional<Term> expandLinear(const Term &t) {
  switch (t->kind) {
  case TermKind::Apply: {
    if (t->fn == Fn::Add) {
      std::vector<Term> out;
      for (auto &a : t->args) {
        auto e = expandLinear(a);
        if (!e)
          return std::nullopt;
        for (auto &x : addends(*e))
          out.push_back(x);
        if (out.size() > kMaxAddends)
          return std::nullopt;
      }
      return mkAdd(std::move(out));
    }
    if (t->fn == Fn::Mul) {
      std::vector<Term> products{mkConst(1)};
      for (auto &f : t->args) {
        auto e = expandLinear(f);
        if (!e)
          return std::nullopt;
        std::vector<Term> next;
        for (auto &p : products)
          for (auto &x : addends(*e))
            next.push_back(mkMul({p, x}));
        if (next.size() > kMaxAddends)
          return std::nullopt;
        products = std::move(next);
      }
      return mkAdd(std::move(products));
    }
    return t;
  }
  case TermKind::Sum: {
    if (t->red != Fn::Add)
      return t;
    auto body = expandLinear(t->args[0]);
    if (!body)
      return std::nullopt;
    std::vector<Term> out;
    for (auto &x : addends(*body))
      out.push_back(mkReduceLike(t, t->lo, t->hi, x));
    return mkAdd(std::move(out));
  }
  default:
    return t;
  }
}

// sum_{k<a} f(k) + sum_{k<b} f(k + a) = sum_{k<a+b} f(k) for a, b >= 0: the
// pieces a sharded axis was cut into, whole again. Repeated until no two merge.
std::vector<Term> Prover::mergeAdjacentSums(std::vector<Term> xs, int level) {
  bool merged = true;
  while (merged) {
    merged = false;
    for (size_t i = 0; i < xs.size() && !merged; ++i) {
      const Term &s = xs[i];
      if (s->kind != TermKind::Sum || s->red != Fn::Add || !s->lo.asInt() || *s->lo.asInt() != 0)
        continue;
      for (size_t j = 0; j < xs.size() && !merged; ++j) {
        const Term &t = xs[j];
        if (j == i || t->kind != TermKind::Sum || t->red != Fn::Add || t->level != s->level ||
            !t->lo.asInt() || *t->lo.asInt() != 0 || t->args[0]->skeleton != s->args[0]->skeleton)
          continue;
        if (!implies(s->hi >= Expr::intConst(0) && t->hi >= Expr::intConst(0), "sum.merge"))
          continue;
        Expr k = boundVar(s->level);
        Term shifted = substitute(s->args[0], {k}, {k + s->hi});
        bool same;
        {
          Scope sc(*this, Expr::intConst(0) <= k && k < t->hi);
          same = equal(shifted, t->args[0], s->level + 1);
        }
        if (!same)
          continue;
        Term whole = mkReduceLike(s, Expr::intConst(0), s->hi + t->hi, s->args[0]);
        xs.erase(xs.begin() + static_cast<long>(std::max(i, j)));
        xs.erase(xs.begin() + static_cast<long>(std::min(i, j)));
        xs.push_back(whole);
        merged = true;
      }
    }
  }
  return xs;
}

// a and b as linear combinations: every addend of one equal to its own addend
// of the other.
bool Prover::equalAsLinear(const Term &a, const Term &b, int level) {
  if (linearDepth_ > 2 || linearBudget_ == 0)
    return false;
  auto ea = expandLinear(a), eb = expandLinear(b);
  if (!ea || !eb)
    return false;
  ++linearDepth_;
  struct Leave {
    unsigned &d;
    ~Leave() { --d; }
  } leave{linearDepth_};
  std::vector<Term> xs = mergeAdjacentSums(collectLikeAddends(addends(*ea)), level);
  std::vector<Term> ys = mergeAdjacentSums(collectLikeAddends(addends(*eb)), level);
  if (xs.size() != ys.size() || (xs.size() == 1 && sameTerm(xs[0], a) && sameTerm(ys[0], b)))
    return false;
  std::vector<Scaled> sy;
  for (auto &y : ys)
    sy.push_back(splitScaled(y, classes_));
  std::vector<bool> used(ys.size(), false);
  for (auto &x : xs) {
    bool found = false;
    Scaled sx = splitScaled(x, classes_);
    for (size_t j = 0; j < ys.size() && !found; ++j) {
      if (used[j] || linearBudget_ == 0)
        continue;
      if (ys[j]->skeleton == x->skeleton) {
        --linearBudget_;
        found = equal(x, ys[j], level);
      }
      // Only where a size divides: other coefficients compare as constants.
      if (!found && (!sx.sizes.empty() || !sy[j].sizes.empty()) &&
          sx.rest->skeleton == sy[j].rest->skeleton && linearBudget_ > 0) {
        --linearBudget_;
        found = equalScaled(*this, sx, sy[j], level);
      }
      used[j] = found;
    }
    if (!found)
      return false;
  }
  return true;
}

} // namespace shardproof::relation
