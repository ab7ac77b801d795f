// Rotary position embeddings meet in attention scores: sum over d of
// rot(q, a)[d] * rot(k, b)[d], which depends only on a - b. A rank that
// rotates q and k by the same extra angle computes the reference's scores,
// but no class definition shows it: the angles sit inside the ranks' Cos and
// Sin tensors. This match expands the rotary tensors of both sides down to
// their Cos/Sin applications and compares the two in one normal form:
//  - polynomials (Add/Mul distributed, like monomials collected with exact
//    coefficients, or no normal form at all),
//  - reductions over the same range added into one (sum f + sum g =
//    sum (f + g)), a reduction over one element replaced by that element,
//    count(c + r) = c + count(r) where both are >= 0 (a position's value),
//  - angle addition: cos(x + y) = cos x cos y - sin x sin y, sin(x + y) =
//    sin x cos y + cos x sin y, cos(-x) = cos x, sin(-x) = -sin x,
//  - sin(x)^2 = 1 - cos(x)^2.
// Each is an identity over the reals; the normal form is unique modulo
// sin^2 + cos^2 = 1 per angle, so scores that agree by angle addition agree here.
#include "Prover.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

constexpr size_t kMaxMonomials = 4096;

// Coefficient arithmetic that is exact or fails: a rounded coefficient could
// cancel a monomial that does not cancel over the reals.
bool exactAdd(double a, double b, double &s) {
  s = a + b;
  if (!std::isfinite(s))
    return false;
  double bb = s - a;
  return (a - (s - bb)) + (b - bb) == 0;
}
bool exactMul(double a, double b, double &p) {
  p = a * b;
  return std::isfinite(p) && std::fma(a, b, -p) == 0;
}

struct Mono {
  double c;
  std::vector<Term> atoms; // sorted by (skeleton, hash)
};
using Poly = std::vector<Mono>;

bool atomLess(const Term &a, const Term &b) {
  if (a->skeleton != b->skeleton)
    return a->skeleton < b->skeleton;
  return a->hash < b->hash;
}

size_t atomsHash(const std::vector<Term> &atoms) {
  size_t h = atoms.size();
  for (const Term &a : atoms)
    h = h * 1000003u ^ a->hash;
  return h;
}

bool sameAtoms(const std::vector<Term> &a, const std::vector<Term> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!sameTerm(a[i], b[i]))
      return false;
  return true;
}

} // namespace

bool isTrig(const Term &t) { return t->kind == TermKind::Apply && (t->fn == Fn::Cos || t->fn == Fn::Sin); }

// The normal form above, under the prover's path (it decides ranges).
class TrigNormalizer {
public:
  explicit TrigNormalizer(Prover &p) : p_(p) {}
  bool failed = false;

  Term canon(const Term &t) {
    if (t->kind == TermKind::Select) {
      Term a, b;
      {
        Prover::Scope s(p_, t->cond);
        a = canon(t->args[0]);
      }
      {
        Prover::Scope s(p_, !t->cond);
        b = canon(t->args[1]);
      }
      return mkSelect(t->cond, a, b);
    }
    return fromPoly(finish(toPoly(t)));
  }

private:
  Prover &p_;

  Poly toPoly(const Term &t) {
    if (failed)
      return {};
    switch (t->kind) {
    case TermKind::Const:
      return t->value == 0 ? Poly{} : Poly{{t->value, {}}};
    case TermKind::Read:
      return {{1, {t}}};
    case TermKind::Select:
      return {{1, {canon(t)}}};
    case TermKind::Sum:
      return sumPoly(t);
    case TermKind::Apply:
      break;
    }
    switch (t->fn) {
    case Fn::Add: {
      Poly out;
      for (auto &a : t->args) {
        Poly q = toPoly(a);
        out.insert(out.end(), q.begin(), q.end());
      }
      return collect(out);
    }
    case Fn::Mul: {
      Poly out{{1, {}}};
      for (auto &a : t->args)
        out = mul(out, toPoly(a));
      return collect(out);
    }
    case Fn::Cos:
    case Fn::Sin:
      return trig(t->fn, collect(toPoly(t->args[0])));
    default: {
      std::vector<Term> args;
      for (auto &a : t->args)
        args.push_back(canon(a));
      return {{1, {mkApply(t->fn, std::move(args), t->name)}}};
    }
    }
  }

