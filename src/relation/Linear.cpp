// Equality of terms as linear combinations (real arithmetic): products
// distributed over sums, sums over a range split at their addends, adjacent
// ranges of one body merged, and the addends compared as a multiset. What it
// proves: an all-reduce moved through a linear op (sum over ranks of p_r @ w is
// (sum over ranks of p_r) @ w) and a sum over an axis cut into pieces.
#include "Prover.h"

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

} // namespace

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
  std::vector<Term> xs = mergeAdjacentSums(addends(*ea), level);
  std::vector<Term> ys = mergeAdjacentSums(addends(*eb), level);
  if (xs.size() != ys.size() || (xs.size() == 1 && sameTerm(xs[0], a) && sameTerm(ys[0], b)))
    return false;
  std::vector<bool> used(ys.size(), false);
  for (auto &x : xs) {
    bool found = false;
    for (size_t j = 0; j < ys.size() && !found; ++j) {
      if (used[j] || ys[j]->skeleton != x->skeleton || linearBudget_ == 0)
        continue;
      --linearBudget_;
      if (equal(x, ys[j], level))
        used[j] = found = true;
    }
    if (!found)
      return false;
  }
  return true;
}

} // namespace shardproof::relation
