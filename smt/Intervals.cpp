// IntervalProver: goals proven by the atoms' constant ranges (see Intervals.h).
#include "smt/Intervals.h"
#include "smt/Poly.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

namespace shardproof::smt::detail {

namespace {

using I128 = __int128;
constexpr I128 kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();

constexpr I128 kBig = I128{1} << 100;
constexpr int64_t kSmall = int64_t{1} << 40;

bool fits(I128 v) { return v >= kMin && v <= kMax; }


bool isComparison(Z3_decl_kind k) {
  return k == Z3_OP_LE || k == Z3_OP_LT || k == Z3_OP_GE || k == Z3_OP_GT || k == Z3_OP_EQ;
}

} // namespace

struct IntervalProver::Box {
  // Unset ends are unbounded.
  std::map<unsigned, std::pair<std::optional<int64_t>, std::optional<int64_t>>> range;

  // Lower bound of `e` over the box, if every atom it needs is bounded that
  // way.
  std::optional<I128> lower(const Ineq &e) const {
    I128 s = e.constant;
    for (auto &[atom, coef] : e.terms) {
      auto it = range.find(atom);
      if (it == range.end())
        return std::nullopt;
      const std::optional<int64_t> &end = coef > 0 ? it->second.first : it->second.second;
      if (!end)
        return std::nullopt;
      I128 term = static_cast<I128>(coef) * *end;
      if (term > kBig || term < -kBig)
        return std::nullopt; // far past any index bound: the sum could wrap
      s += term;
    }
    return s;
  }
};

bool IntervalProver::comparison(const Expr &cmp, bool negated, std::vector<std::vector<Ineq>> &alternatives) {
  Z3_ast a = raw(cmp);
  Z3_decl_kind k = kindOf(a);
  if (!isComparison(k) || numArgs(a) != 2 || !argOf(a, 0).isInt())
    return false;
  Linear d; // lhs - rhs
  d.add(argOf(a, 0), 1);
  d.add(argOf(a, 1), -1);
  if (d.overflow || d.constant == kMin)
    return false;
  Ineq ge; // lhs - rhs >= 0
  for (auto &[id, term] : d.terms) {
    if (term.first == 0)
      continue;
    if (term.first == kMin)
      return false;
    ge.terms.push_back({id, term.first});
    atoms_.try_emplace(id, term.second);
  }
  ge.constant = d.constant;
  Ineq le = ge; // rhs - lhs >= 0
  for (auto &t : le.terms)
    t.second = -t.second;
  le.constant = -le.constant;
  auto strict = [](Ineq e) { // e > 0 over the integers: e - 1 >= 0
    if (e.constant == kMin)
      return std::optional<Ineq>();
    --e.constant;
    return std::optional<Ineq>(std::move(e));
  };
  if (negated) // not (x <= y) is x > y, and so on
    k = k == Z3_OP_LE ? Z3_OP_GT : k == Z3_OP_LT ? Z3_OP_GE : k == Z3_OP_GE ? Z3_OP_LT : k == Z3_OP_GT ? Z3_OP_LE : k;
  std::optional<Ineq> one;
  switch (k) {
  case Z3_OP_GE: one = ge; break;
  case Z3_OP_LE: one = le; break;
  case Z3_OP_GT: one = strict(ge); break;
  case Z3_OP_LT: one = strict(le); break;
  default: // EQ
    if (!negated) {
      alternatives.push_back({ge, le});
      return true;
    }
    for (auto *side : {&ge, &le}) // x != y: x > y or x < y
      if (auto s = strict(*side))
        alternatives.push_back({*s});
    return true;
  }
  if (!one)
    return false;
  alternatives.push_back({std::move(*one)});
  return true;
}

void IntervalProver::collect(const Expr &fact, std::vector<Ineq> &out) {
  Z3_ast a = raw(fact);
  Z3_decl_kind k = kindOf(a);
  if (k == Z3_OP_AND) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      collect(argOf(a, i), out);
    return;
  }
  bool negated = k == Z3_OP_NOT;
  Expr cmp = negated ? argOf(a, 0) : fact;
  std::vector<std::vector<Ineq>> alts;
  if (!comparison(cmp, negated, alts) || alts.size() != 1)
    return; // a disequality is two alternatives: no single fact
  for (Ineq &e : alts.front())
    out.push_back(std::move(e));
}

const std::vector<IntervalProver::Ineq> &IntervalProver::factsOf(const Expr &fact) {
  auto [it, fresh] = parsed_.try_emplace(fact.id());
  if (fresh) {
    it->second.first = fact;
    collect(fact, it->second.second);
  }
  return it->second.second;
}

std::vector<std::vector<IntervalProver::Ineq>> IntervalProver::goalOf(const Expr &goal) {
  std::vector<std::vector<Ineq>> alts;
  Z3_ast a = raw(goal);
  bool negated = kindOf(a) == Z3_OP_NOT;
  comparison(negated ? argOf(a, 0) : goal, negated, alts);
  return alts;
}