  Poly sumPoly(const Term &t) {
    if (t->red != Fn::Add)
      return {{1, {t}}};
    Expr k = boundVar(t->level);
    const Term &body = t->args[0];
    // A reduction over one element is that element.
    if (p_.implies(t->hi - t->lo == Expr::intConst(1), "trig.single")) {
      Term at = substitute(body, {k}, {t->lo});
      return toPoly(relevel(at, t->level + 1, -1));
    }
    // count(E) = sum over [0, E) of 1 is E when E >= 0: a position. Its
    // constant part c comes out, count(c + r) = c + count(r), when r >= 0 too.
    if (body->kind == TermKind::Const && body->value == 1 && t->lo.asInt() == std::optional<int64_t>(0)) {
      Expr e = t->hi.simplify();
      std::vector<Expr> vars, zeros;
      for (auto &n : e.vars()) {
        vars.push_back(Expr::intVar(n));
        zeros.push_back(Expr::intConst(0));
      }
      auto c = e.substitute(vars, zeros).simplify().asInt();
      if (c && *c != 0 && std::llabs(*c) < (int64_t(1) << 53)) { // exact as a double
        Expr rest = (e - Expr::intConst(*c)).simplify();
        if (p_.implies(e >= Expr::intConst(0), "trig.count") && p_.implies(rest >= Expr::intConst(0), "trig.count")) {
          Poly out{{static_cast<double>(*c), {}}};
          if (!rest.asInt() || *rest.asInt() != 0)
            out.push_back({1, {mkReduceLike(t, t->lo, rest, body)}});
          return collect(out);
        }
      }
      return {{1, {t}}};
    }
    Term b;
    {
      Prover::Scope s(p_, t->lo <= k && k < t->hi);
      b = canon(body);
    }
    return {{1, {mkReduceLike(t, t->lo, t->hi, b)}}};
  }

  Poly mul(const Poly &a, const Poly &b) {
    if (a.size() * b.size() > kMaxMonomials) {
      failed = true;
      return {};
    }
    Poly out;
    for (auto &x : a)
      for (auto &y : b) {
        Mono m;
        if (!exactMul(x.c, y.c, m.c)) {
          failed = true;
          return {};
        }
        m.atoms = x.atoms;
        m.atoms.insert(m.atoms.end(), y.atoms.begin(), y.atoms.end());
        std::sort(m.atoms.begin(), m.atoms.end(), atomLess);
        out.push_back(std::move(m));
      }
    return out;
  }

  Poly scale(Poly a, double c) {
    for (auto &m : a)
      if (!exactMul(m.c, c, m.c))
        failed = true;
    return a;
  }

  Poly add(Poly a, const Poly &b) {
    a.insert(a.end(), b.begin(), b.end());
    return collect(a);
  }

  // Like monomials added; zero coefficients dropped. Monomials are found by
  // the hash of their atoms: a linear scan made collecting quadratic, a tenth
  // of a TP8 training step's check in the backward's long sums.
  Poly collect(const Poly &in) {
    Poly out;
    std::unordered_multimap<size_t, size_t> at; // atoms' hash -> index in out
    at.reserve(in.size());
    for (auto &m : in) {
      size_t h = atomsHash(m.atoms);
      auto [lo, hi] = at.equal_range(h);
      auto it = std::find_if(lo, hi, [&](const auto &e) { return sameAtoms(out[e.second].atoms, m.atoms); });
      if (it == hi) {
        at.emplace(h, out.size());
        out.push_back(m);
        continue;
      }
      Mono &o = out[it->second];
      if (!exactAdd(o.c, m.c, o.c))
        failed = true;
    }
    out.erase(std::remove_if(out.begin(), out.end(), [](const Mono &m) { return m.c == 0; }), out.end());
    if (out.size() > kMaxMonomials)
      failed = true;
    return out;
  }

  static Term monoTerm(const Mono &m) {
    std::vector<Term> f;
    if (m.c != 1 || m.atoms.empty())
      f.push_back(mkConst(m.c));
    f.insert(f.end(), m.atoms.begin(), m.atoms.end());
    return f.size() == 1 ? f[0] : mkMul(f);
  }

  Term fromPoly(const Poly &p) {
    if (p.empty())
      return mkConst(0);
    std::vector<Term> terms;
    for (auto &m : p)
      terms.push_back(monoTerm(m));
    return terms.size() == 1 ? terms[0] : mkAdd(terms);
  }

  // cos or sin of one monomial, its sign taken out.
  Poly trigOfMono(Fn f, Mono m) {
    double sign = 1;
    if (m.c < 0) {
      m.c = -m.c;
      if (f == Fn::Sin)
        sign = -1;
    }
    return {{sign, {mkApply(f, {monoTerm(m)})}}};
  }

  // cos/sin of a sum of monomials, expanded by angle addition.
  Poly trig(Fn f, const Poly &angle) {
    if (failed)
      return {};
    if (angle.empty())
      return f == Fn::Cos ? Poly{{1, {}}} : Poly{};
    const Mono &x = angle[0];
    if (angle.size() == 1)
      return trigOfMono(f, x);
    Poly rest(angle.begin() + 1, angle.end());
    Poly cx = trigOfMono(Fn::Cos, x), sx = trigOfMono(Fn::Sin, x);
    Poly cr = trig(Fn::Cos, rest), sr = trig(Fn::Sin, rest);
    if (f == Fn::Cos)
      return add(mul(cx, cr), scale(mul(sx, sr), -1));
    return add(mul(sx, cr), mul(cx, sr));
  }

