// Repair: index values for a kept model from a query's own bounds (Repair.h).
#include "smt/Repair.h"
#include "smt/Poly.h"

#include <algorithm>
#include <map>

namespace shardproof::smt::detail {

namespace {

// The name of a 0-ary integer constant, if `e` is one.
std::optional<std::string> constantName(const Expr &e) {
  Z3_ast a = raw(e);
  if (!isNamedConst(a) || !e.isInt())
    return std::nullopt;
  return appName(a);
}

// The conjuncts of `e` (of its negation when `negated`): through and, not-or
// and double negation, the forms `not (path => goal)` takes once simplified.
void flatten(const Expr &e, bool negated, std::vector<Expr> &out) {
  Z3_ast a = raw(e);
  Z3_decl_kind k = kindOf(a);
  if (k == Z3_OP_NOT)
    return flatten(argOf(a, 0), !negated, out);
  if ((k == Z3_OP_AND && !negated) || (k == Z3_OP_OR && negated)) {
    for (unsigned i = 0; i < numArgs(a); ++i)
      flatten(argOf(a, i), negated, out);
    return;
  }
  out.push_back(negated ? !e : e);
}


} // namespace

// The comparison `literal` (through one negation) as lhs - rhs OP 0 with OP
// one of >=, >, <=, < or ==, or false (a boolean atom, != ...).
static bool comparison(const Expr &literal, Linear &d, Z3_decl_kind &k) {
  Z3_ast a = raw(literal);
  bool negated = kindOf(a) == Z3_OP_NOT;
  if (negated)
    a = raw(argOf(a, 0));
  k = kindOf(a);
  if (!(k == Z3_OP_LE || k == Z3_OP_LT || k == Z3_OP_GE || k == Z3_OP_GT || k == Z3_OP_EQ) || numArgs(a) != 2 ||
      !argOf(a, 0).isInt() || (negated && k == Z3_OP_EQ))
    return false;
  if (negated)
    k = k == Z3_OP_LE ? Z3_OP_GT : k == Z3_OP_LT ? Z3_OP_GE : k == Z3_OP_GE ? Z3_OP_LT : Z3_OP_LE;
  d.add(argOf(a, 0), 1);
  d.add(argOf(a, 1), -1);
  return !d.overflow;
}

// A bound coef * x + rest + constant  OP  0 as the `>= 0` bounds it gives
// (integers: > is >= 1; == is both ways), for Bound and AppBound alike.
template <class B> static void emit(B b, Z3_decl_kind k, std::vector<B> &out) {
  auto flipped = [](B x) {
    x.coef = -x.coef;
    x.constant = -x.constant;
    for (auto &t : x.rest)
      t.first = -t.first;
    return x;
  };
  switch (k) {
  case Z3_OP_GE: out.push_back(std::move(b)); break;
  case Z3_OP_GT: --b.constant, out.push_back(std::move(b)); break;
  case Z3_OP_LE: out.push_back(flipped(std::move(b))); break;
  case Z3_OP_LT: {
    B f = flipped(std::move(b));
    --f.constant;
    out.push_back(std::move(f));
    break;
  }
  default: // EQ: both ways
    out.push_back(b);
    out.push_back(flipped(std::move(b)));
    break;
  }
}

// `range` narrowed by bound b (coef * x + rest + constant >= 0) with rest
// evaluated: x >= ceil(-r / coef) or x <= floor(r / -coef). False if rest
// does not evaluate or overflows.
using Range = std::pair<std::optional<int64_t>, std::optional<int64_t>>;
template <class B>
static bool narrow(const B &b, const Expr::Env &env, const Expr::AppEnv &apps, Range &range) {
  int64_t r = b.constant;
  for (auto &[coef, atom] : b.rest) {
    auto v = atom.eval(env, apps);
    int64_t p;
    if (!v || __builtin_mul_overflow(coef, *v, &p) || __builtin_add_overflow(r, p, &r))
      return false;
  }
  if (r == INT64_MIN)
    return false;
  auto &[lo, hi] = range;
  if (b.coef > 0) {
    int64_t v = ceilDivInt(-r, b.coef);
    lo = lo ? std::max(*lo, v) : v;
  } else {
    int64_t v = floorDivInt(r, -b.coef);
    hi = hi ? std::min(*hi, v) : v;
  }
  return true;
}

// Conjuncts parsed once into `cache` (paths repeat from query to query),
// their bounds collected in order.
template <class B, class Parse>
static std::vector<const B *> cachedBounds(std::unordered_map<unsigned, std::pair<Expr, std::vector<B>>> &cache,
                                           const std::vector<Expr> &parts, Parse parse) {
  std::vector<const B *> out;
  if (cache.size() > 100'000)
    cache.clear();
  for (const Expr &part : parts) {
    auto [it, fresh] = cache.try_emplace(part.id());
    if (fresh) {
      it->second.first = part;
      parse(part, it->second.second);
    }
    for (const B &b : it->second.second)
      out.push_back(&b);
  }
  return out;
}

void Repairer::parse(const Expr &literal, std::vector<Bound> &out) const {
  Linear d; // lhs - rhs
  Z3_decl_kind k;
  if (!comparison(literal, d, k))
    return;
  // The one free variable it bounds; every other atom must be free of them.
  std::optional<std::pair<std::string, int64_t>> var;
  Bound b{"", 0, d.constant, {}};
  for (auto &[id, term] : d.terms) {
    auto &[coef, atom] = term;
    if (coef == 0)
      continue;
    auto name = constantName(atom);
    if (name && isFree_(*name)) {
      if (var)
        return; // two free variables
      var = {*name, coef};
      continue;
    }
    for (const std::string &v : atom.vars())
      if (isFree_(v))
        return;
    b.rest.push_back({coef, atom});
  }
  if (!var || var->second == INT64_MIN || d.constant == INT64_MIN)
    return;
  for (auto &t : b.rest)
    if (t.first == INT64_MIN)
      return;
  b.var = var->first;
  b.coef = var->second; // d = coef*x + rest
  emit(std::move(b), k, out);
}

void Repairer::parseApp(const Expr &literal, std::vector<AppBound> &out) const {
  Linear d;
  Z3_decl_kind k;
  if (!comparison(literal, d, k) || d.constant == INT64_MIN)
    return;
  std::optional<AppBound> b;
  std::vector<std::pair<int64_t, Expr>> rest;
  for (auto &[id, term] : d.terms) {
    auto &[coef, atom] = term;
    if (coef == 0)
      continue;
    if (coef == INT64_MIN)
      return;
    auto app = atom.asApp();
    if (app && redefinable_(app->first)) {
      if (b)
        return; // two applications: which one to move is not this repair's choice
      b = AppBound{atom, coef, d.constant, {}};
      continue;
    }
    for (auto &[fn, arity] : atom.functions())
      if (redefinable_(fn))
        return;
    rest.push_back({coef, atom});
  }
  if (!b)
    return;
  // The arguments may read free variables (moved first) but no application
  // of a redefinable function: the point must not move with the values set.
  auto app = b->app.asApp();
  for (auto &arg : app->second)
    if (!arg.functions().empty())
      return;
  b->rest = std::move(rest);
  emit(std::move(*b), k, out);
}

std::vector<const Repairer::AppBound *> Repairer::appBoundsOf(const std::vector<Expr> &parts) {
  return cachedBounds(appParsed_, parts, [this](const Expr &p, std::vector<AppBound> &out) { parseApp(p, out); });
}

std::optional<Repairer::AppValues> Repairer::appValues(const std::vector<const AppBound *> &bounds,
                                                       const Expr::Env &env, const Expr::AppEnv &apps,
                                                       bool high) {
  std::map<std::pair<std::string, std::vector<int64_t>>, Range> box;
  for (const AppBound *b : bounds) {
    auto app = b->app.asApp();
    std::vector<int64_t> at;
    for (auto &arg : app->second) {
      auto v = arg.eval(env, apps);
      if (!v)
        return std::nullopt;
      at.push_back(*v);
    }
    if (!narrow(*b, env, apps, box[{app->first, std::move(at)}]))
      return std::nullopt;
  }
  AppValues out;
  for (auto &[point, range] : box) {
    auto &[lo, hi] = range;
    if (lo && hi && *lo > *hi)
      return std::nullopt;
    out[point] = (high && hi) || !lo ? *hi : *lo; // one side at least: every entry came from a bound
  }
  return out;
}

std::vector<Expr> conjunctsOf(const Expr &formula) {
  std::vector<Expr> parts;
  if (formula.isValid())
    flatten(formula, false, parts);
  return parts;
}

std::vector<const Repairer::Bound *> Repairer::boundsOf(const std::vector<Expr> &parts) {
  return cachedBounds(parsed_, parts, [this](const Expr &p, std::vector<Bound> &out) { parse(p, out); });
}

std::optional<std::unordered_map<std::string, int64_t>>
Repairer::values(const std::vector<const Bound *> &bounds, const Expr::Env &fixed, const Expr::AppEnv &apps,
                 bool high) {
  std::map<std::string, Range> box;
  for (const Bound *b : bounds) {
    if (!narrow(*b, fixed, apps, box[b->var]))
      return std::nullopt;
  }
  std::unordered_map<std::string, int64_t> out;
  for (auto &[var, range] : box) {
    auto &[lo, hi] = range;
    if (lo && hi && *lo > *hi)
      return std::nullopt;
    out[var] = high && hi ? *hi : lo ? *lo : hi ? std::min<int64_t>(*hi, 0) : 0;
  }
  return out;
}

} // namespace shardproof::smt::detail
