// SizeFacts: symbol lower bounds from the assumptions, and the rewrites they
// justify (see Facts.h).
#include "shardproof/smt/Facts.h"
#include "smt/Poly.h"

#include <unordered_map>
#include <vector>

namespace shardproof::smt {

using namespace detail;

namespace {

// A 0-ary uninterpreted constant (a size symbol), not a numeral.
bool isSymbol(const Expr &e) {
  Z3_ast a = raw(e);
  return isNamedConst(a) && e.isInt();
}

bool isIntComparison(Z3_ast a) {
  switch (kindOf(a)) {
  case Z3_OP_LE: case Z3_OP_LT: case Z3_OP_GE: case Z3_OP_GT: break;
  case Z3_OP_EQ: break;
  default: return false;
  }
  return numArgs(a) == 2 && argOf(a, 0).isInt();
}

// The comparison `d OP 0` rebuilt from its kind.
Expr compareWithZero(Z3_decl_kind op, const Expr &d) {
  Expr z = Expr::intConst(0);
  switch (op) {
  case Z3_OP_LE: return d <= z;
  case Z3_OP_LT: return d < z;
  case Z3_OP_GE: return d >= z;
  case Z3_OP_GT: return d > z;
  default: return d == z;
  }
}

// An interval end; `inf` means unbounded on that side.
struct End {
  bool inf = false;
  int64_t v = 0;
  void add(int64_t x) { inf |= __builtin_add_overflow(v, x, &v); }
};

} // namespace

std::vector<std::pair<Expr, int64_t>> multiplesIn(const Expr &fact) {
  std::vector<std::pair<Expr, int64_t>> out;
  if (!fact.isValid())
    return out;
  Z3_ast a = raw(fact);
  if (kindOf(a) == Z3_OP_AND) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      for (auto &m : multiplesIn(argOf(a, i)))
        out.push_back(m);
    return out;
  }
  if (kindOf(a) != Z3_OP_EQ || numArgs(a) != 2 || !argOf(a, 0).isInt())
    return out;
  for (int side = 0; side < 2; ++side) {
    Expr zero = argOf(a, 1 - side), m = argOf(a, side);
    Z3_ast r = raw(m);
    if (zero.asInt() != 0 || kindOf(r) != Z3_OP_MOD || numArgs(r) != 2)
      continue;
    Expr x = argOf(r, 0);
    auto c = argOf(r, 1).asInt();
    if (isSymbol(x) && c && *c >= 2)
      out.push_back({x, *c});
  }
  return out;
}

void SizeFacts::learn(const Expr &fact) {
  if (!fact.isValid())
    return;
  applied_.clear(); // earlier results may not use this fact
  rewritten_.clear();
  Z3_ast a = raw(fact);
  Z3_decl_kind k = kindOf(a);
  if (k == Z3_OP_AND) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      learn(argOf(a, i));
    return;
  }
  bool negated = false;
  if (k == Z3_OP_NOT) {
    a = raw(argOf(a, 0));
    k = kindOf(a);
    negated = true;
  }
  if (!isIntComparison(a) || (negated && k == Z3_OP_EQ))
    return;
  if (negated) // not(x <= c) is x > c, and so on
    k = k == Z3_OP_LE ? Z3_OP_GT : k == Z3_OP_LT ? Z3_OP_GE : k == Z3_OP_GE ? Z3_OP_LT : Z3_OP_LE;
  // d = lhs - rhs, oriented so that the fact reads d >= 0 (d > 0 if strict).
  Linear d;
  bool flip = k == Z3_OP_LE || k == Z3_OP_LT;
  d.add(argOf(a, 0), flip ? -1 : 1);
  d.add(argOf(a, 1), flip ? 1 : -1);
  if (d.overflow || d.terms.size() != 1)
    return;
  auto &[coef, x] = d.terms.begin()->second;
  if (!isSymbol(x))
    return;
  int64_t bound;
  if (k == Z3_OP_EQ) { // coef*x + c == 0
    if ((coef != 1 && coef != -1) || d.constant == INT64_MIN)
      return;
    bound = coef == 1 ? -d.constant : d.constant;
  } else { // x + c >= 0 (> 0): x >= -c (-c + 1)
    if (coef != 1 || d.constant == INT64_MIN)
      return;
    bound = -d.constant;
    if ((k == Z3_OP_GT || k == Z3_OP_LT) && __builtin_add_overflow(bound, 1, &bound))
      return;
  }
  auto it = lower_.find(x.id());
  if (it == lower_.end())
    lower_.emplace(x.id(), std::make_pair(bound, x));
  else
    it->second.first = std::max(it->second.first, bound);
}

