// Internal to smt/: integer expressions seen as polynomials over atoms (AST
// nodes that are not +, -, * by a numeral), shared by the simplifier's div/mod
// rules and the size facts (Facts.cpp). Not a public header: it includes Z3.
#pragma once

#include "smt/Context.h"
#include "shardproof/smt/Expr.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace shardproof::smt::detail {

inline Z3_decl_kind kindOf(Z3_ast a) { return node(a).op; }

inline unsigned numArgs(Z3_ast a) { return node(a).numArgs; }
inline Expr argOf(Z3_ast a, unsigned i) { return fromRaw(argAt(a, i)); }

inline bool isDivMod(Z3_decl_kind k) { return k == Z3_OP_DIV || k == Z3_OP_IDIV || k == Z3_OP_MOD; }

/// Floor and ceiling of n / d for machine integers, d > 0 (C++ truncates
/// toward zero): the bound an inequality c*x + r >= 0 puts on x.
inline int64_t floorDivInt(int64_t n, int64_t d) { return n / d - (n % d != 0 && n < 0); }
inline int64_t ceilDivInt(int64_t n, int64_t d) { return n / d + (n % d != 0 && n > 0); }

/// An integer expression as constant + sum of coef * atom (atoms by AST id).
struct Linear {
  int64_t constant = 0;
  std::map<unsigned, std::pair<int64_t, Expr>> terms;
  bool overflow = false; // a coefficient left int64: the terms are meaningless

  // dst += a * b, noting an overflow instead of wrapping.
  void addProduct(int64_t &dst, int64_t a, int64_t b) {
    int64_t p;
    overflow |= __builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(dst, p, &dst);
  }

  void add(const Expr &e, int64_t scale) {
    if (auto v = e.asInt()) {
      addProduct(constant, scale, *v);
      return;
    }
    Z3_ast a = raw(e);
    switch (kindOf(a)) {
    case Z3_OP_ADD:
      for (unsigned i = 0; i < numArgs(a); ++i)
        add(argOf(a, i), scale);
      return;
    case Z3_OP_SUB:
      for (unsigned i = 0; i < numArgs(a); ++i)
        add(argOf(a, i), i == 0 ? scale : -scale);
      return;
    case Z3_OP_UMINUS:
      add(argOf(a, 0), -scale);
      return;
    case Z3_OP_MUL:
      if (numArgs(a) == 2) {
        int64_t scaled = 0;
        if (auto c = argOf(a, 0).asInt()) {
          addProduct(scaled, scale, *c);
          return add(argOf(a, 1), scaled);
        }
        if (auto c = argOf(a, 1).asInt()) {
          addProduct(scaled, scale, *c);
          return add(argOf(a, 0), scaled);
        }
      }
      break;
    default:
      break;
    }
    auto &slot = terms[e.id()];
    if (!slot.second.isValid())
      slot.second = e;
    addProduct(slot.first, scale, 1);
  }

  Expr build() const {
    Expr r = Expr::intConst(constant);
    for (auto &[id, t] : terms)
      if (t.first != 0)
        r = r + (t.first == 1 ? t.second : t.second * t.first);
    return r;
  }
};

inline Linear linearOf(const Expr &e) {
  Linear l;
  l.add(e, 1);
  if (!l.overflow)
    return l;
  // Sizes near int64's limits: `e` itself, as one atom, is still exact.
  Linear atom;
  atom.terms[e.id()] = {1, e};
  return atom;
}

inline bool hasDivMod(Z3_ast a, int depth = 0) {
  // The simplifier asks this at every level of the terms it rewrites: a
  // node's answer is kept with its cached answers, one walk instead of one per
  // level. A `true` is exact; a `false` only from the top, where the depth
  // bound cuts what every later question would cut too.
  {
    const NodeInfo &n = node(a);
    if (n.kind != Z3_APP_AST || depth > 64)
      return false;
    if (n.divMod >= 0)
      return n.divMod;
    if (isDivMod(n.op)) {
      nodeSlot(a).divMod = 1;
      return true;
    }
  }
  bool found = false;
  for (unsigned i = 0, n = numArgs(a); i < n && !found; ++i)
    found = hasDivMod(argAt(a, i), depth + 1);
  if (NodeInfo &s = nodeSlot(a); s.ast == a && (found || depth == 0))
    s.divMod = found;
  return found;
}

// `e` with every argument replaced by f(argument) (kept in `args`); `e` itself
// when no argument changes.
template <class F>
Expr mapArgs(const Expr &e, F f, std::vector<Expr> &args) {
  Z3_ast a = raw(e);
  unsigned n = numArgs(a);
  std::vector<Z3_ast> handles;
  bool changed = false;
  for (unsigned i = 0; i < n; ++i) {
    Expr x = argOf(a, i), y = f(x);
    changed |= !y.same(x);
    args.push_back(y);
    handles.push_back(raw(y));
  }
  return changed ? fromRaw(Z3_update_term(ctx(), a, n, handles.data())) : e;
}

// A product as coefficient * atoms (by AST id, with repeats); nullopt on overflow.
struct Monomial {
  int64_t coef = 1;
  std::map<unsigned, std::pair<int, Expr>> atoms; // id -> (power, atom)
};

inline bool factorInto(const Expr &e, Monomial &m) {
  if (auto c = e.asInt()) {
    int64_t r;
    if (__builtin_mul_overflow(m.coef, *c, &r))
      return false;
    m.coef = r;
    return true;
  }
  Z3_ast a = raw(e);
  if (kindOf(a) == Z3_OP_MUL) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      if (!factorInto(argOf(a, i), m))
        return false;
    return true;
  }
  auto &slot = m.atoms[e.id()];
  slot.first += 1;
  slot.second = e;
  return true;
}

} // namespace shardproof::smt::detail