  // Reductions over one range added into one; sin^2 replaced; collected.
  Poly finish(Poly p) {
    if (failed)
      return {};
    p = collect(p);
    Poly out, sums;
    for (auto &m : p) {
      bool sum = m.atoms.size() == 1 && m.atoms[0]->kind == TermKind::Sum && m.atoms[0]->red == Fn::Add;
      (sum ? sums : out).push_back(m);
    }
    std::vector<bool> used(sums.size(), false);
    for (size_t i = 0; i < sums.size(); ++i) {
      if (used[i])
        continue;
      const Term &s0 = sums[i].atoms[0];
      std::vector<size_t> group{i};
      for (size_t j = i + 1; j < sums.size(); ++j) {
        const Term &s1 = sums[j].atoms[0];
        if (used[j] || s1->level != s0->level || !s1->lo.same(s0->lo) ||
            !(s1->hi.same(s0->hi) || p_.implies(s1->hi == s0->hi, "trig.merge")))
          continue;
        used[j] = true;
        group.push_back(j);
      }
      if (group.size() == 1) {
        out.push_back(sums[i]);
        continue;
      }
      // sum c1 f + sum c2 g = sum (c1 f + c2 g), the coefficients exact.
      Expr k = boundVar(s0->level);
      Term body;
      {
        Prover::Scope s(p_, s0->lo <= k && k < s0->hi);
        Poly acc;
        for (size_t g : group)
          acc = add(acc, scale(toPoly(sums[g].atoms[0]->args[0]), sums[g].c));
        body = fromPoly(finish(acc));
      }
      out.push_back({1, {mkReduceLike(s0, s0->lo, s0->hi, body)}});
    }
    // sin(x)^2 = 1 - cos(x)^2, until no monomial has a squared sine.
    for (bool changed = true; changed && !failed;) {
      changed = false;
      Poly next;
      for (auto &m : out) {
        size_t a = m.atoms.size();
        for (size_t i = 0; i + 1 < m.atoms.size() && a == m.atoms.size(); ++i)
          if (isTrig(m.atoms[i]) && m.atoms[i]->fn == Fn::Sin && sameTerm(m.atoms[i], m.atoms[i + 1]))
            a = i;
        if (a == m.atoms.size()) {
          next.push_back(m);
          continue;
        }
        changed = true;
        Term cosx = mkApply(Fn::Cos, m.atoms[a]->args);
        Mono rest = m;
        rest.atoms.erase(rest.atoms.begin() + static_cast<long>(a), rest.atoms.begin() + static_cast<long>(a) + 2);
        next.push_back(rest);
        Poly minus = mul({rest}, {{-1, {cosx, cosx}}});
        next.insert(next.end(), minus.begin(), minus.end());
      }
      out = collect(next);
    }
    return out;
  }
};

std::optional<Term> Prover::trigCanonical(const Term &t) {
  TrigNormalizer n(*this);
  Term r = n.canon(t);
  if (n.failed)
    return std::nullopt;
  return r;
}

bool Prover::acEqual(const Term &a, const Term &b) {
  if (sameTerm(a, b))
    return true;
  for (int side = 0; side < 2; ++side) {
    const Term &s = side == 0 ? a : b;
    if (s->kind != TermKind::Select)
      continue;
    const Term &o = side == 0 ? b : a;
    for (int branch = 0; branch < 2; ++branch) {
      Expr c = branch == 0 ? s->cond : !s->cond;
      if (implies(!c, "trig.prune"))
        continue;
      Scope sc(*this, c);
      if (!acEqual(s->args[branch], o))
        return false;
    }
    return true;
  }
  if (a->kind != b->kind || a->args.size() != b->args.size() || a->skeleton != b->skeleton)
    return false;
  switch (a->kind) {
  case TermKind::Const:
    return a->value == b->value;
  case TermKind::Read:
    if (a->cls != b->cls || a->idx.size() != b->idx.size())
      return false;
    for (size_t d = 0; d < a->idx.size(); ++d)
      if (!equalExpr(a->idx[d], b->idx[d]))
        return false;
    return true;
  case TermKind::Apply: {
    if (a->fn != b->fn || a->name != b->name)
      return false;
    if (a->fn != Fn::Add && a->fn != Fn::Mul) {
      for (size_t i = 0; i < a->args.size(); ++i)
        if (!acEqual(a->args[i], b->args[i]))
          return false;
      return true;
    }
    // Operands as a multiset: equality is an equivalence, so a greedy pairing
    // finds one whenever one exists.
    std::vector<bool> used(b->args.size(), false);
    for (auto &x : a->args) {
      bool found = false;
      for (size_t j = 0; j < b->args.size() && !found; ++j)
        if (!used[j] && x->skeleton == b->args[j]->skeleton && acEqual(x, b->args[j]))
          used[j] = found = true;
      if (!found)
        return false;
    }
    return true;
  }
  case TermKind::Sum: {
    if (a->red != b->red || a->level != b->level || !equalExpr(a->lo, b->lo) || !equalExpr(a->hi, b->hi))
      return false;
    Expr k = boundVar(a->level);
    Scope s(*this, a->lo <= k && k < a->hi);
    return acEqual(a->args[0], b->args[0]);
  }
  case TermKind::Select:
    break;
  }
  return false;
}

} // namespace shardproof::relation