std::optional<int64_t> SizeFacts::lowerBound(const Expr &x) const {
  auto it = lower_.find(x.id());
  if (it == lower_.end())
    return std::nullopt;
  return it->second.first;
}

namespace {

class Rewriter {
public:
  using Done = std::unordered_map<unsigned, std::pair<Expr, Expr>>;
  Rewriter(const SizeFacts &f, Done &done) : facts(f), done(done) {}

  Expr run(const Expr &e) {
    Z3_ast a = raw(e);
    if (!isApp(a) || numArgs(a) == 0)
      return e;
    if (auto it = done.find(e.id()); it != done.end())
      return it->second.second;
    std::vector<Expr> args;
    Expr cur = mapArgs(e, [&](const Expr &x) { return run(x); }, args);
    Z3_ast c = raw(cur);
    Expr out = cur;
    if (isDivMod(kindOf(c)) && numArgs(c) == 2 && !args[1].asInt()) {
      if (auto r = cancelDivisor(args[0], args[1], kindOf(c) == Z3_OP_MOD))
        out = *r;
    } else if (isIntComparison(c)) {
      if (auto r = compare(kindOf(c), args[0], args[1]))
        out = *r;
    }
    done.emplace(e.id(), std::make_pair(e, out));
    return out;
  }

private:
  // Lower bound of a product of atoms, if every atom has a non-negative one.
  std::optional<int64_t> productBound(const Monomial &m) const {
    int64_t lo = 1;
    for (auto &[id, pa] : m.atoms) {
      auto b = facts.lowerBound(pa.second);
      if (!b || *b < 0)
        return std::nullopt;
      for (int p = 0; p < pa.first; ++p)
        if (__builtin_mul_overflow(lo, *b, &lo))
          lo = INT64_MAX; // only used as a lower bound: saturating is safe
    }
    return lo;
  }
  bool positiveAtom(const Expr &x) const {
    auto b = facts.lowerBound(x);
    return b && *b >= 1;
  }

  // (M*A) div|mod (c*M), c > 0 and M a product of atoms known >= 1.
  std::optional<Expr> cancelDivisor(const Expr &num, const Expr &den, bool isMod) {
    Monomial d;
    if (!factorInto(den, d) || d.coef <= 0 || d.atoms.empty())
      return std::nullopt;
    for (auto &[id, pa] : d.atoms)
      if (!positiveAtom(pa.second))
        return std::nullopt;
    Linear l = linearOf(num);
    if (l.overflow || l.constant != 0)
      return std::nullopt;
    Expr rest = Expr::intConst(0);
    for (auto &[id, t] : l.terms) {
      Monomial m;
      m.coef = t.first;
      if (!factorInto(t.second, m))
        return std::nullopt;
      for (auto &[did, pd] : d.atoms) {
        auto it = m.atoms.find(did);
        if (it == m.atoms.end() || it->second.first < pd.first)
          return std::nullopt;
        it->second.first -= pd.first;
      }
      Expr term = Expr::intConst(m.coef);
      for (auto &[aid, pa] : m.atoms)
        for (int p = 0; p < pa.first; ++p)
          term = term * pa.second;
      rest = rest + term;
    }
    Expr c = Expr::intConst(d.coef);
    if (!isMod)
      return d.coef == 1 ? rest : floorDiv(rest, c);
    if (d.coef == 1)
      return Expr::intConst(0);
    Expr factor = Expr::intConst(1);
    for (auto &[did, pd] : d.atoms)
      for (int p = 0; p < pd.first; ++p)
        factor = factor * pd.second;
    return factor * mod(rest, c);
  }

