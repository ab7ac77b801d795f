// IntervalProver: goals proven by the atoms' constant ranges (see Intervals.h).
#include "smt/Intervals.h"
#include "smt/Poly.h"

#include <algorithm>
#include <functional>
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
// Case splits per formula: a token id's bound splits an ite of a negated
// conjunction (3 leaves); past these the solver is cheaper.
constexpr unsigned kMaxDepth = 4, kMaxLeaves = 8;

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

void IntervalProver::collect(const Expr &fact, Parsed &out) {
  Z3_ast a = raw(fact);
  Z3_decl_kind k = kindOf(a);
  if (k == Z3_OP_AND) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      collect(argOf(a, i), out);
    return;
  }
  bool negated = k == Z3_OP_NOT;
  if (negated) {
    Expr x = argOf(a, 0);
    Z3_decl_kind kx = kindOf(raw(x));
    if (kx == Z3_OP_NOT)
      return collect(argOf(raw(x), 0), out); // not not x is x
    if (kx == Z3_OP_AND) {
      out.negatedConjunctions.push_back(fact); // a disjunction: no single fact, but cases
      return;
    }
  }
  Expr cmp = negated ? argOf(a, 0) : fact;
  std::vector<std::vector<Ineq>> alts;
  if (!comparison(cmp, negated, alts) || alts.size() != 1)
    return; // a disequality is two alternatives: no single fact
  for (Ineq &e : alts.front())
    out.ineqs.push_back(std::move(e));
}

bool IntervalProver::collectAll(const Expr &e, std::vector<Ineq> &out) {
  Z3_ast a = raw(e);
  if (kindOf(a) == Z3_OP_AND) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      if (!collectAll(argOf(a, i), out))
        return false;
    return true;
  }
  bool negated = kindOf(a) == Z3_OP_NOT;
  std::vector<std::vector<Ineq>> alts;
  if (!comparison(negated ? argOf(a, 0) : e, negated, alts) || alts.size() != 1)
    return false;
  for (Ineq &x : alts.front())
    out.push_back(std::move(x));
  return true;
}

const IntervalProver::Parsed &IntervalProver::factsOf(const Expr &fact) {
  auto [it, fresh] = parsed_.try_emplace(fact.id());
  if (fresh) {
    it->second.keep = fact;
    collect(fact, it->second);
  }
  return it->second;
}

std::vector<std::vector<IntervalProver::Ineq>> IntervalProver::goalOf(const Expr &goal) {
  std::vector<std::vector<Ineq>> alts;
  Z3_ast a = raw(goal);
  if (kindOf(a) == Z3_OP_AND) { // every conjunct, or nothing
    std::vector<Ineq> all;
    if (collectAll(goal, all))
      alts.push_back(std::move(all));
    return alts;
  }
  bool negated = kindOf(a) == Z3_OP_NOT;
  comparison(negated ? argOf(a, 0) : goal, negated, alts);
  return alts;
}