bool IntervalProver::provesOne(const Ineq &goal, const std::vector<const Ineq *> &facts, const Box &box) const {
  if (auto lo = box.lower(goal); lo && *lo >= 0)
    return true;
  // goal = (goal - (p/q) fact) + (p/q) fact with fact >= 0: q*goal - p*fact >=
  // 0 on the box proves it (p, q > 0 cancel an atom both share).
  for (const Ineq *f : facts) {
    if (f->terms.size() < 2)
      continue; // single-atom facts are the box already
    for (const auto &term : goal.terms) {
      const unsigned atom = term.first; // a plain name: clang 14 captures no structured binding
      const int64_t g = term.second;
      auto it = std::find_if(f->terms.begin(), f->terms.end(), [&](auto &t) { return t.first == atom; });
      if (it == f->terms.end() || (it->second > 0) != (g > 0))
        continue;
      int64_t ga = g < 0 ? -g : g, fa = it->second < 0 ? -it->second : it->second;
      int64_t gcd = std::gcd(ga, fa), p = ga / gcd, q = fa / gcd;
      // Multipliers and coefficients stay far inside int64, so the products
      // and their sums below cannot wrap an __int128.
      auto small = [](const Ineq &e) {
        return std::all_of(e.terms.begin(), e.terms.end(),
                           [](auto &t) { return t.second > -kSmall && t.second < kSmall; }) &&
               e.constant > -kSmall && e.constant < kSmall;
      };
      if (p >= kSmall || q >= kSmall || !small(goal) || !small(*f))
        break;
      std::map<unsigned, I128> sum;
      for (auto &[x, c] : goal.terms)
        sum[x] += static_cast<I128>(q) * c;
      for (auto &[x, c] : f->terms)
        sum[x] -= static_cast<I128>(p) * c;
      I128 constant = static_cast<I128>(q) * goal.constant - static_cast<I128>(p) * f->constant;
      Ineq h;
      bool ok = fits(constant);
      h.constant = ok ? static_cast<int64_t>(constant) : 0;
      for (auto &[x, c] : sum) {
        ok &= fits(c);
        if (ok && c != 0)
          h.terms.push_back({x, static_cast<int64_t>(c)});
      }
      if (ok)
        if (auto lo = box.lower(h); lo && *lo >= 0)
          return true;
      break; // one multiple per fact: the first atom it shares with the goal
    }
  }
  return false;
}

bool IntervalProver::proves(const Expr &formula, const SizeFacts &sizes) {
  if (!formula.isValid())
    return false;
  if (parsed_.size() > 100'000) { // before any pointer into it is taken
    parsed_.clear();
    atoms_.clear();
  }
  // The facts (negations of the disjuncts) and the goals (the disjuncts).
  std::vector<const Ineq *> facts;
  std::vector<Expr> goals;
  Z3_ast a = raw(formula);
  auto literal = [&](const Expr &lit) {
    Z3_ast l = raw(lit);
    if (kindOf(l) == Z3_OP_NOT) {
      for (const Ineq &e : factsOf(argOf(l, 0)))
        facts.push_back(&e);
      if (kindOf(raw(argOf(l, 0))) == Z3_OP_AND)
        return;
    }
    goals.push_back(lit);
  };
  if (kindOf(a) == Z3_OP_OR)
    for (unsigned i = 0; i < numArgs(a); ++i)
      literal(argOf(a, i));
  else
    literal(formula);
  std::vector<std::vector<std::vector<Ineq>>> goalAlts;
  for (const Expr &g : goals)
    goalAlts.push_back(goalOf(g));
  // The box: each atom's range from the single-atom facts and the size
  // minimums.
  Box box;
  for (const Ineq *f : facts) {
    if (f->terms.empty()) {
      if (f->constant < 0)
        return true; // a false fact: the implication holds
      continue;
    }
    if (f->terms.size() != 1 || f->constant == kMin)
      continue;
    auto [atom, c] = f->terms.front();
    auto &r = box.range[atom];
    if (c > 0) { // c*x + k >= 0: x >= ceil(-k / c)
      int64_t lo = ceilDivInt(-f->constant, c);
      r.first = r.first ? std::max(*r.first, lo) : lo;
    } else { // -|c|*x + k >= 0: x <= floor(k / |c|)
      int64_t hi = floorDivInt(f->constant, -c);
      r.second = r.second ? std::min(*r.second, hi) : hi;
    }
  }
  auto sizeMinimum = [&](unsigned atom) {
    auto it = atoms_.find(atom);
    if (it == atoms_.end())
      return;
    if (auto lo = sizes.lowerBound(it->second)) {
      auto &r = box.range[atom];
      r.first = r.first ? std::max(*r.first, *lo) : *lo;
    }
  };
  for (auto &alts : goalAlts)
    for (auto &alt : alts)
      for (const Ineq &e : alt)
        for (auto &t : e.terms)
          sizeMinimum(t.first);
  for (const Ineq *f : facts)
    for (auto &t : f->terms)
      sizeMinimum(t.first);
  for (auto &alts : goalAlts)
    for (auto &alt : alts)
      if (std::all_of(alt.begin(), alt.end(), [&](const Ineq &e) { return provesOne(e, facts, box); }))
        return true;
  return false;
}

} // namespace shardproof::smt::detail