  // lhs OP rhs: decided by intervals, or with a common positive factor cancelled.
  std::optional<Expr> compare(Z3_decl_kind op, const Expr &lhs, const Expr &rhs) {
    Linear d;
    d.add(lhs, 1);
    d.add(rhs, -1);
    if (d.overflow || d.terms.empty())
      return std::nullopt;
    End lo{false, d.constant}, hi{false, d.constant};
    std::vector<Monomial> monos;
    for (auto &[id, t] : d.terms) {
      Monomial m;
      m.coef = 1;
      if (!factorInto(t.second, m))
        return std::nullopt;
      int64_t k;
      if (__builtin_mul_overflow(m.coef, t.first, &k))
        return std::nullopt;
      m.coef = k;
      monos.push_back(m);
      auto b = productBound(m);
      int64_t kb = 0;
      bool big = !b || __builtin_mul_overflow(k, *b, &kb);
      if (k > 0) {
        hi.inf = true;
        big ? void(lo.inf = true) : lo.add(kb);
      } else if (k < 0) {
        lo.inf = true;
        big ? void(hi.inf = true) : hi.add(kb);
      }
    }
    // d in [lo, hi]
    auto decided = [&](bool v) { return std::optional<Expr>(Expr::boolConst(v)); };
    bool pos = !lo.inf && lo.v > 0, neg = !hi.inf && hi.v < 0;
    bool nonneg = !lo.inf && lo.v >= 0, nonpos = !hi.inf && hi.v <= 0;
    switch (op) {
    case Z3_OP_EQ: if (pos || neg) return decided(false); break;
    case Z3_OP_GE: if (nonneg) return decided(true); if (neg) return decided(false); break;
    case Z3_OP_GT: if (pos) return decided(true); if (nonpos) return decided(false); break;
    case Z3_OP_LE: if (nonpos) return decided(true); if (pos) return decided(false); break;
    case Z3_OP_LT: if (neg) return decided(true); if (nonneg) return decided(false); break;
    default: break;
    }
    if (d.constant != 0)
      return std::nullopt;
    // A positive atom every monomial contains: divide it out (at its least power).
    std::map<unsigned, std::pair<int, Expr>> common = monos.front().atoms;
    for (auto it = common.begin(); it != common.end();) {
      int least = it->second.first;
      for (auto &m : monos) {
        auto f = m.atoms.find(it->first);
        least = f == m.atoms.end() ? 0 : std::min(least, f->second.first);
      }
      if (least == 0 || !positiveAtom(it->second.second)) {
        it = common.erase(it);
      } else {
        it->second.first = least;
        ++it;
      }
    }
    if (common.empty())
      return std::nullopt;
    Expr rest = Expr::intConst(0);
    for (auto &m : monos) {
      Expr term = Expr::intConst(m.coef);
      for (auto &[aid, pa] : m.atoms) {
        int p = pa.first;
        if (auto c = common.find(aid); c != common.end())
          p -= c->second.first;
        for (int i = 0; i < p; ++i)
          term = term * pa.second;
      }
      rest = rest + term;
    }
    return compareWithZero(op, rest);
  }

  const SizeFacts &facts;
  Done &done; // id -> (held key, result)
};

} // namespace

Expr SizeFacts::apply(const Expr &e) const {
  if (lower_.empty() || !e.isValid())
    return e;
  static constexpr size_t kMaxApplied = 50'000;
  if (auto it = applied_.find(e.id()); it != applied_.end())
    return it->second.second;
  if (applied_.size() >= kMaxApplied)
    applied_.clear();
  if (rewritten_.size() >= 4 * kMaxApplied)
    rewritten_.clear();
  Expr out = applyUncached(e);
  applied_.emplace(e.id(), std::make_pair(e, out));
  return out;
}

Expr SizeFacts::applyUncached(const Expr &e) const {
  Expr cur = e;
  for (int round = 0; round < 4; ++round) {
    Rewriter rw(*this, rewritten_);
    Expr next = rw.run(cur);
    if (!next.isValid())
      return e;
    if (next.same(cur))
      break;
    cur = next.simplify();
    if (!cur.isValid())
      return e;
  }
  return cur;
}

} // namespace shardproof::smt