// Each `not guard or range` of the set-aside facts at the formula's points.
// A part of another shape, or a guard not read whole, is left out (fewer
// facts: never a wrong proof).
std::vector<IntervalProver::Instance> IntervalProver::instancesOf(const Expr &pointFacts) {
  std::vector<Instance> out;
  for (const Expr &part : pointFacts.conjuncts()) {
    Z3_ast a = raw(part);
    if (kindOf(a) != Z3_OP_OR || numArgs(a) != 2)
      continue;
    Expr notGuard = argOf(a, 0), range = argOf(a, 1);
    Instance in;
    if (kindOf(raw(notGuard)) != Z3_OP_NOT || !collectAll(argOf(raw(notGuard), 0), in.guard))
      continue;
    Parsed r;
    collect(range, r);
    in.range = std::move(r.ineqs);
    if (!in.range.empty())
      out.push_back(std::move(in));
  }
  return out;
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

// Z3's div is Euclid's, floor division for a positive divisor.
static I128 floorDivWide(I128 v, I128 q) { return v >= 0 ? v / q : -((-v + q - 1) / q); }

std::optional<IntervalProver::Quotient> IntervalProver::quotientOf(Z3_ast a, Box &box,
                                                                   const std::function<void(unsigned)> &sizeMinimum) {
  Z3_decl_kind k = kindOf(a);
  if ((k != Z3_OP_IDIV && k != Z3_OP_DIV && k != Z3_OP_MOD) || numArgs(a) != 2 || !argOf(a, 0).isInt())
    return std::nullopt;
  auto c = argOf(a, 1).asInt();
  if (!c || *c <= 0)
    return std::nullopt;
  Linear d;
  d.add(argOf(a, 0), 1);
  if (d.overflow || d.constant == kMin)
    return std::nullopt;
  Ineq x, negX; // the dividend, and its negation (whose lower end is -x's upper)
  x.constant = d.constant;
  negX.constant = -d.constant;
  for (auto &[id, term] : d.terms) {
    if (term.first == 0)
      continue;
    if (term.first == kMin)
      return std::nullopt;
    x.terms.push_back({id, term.first});
    negX.terms.push_back({id, -term.first});
    atoms_.try_emplace(id, term.second);
    sizeMinimum(id); // `seq div 8` with nothing but seq >= 1 known
  }
  Quotient q{k == Z3_OP_MOD, *c, box.lower(x), std::nullopt};
  if (auto negHi = box.lower(negX))
    q.hi = -*negHi;
  return q;
}

void IntervalProver::narrowQuotient(unsigned atom, Box &box, const std::function<void(unsigned)> &sizeMinimum) {
  auto it = atoms_.find(atom);
  if (it == atoms_.end())
    return;
  if (auto q = quotientOf(raw(it->second), box, sizeMinimum))
    narrowTo(atom, *q, box);
}

void IntervalProver::narrowTo(unsigned atom, const Quotient &q, Box &box) {
  std::optional<int64_t> from, to;
  if (q.mod) { // in [0, c-1]; x less its block's start when x's range lies in one block
    from = 0, to = q.c - 1;
    if (auto block = q.block()) {
      I128 base = *block * q.c;
      from = static_cast<int64_t>(*q.lo - base), to = static_cast<int64_t>(*q.hi - base);
    }
  } else {
    if (q.lo && fits(floorDivWide(*q.lo, q.c)))
      from = static_cast<int64_t>(floorDivWide(*q.lo, q.c));
    if (q.hi && fits(floorDivWide(*q.hi, q.c)))
      to = static_cast<int64_t>(floorDivWide(*q.hi, q.c));
  }
  auto &r = box.range[atom];
  if (from)
    r.first = r.first ? std::max(*r.first, *from) : *from;
  if (to)
    r.second = r.second ? std::min(*r.second, *to) : *to;
}

std::optional<I128> IntervalProver::Quotient::block() const {
  if (!lo || !hi || floorDivWide(*lo, c) != floorDivWide(*hi, c) || !fits(floorDivWide(*lo, c) * c))
    return std::nullopt;
  return floorDivWide(*lo, c);
}

// (c*X + r) div (c*b) = X div b and (c*X + r) mod (c*b) = c*(X mod b) + r,
// for a constant c > 0, b >= 1 and r in [0, c) on the box: c*X + r is
// c*b*(X div b) + c*(X mod b) + r, and the last two lie in [0, c*b). A
// flattened [b, s, h] index divided by its rows of h*b is one.
std::optional<Expr> IntervalProver::scaledQuotient(Z3_ast a, Box &box,
                                                   const std::function<void(unsigned)> &sizeMinimum) {
  Z3_decl_kind k = kindOf(a);
  if ((k != Z3_OP_IDIV && k != Z3_OP_MOD) || numArgs(a) != 2 || !argOf(a, 0).isInt())
    return std::nullopt;
  Linear divisor, dividend;
  divisor.add(argOf(a, 1), 1);
  if (divisor.overflow || divisor.constant != 0 || divisor.terms.size() != 1)
    return std::nullopt; // a constant divisor is quotientOf's
  dividend.add(argOf(a, 0), 1);
  if (dividend.overflow)
    return std::nullopt;
  auto &[bId, bTerm] = *divisor.terms.begin();
  int64_t c = bTerm.first;
  atoms_.try_emplace(bId, bTerm.second);
  sizeMinimum(bId);
  auto bRange = box.range.find(bId);
  if (c <= 1 || bRange == box.range.end() || !bRange->second.first || *bRange->second.first < 1)
    return std::nullopt;
  Expr x = Expr::intConst(0), r = Expr::intConst(dividend.constant);
  Ineq rest;
  rest.constant = dividend.constant;
  for (auto &[id, term] : dividend.terms) {
    if (term.first % c == 0) {
      x = x + Expr::intConst(term.first / c) * term.second;
      continue;
    }
    r = r + Expr::intConst(term.first) * term.second;
    rest.terms.push_back({id, term.first});
    atoms_.try_emplace(id, term.second);
    sizeMinimum(id);
  }
  Ineq below = rest; // c - 1 - r >= 0
  for (auto &t : below.terms)
    t.second = -t.second;
  below.constant = c - 1 - rest.constant;
  auto lo = box.lower(rest), hi = box.lower(below);
  if (!lo || *lo < 0 || !hi || *hi < 0)
    return std::nullopt;
  Expr b = bTerm.second;
  return k == Z3_OP_IDIV ? smt::floorDiv(x, b) : Expr::intConst(c) * smt::mod(x, b) + r;
}

Expr IntervalProver::foldQuotients(const Expr &goal, Box &box, const std::function<void(unsigned)> &sizeMinimum) {
  std::vector<Expr> from, to;
  std::unordered_map<unsigned, bool> seen;
  std::function<void(Z3_ast)> walk = [&](Z3_ast a) {
    if (!isApp(a) || !seen.emplace(astId(a), true).second)
      return;
    for (unsigned i = 0; i < numArgs(a); ++i)
      walk(argAt(a, i));
    if (auto scaled = scaledQuotient(a, box, sizeMinimum)) {
      from.push_back(fromRaw(a));
      to.push_back(*scaled);
      return;
    }
    auto q = quotientOf(a, box, sizeMinimum);
    if (!q)
      return;
    // Its range, for the quotients that read it: `(i div 12) mod 4`.
    atoms_.try_emplace(astId(a), fromRaw(a));
    narrowTo(astId(a), *q, box);
    if (auto block = q->block()) {
      from.push_back(fromRaw(a));
      to.push_back(q->mod ? argOf(a, 0) - Expr::intConst(static_cast<int64_t>(*block * q->c))
                          : Expr::intConst(static_cast<int64_t>(*block)));
    }
  };
  walk(raw(goal));
  return from.empty() ? goal : goal.substitute(from, to).simplify();
}

// `not x`, kept as it is (Expr's ! folds a double negation): a literal whose
// negation, read as a fact, is x.
static Expr asFact(const Expr &x) { return fromRaw(Z3_mk_not(ctx(), raw(x))); }
static Expr orRaw(const Expr &a, const Expr &b) {
  Z3_ast args[2] = {raw(a), raw(b)};
  return fromRaw(Z3_mk_or(ctx(), 2, args));
}

bool IntervalProver::decide(const Expr &formula, const SizeFacts &sizes, const std::vector<Instance> &points,
                            std::vector<Expr> &split, bool thorough) {
  // The facts (negations of the disjuncts) and the goals (the disjuncts).
  std::vector<const Ineq *> facts;
  std::vector<Expr> goals;
  bool trivially = false;
  std::function<void(const Expr &)> literal = [&](const Expr &lit) {
    Z3_ast l = raw(lit);
    Z3_decl_kind k = kindOf(l);
    if (k == Z3_OP_OR) { // a case adds its literal in front
      for (unsigned i = 0; i < numArgs(l); ++i)
        literal(argOf(l, i));
      return;
    }
    if (auto b = lit.asBool()) {
      trivially |= *b;
      return;
    }
    if (k == Z3_OP_NOT) {
      const Parsed &p = factsOf(argOf(l, 0));
      for (const Ineq &e : p.ineqs)
        facts.push_back(&e);
      split.insert(split.end(), p.negatedConjunctions.begin(), p.negatedConjunctions.end());
      Z3_decl_kind kx = kindOf(raw(argOf(l, 0)));
      if (kx == Z3_OP_AND || kx == Z3_OP_NOT)
        return;
    }
    goals.push_back(lit);
  };
  literal(formula);
  if (trivially)
    return true;
  std::vector<std::vector<std::vector<Ineq>>> goalAlts;
  for (const Expr &g : goals)
    goalAlts.push_back(goalOf(g));
  // The box: each atom's range from the single-atom facts and the size
  // minimums.
  Box box;
  auto narrow = [&](const Ineq &f) {
    if (f.terms.size() != 1 || f.constant == kMin)
      return;
    auto [atom, c] = f.terms.front();
    auto &r = box.range[atom];
    if (c > 0) { // c*x + k >= 0: x >= ceil(-k / c)
      int64_t lo = ceilDivInt(-f.constant, c);
      r.first = r.first ? std::max(*r.first, lo) : lo;
    } else { // -|c|*x + k >= 0: x <= floor(k / |c|)
      int64_t hi = floorDivInt(f.constant, -c);
      r.second = r.second ? std::min(*r.second, hi) : hi;
    }
  };
  for (const Ineq *f : facts) {
    if (f->terms.empty()) {
      if (f->constant < 0)
        return true; // a false fact: the implication holds
      continue;
    }
    narrow(*f);
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
  // Every atom the goals and facts read (the facts as they stand when asked).
  auto eachAtom = [&](const std::function<void(unsigned)> &fn) {
    for (auto &alts : goalAlts)
      for (auto &alt : alts)
        for (const Ineq &e : alt)
          for (auto &t : e.terms)
            fn(t.first);
    for (const Ineq *f : facts)
      for (auto &t : f->terms)
        fn(t.first);
  };
  eachAtom(sizeMinimum);
  // A set-aside range holds at a point whose guard the path proves.
  for (const Instance &in : points)
    if (std::all_of(in.guard.begin(), in.guard.end(), [&](const Ineq &g) { return provesOne(g, facts, box); }))
      for (const Ineq &r : in.range) {
        facts.push_back(&r);
        narrow(r);
      }
  // An integer division or remainder by a positive constant whose dividend
  // the box bounds: a split axis's head index, `i div 16` with 16 <= i < 32,
  // is 1 (those goals went to Z3 at a millisecond each).
  eachAtom([&](unsigned atom) { narrowQuotient(atom, box, sizeMinimum); });
  // A goal whose divisions the box fixes, read with their values: `(k + i div
  // 48) mod b == (k + i div 24) mod b` for 0 <= i < 24 (Z3 4.8 took 2 to 10 s).
  for (const Expr &g : goals) {
    Expr folded = foldQuotients(g, box, sizeMinimum);
    if (folded.same(g))
      continue;
    if (auto b = folded.asBool(); b && *b)
      return true;
  }
  // Facts no point meets: an atom's range is empty, or a fact is negative on
  // the whole box.
  for (auto &[atom, r] : box.range)
    if (r.first && r.second && *r.first > *r.second)
      return true;
  for (const Ineq *f : facts) {
    Ineq neg = *f; // f < 0 everywhere: -f - 1 >= 0
    bool ok = neg.constant != kMin && neg.constant != kMax;
    for (auto &t : neg.terms) {
      ok &= t.second != kMin;
      t.second = -t.second;
    }
    if (!ok)
      continue;
    neg.constant = -neg.constant - 1;
    if (auto lo = box.lower(neg); lo && *lo >= 0)
      return true;
    if (thorough) // by a multiple of another fact: i < n and n <= i
      if (provesOne(neg, facts, box))
        return true;
  }
  for (auto &alts : goalAlts)
    for (auto &alt : alts)
      if (std::all_of(alt.begin(), alt.end(), [&](const Ineq &e) { return provesOne(e, facts, box); }))
        return true;
  return false;
}

// Cases that cover every point, each read by decide: an integer `ite` (its
// condition, or its negation, becomes a fact and the ite its branch), or a
// negated conjunction among the facts (one case per conjunct it denies; in
// each the negation is true). Valid in every case is valid.
bool IntervalProver::byCases(const Expr &formula, const SizeFacts &sizes, const std::vector<Instance> &points,
                             unsigned depth, unsigned &leaves) {
  std::vector<Expr> split;
  if (decide(formula, sizes, points, split, true))
    return true;
  if (depth >= kMaxDepth)
    return false;
  if (auto t = formula.findIntIte()) {
    auto [c, x, y] = *t->asIte();
    if (leaves < 1)
      return false;
    --leaves; // one leaf becomes two
    return byCases(orRaw(asFact(c), formula.substitute({*t}, {x})), sizes, points, depth + 1, leaves) &&
           byCases(orRaw(asFact(!c), formula.substitute({*t}, {y})), sizes, points, depth + 1, leaves);
  }
  if (split.empty())
    return false;
  const Expr &d = split.front();
  std::vector<Expr> denied = d.asNot()->conjuncts();
  if (leaves + 1 < denied.size())
    return false;
  leaves -= static_cast<unsigned>(denied.size()) - 1;
  Expr rest = formula.substitute({d}, {Expr::boolConst(true)});
  for (const Expr &a : denied)
    if (!byCases(orRaw(asFact(!a), rest), sizes, points, depth + 1, leaves))
      return false;
  return true;
}

bool IntervalProver::start(const Expr &formula) {
  if (!formula.isValid())
    return false;
  if (parsed_.size() > 100'000) { // before any pointer into it is taken
    parsed_.clear();
    atoms_.clear();
  }
  return true;
}

bool IntervalProver::proves(const Expr &formula, const SizeFacts &sizes) {
  if (!start(formula))
    return false;
  std::vector<Expr> split;
  return decide(formula, sizes, {}, split);
}

bool IntervalProver::provesByCases(const Expr &formula, const SizeFacts &sizes,
                                   const std::function<Expr()> &pointFacts) {
  if (!start(formula))
    return false;
  std::vector<Instance> points = instancesOf(pointFacts());
  unsigned leaves = kMaxLeaves;
  return byCases(formula, sizes, points, 0, leaves);
}

} // namespace shardproof::smt::detail
