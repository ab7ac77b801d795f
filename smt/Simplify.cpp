// Index arithmetic rules Z3's simplifier does not apply: the div/mod identities
// that reshapes (split a dim into heads, merge them back) produce. All hold for
// floor division by a positive constant c, which is what our builders make:
//   c*(x div c) + (x mod c)      -> x
//   (c*q + r) div c              -> q + (r div c)
//   (c*q + r) mod c              -> r mod c
//   (x div c) >= m               -> x >= c*m        (likewise <, <=, >, ==)
// Each rule is applied bottom-up once, then Z3 simplifies the result again.
#include "smt/Context.h"
#include "shardproof/smt/Expr.h"
#include "smt/Poly.h"

#include <unordered_map>

#include <functional>
#include <map>

namespace shardproof::smt {

using detail::ctx;
using namespace detail;

namespace {

/// `x div c` or `x mod c` with a numeral c > 0: {x, c}.
std::optional<std::pair<Expr, int64_t>> byConstant(const Expr &e, Z3_decl_kind want) {
  Z3_decl_kind k = kindOf(raw(e));
  bool match = want == Z3_OP_MOD ? k == Z3_OP_MOD : (k == Z3_OP_DIV || k == Z3_OP_IDIV);
  if (!match || numArgs(raw(e)) != 2)
    return std::nullopt;
  auto c = argOf(raw(e), 1).asInt();
  if (!c || *c <= 0)
    return std::nullopt;
  return std::make_pair(argOf(raw(e), 0), *c);
}

// (c*q + r) div|mod c -> q + (r div c) | (r mod c).
Expr splitMultiples(const Expr &x, int64_t c, bool isMod, const Expr &orig) {
  Linear l = linearOf(x), q, r;
  q.constant = l.constant / c;
  r.constant = l.constant % c;
  if (r.constant < 0) { // keep r's constant in [0, c): floor semantics
    r.constant += c;
    q.constant -= 1;
  }
  bool moved = q.constant != 0;
  for (auto &[id, t] : l.terms) {
    if (t.first % c == 0 && t.first != 0) {
      q.terms[id] = {t.first / c, t.second};
      moved = true;
    } else {
      r.terms[id] = t;
    }
  }
  if (!moved)
    return orig;
  Expr rest = r.build();
  if (isMod)
    return mod(rest, Expr::intConst(c));
  return q.build() + floorDiv(rest, Expr::intConst(c));
}

// a*c*(x div c) + a*(x mod c) -> a*x within one sum.
Expr mergeDivMod(const Expr &sum) {
  Linear l = linearOf(sum);
  bool changed = false;
  for (auto it = l.terms.begin(); it != l.terms.end(); ++it) {
    auto d = byConstant(it->second.second, Z3_OP_DIV);
    if (!d || it->second.first == 0)
      continue;
    for (auto jt = l.terms.begin(); jt != l.terms.end(); ++jt) {
      auto m = byConstant(jt->second.second, Z3_OP_MOD);
      if (!m || m->second != d->second || !m->first.same(d->first) || jt->second.first == 0)
        continue;
      // a*c*(x//c) + a*(x%c) needs the product a*c; one that overflows cannot match.
      int64_t scaled;
      if (__builtin_mul_overflow(d->second, jt->second.first, &scaled) || it->second.first != scaled)
        continue;
      int64_t a = jt->second.first;
      it->second.first = 0;
      jt->second.first = 0;
      Linear x = linearOf(d->first);
      l.addProduct(l.constant, a, x.constant);
      for (auto &[id, t] : x.terms) {
        auto &slot = l.terms[id];
        if (!slot.second.isValid())
          slot.second = t.second;
        l.addProduct(slot.first, a, t.first);
      }
      if (l.overflow)
        return sum;
      changed = true;
      break;
    }
    if (changed)
      break; // iterators into l.terms may be stale; the caller iterates
  }
  return changed ? l.build() : sum;
}

// lhs OP rhs where lhs - rhs = s*(x div c) + rest, s = +-1: compare x instead.
Expr compareDiv(Z3_decl_kind op, const Expr &lhs, const Expr &rhs, const Expr &orig) {
  Linear l = linearOf(lhs - rhs);
  for (auto &[id, t] : l.terms) {
    auto d = byConstant(t.second, Z3_OP_DIV);
    if (!d || (t.first != 1 && t.first != -1))
      continue;
    int64_t s = t.first;
    Linear rest = l;
    rest.terms.erase(id);
    // s*D + rest OP 0  <=>  D OP' m with m = -s*rest (OP flipped when s = -1).
    Expr m = (rest.build() * (-s));
    Expr x = d->first, c = Expr::intConst(d->second);
    Z3_decl_kind o = op;
    if (s == -1)
      o = op == Z3_OP_LE ? Z3_OP_GE : op == Z3_OP_LT ? Z3_OP_GT : op == Z3_OP_GE ? Z3_OP_LE
        : op == Z3_OP_GT ? Z3_OP_LT : op;
    switch (o) {
    case Z3_OP_GE: return x >= c * m;
    case Z3_OP_GT: return x >= c * (m + 1);
    case Z3_OP_LT: return x < c * m;
    case Z3_OP_LE: return x < c * (m + 1);
    case Z3_OP_EQ: return c * m <= x && x < c * (m + 1);
    default: return orig;
    }
  }
  return orig;
}

// (sum of monomials) div|mod (monomial) when every monomial is a multiple of
// the divisor: [b, s, 32] flattened and split by b*s has 32 columns, not
// (b*s*32) div (b*s). Exact polynomial division: a = b*q, so a div b = q and
// a mod b = 0 wherever b != 0 (a size product; a zero divisor is the
// reshape's own obligation).
std::optional<Expr> divideMonomialsImpl(const Expr &a, const Expr &b, bool isMod) {
  Monomial d;
  if (!factorInto(b, d) || d.atoms.empty() || d.coef == 0)
    return std::nullopt;
  Linear l = linearOf(a);
  if (l.constant != 0 || l.terms.empty())
    return std::nullopt;
  Expr q = Expr::intConst(0);
  for (auto &[id, t] : l.terms) {
    Monomial m;
    m.coef = t.first;
    if (!factorInto(t.second, m) || m.coef % d.coef != 0)
      return std::nullopt;
    Expr term = Expr::intConst(m.coef / d.coef);
    for (auto &[aid, pa] : m.atoms) {
      int power = pa.first;
      if (auto it = d.atoms.find(aid); it != d.atoms.end())
        power -= it->second.first;
      if (power < 0)
        return std::nullopt;
      for (int k = 0; k < power; ++k)
        term = term * pa.second;
    }
    for (auto &[did, pd] : d.atoms)
      if (!m.atoms.count(did))
        return std::nullopt;
    q = q + term;
  }
  return isMod ? Expr::intConst(0) : q;
}

Expr rewrite(const Expr &e) {
  Z3_ast a = raw(e);
  if (!isApp(a) || !hasDivMod(a))
    return e;
  unsigned n = numArgs(a);
  std::vector<Expr> args;
  Expr cur = mapArgs(e, rewrite, args);
  Z3_decl_kind k = kindOf(raw(cur));
  if (auto d = byConstant(cur, Z3_OP_DIV))
    return splitMultiples(d->first, d->second, false, cur);
  if (auto m = byConstant(cur, Z3_OP_MOD))
    return splitMultiples(m->first, m->second, true, cur);
  if (isDivMod(k) && n == 2 && !args[1].asInt())
    if (auto q = divideMonomialsImpl(args[0], args[1], k == Z3_OP_MOD))
      return *q;
  if (k == Z3_OP_ADD) {
    for (int guard = 0; guard < 8; ++guard) {
      Expr next = mergeDivMod(cur);
      if (next.same(cur))
        break;
      cur = next;
    }
    return cur;
  }
  if ((k == Z3_OP_LE || k == Z3_OP_LT || k == Z3_OP_GE || k == Z3_OP_GT || k == Z3_OP_EQ) && n == 2 &&
      args[0].isInt())
    return compareDiv(k, args[0], args[1], cur);
  return cur;
}

int64_t gcd(int64_t a, int64_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int64_t floorDivI(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// g*E + c OP 0 with g the gcd of every coefficient: compare E with the
// constant rounded the right way (4*h - 6 < 0 is h < 2), so a head index scaled
// by the head size becomes a plain bound on the head.
Expr reduceByGcd(const Expr &e) {
  Z3_ast a = raw(e);
  Z3_decl_kind k = kindOf(a);
  if (k == Z3_OP_AND || k == Z3_OP_OR || k == Z3_OP_NOT) {
    std::vector<Expr> args;
    return mapArgs(e, reduceByGcd, args);
  }
  if (!(k == Z3_OP_LE || k == Z3_OP_LT || k == Z3_OP_GE || k == Z3_OP_GT || k == Z3_OP_EQ) || numArgs(a) != 2 ||
      !argOf(a, 0).isInt())
    return e;
  Linear l = linearOf(argOf(a, 0) - argOf(a, 1));
  int64_t g = 0;
  for (auto &[id, t] : l.terms)
    g = gcd(g, t.first);
  if (g <= 1)
    return e;
  for (auto &[id, t] : l.terms)
    t.first /= g;
  int64_t c = l.constant;
  l.constant = 0;
  Expr E = l.build(), zero = Expr::intConst(0);
  switch (k) {
  case Z3_OP_LT: return E + floorDivI(c, g) < zero;      // g*E < -c
  case Z3_OP_GE: return E + floorDivI(c, g) >= zero;
  case Z3_OP_LE: return E - floorDivI(-c, g) <= zero;    // g*E <= -c
  case Z3_OP_GT: return E - floorDivI(-c, g) > zero;
  case Z3_OP_EQ: return c % g != 0 ? Expr::boolConst(false) : E + c / g == zero;
  default: return e;
  }
}

} // namespace

// simplify() is a pure function of the (hash-consed) AST and the prover asks
// for the same conditions again and again (every layer, every rank piece):
// results are memoized. The key Expr holds its AST alive, so its id cannot be
// recycled for a different expression while the entry exists.
namespace {
struct SimplifyMemo {
  std::unordered_map<unsigned, std::pair<Expr, Expr>> map;
};
SimplifyMemo &simplifyMemo() {
  static SimplifyMemo *m = new SimplifyMemo; // never destroyed: outlives every Expr
  return *m;
}
} // namespace

void releaseCaches() {
  simplifyMemo().map.clear();
  detail::clearNodeCache();
}

Expr Expr::simplify() const {
  if (!ast_)
    return *this;
  auto &memo = simplifyMemo().map;
  if (auto it = memo.find(id()); it != memo.end() && it->second.first.same(*this))
    return it->second.second;
  Expr s = simplifyUncached();
  if (!s.isValid())
    return s; // out of memory under --solver-memory: not an answer to keep
  if (memo.size() >= (1u << 21)) // a bound on the ASTs it keeps alive
    memo.clear();
  memo[id()] = {*this, s};
  return s;
}

Expr Expr::simplifyUncached() const {
  // Exact divisions first: Z3 guards (b*q) div b with b == 0 into an ite.
  Expr s = fromRaw(Z3_simplify(ctx(), hasDivMod(ast_) ? raw(rewrite(*this)) : ast_));
  for (int round = 0; round < 4 && hasDivMod(raw(s)); ++round) {
    Expr r = rewrite(s);
    if (r.same(s))
      break;
    s = fromRaw(Z3_simplify(ctx(), raw(r)));
  }
  if (s.isBool()) {
    Expr r = reduceByGcd(s);
    if (!r.same(s))
      s = fromRaw(Z3_simplify(ctx(), raw(r)));
  }
  return s;
}

std::pair<Expr, Expr> divModLinear(const Expr &e, int64_t c) {
  Linear l = linearOf(e.simplify()), q, r;
  q.constant = l.constant / c;
  r.constant = l.constant % c;
  if (r.constant < 0) {
    r.constant += c;
    q.constant -= 1;
  }
  for (auto &[id, t] : l.terms)
    (t.first % c == 0 ? q.terms[id] = {t.first / c, t.second} : r.terms[id] = t);
  return {q.build().simplify(), r.build().simplify()};
}

Expr dropModuli(const Expr &e, const std::function<bool(const Expr &, int64_t)> &inRange) {
  if (!e.isValid())
    return e;
  Z3_ast a = raw(e);
  if (!isApp(a) || !hasDivMod(a))
    return e;
  std::vector<Expr> args;
  Expr cur = mapArgs(e, [&](const Expr &x) { return dropModuli(x, inRange); }, args);
  Z3_decl_kind k = kindOf(raw(cur));
  if (isDivMod(k) && args.size() == 2)
    if (auto c = args[1].asInt(); c && *c > 0 && inRange(args[0], *c))
      return k == Z3_OP_MOD ? args[0] : Expr::intConst(0);
  return cur;
}

std::optional<Expr> dividePolynomial(const Expr &a, const Expr &b, bool isMod) {
  if (!a.isValid() || !b.isValid() || b.asInt())
    return std::nullopt;
  return divideMonomialsImpl(a, b, isMod);
}

std::optional<Expr> divideExact(const Expr &e, int64_t c) {
  if (c == 0 || !e.isValid())
    return std::nullopt;
  Linear l = linearOf(e.simplify());
  if (l.constant % c != 0)
    return std::nullopt;
  l.constant /= c;
  for (auto &[id, t] : l.terms) {
    if (t.first % c != 0)
      return std::nullopt;
    t.first /= c;
  }
  return l.build().simplify();
}

} // namespace shardproof::smt
