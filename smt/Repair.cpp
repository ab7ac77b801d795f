// Repair: index values for a kept model from a query's own bounds (Repair.h).
#include "smt/Repair.h"
#include "smt/Poly.h"

#include <algorithm>
#include <map>

namespace shardproof::smt::detail {

namespace {

// The name of a 0-ary integer constant, if `e` is one.
std::optional<std::string> constantName(const Expr &e) {
  Z3_context c = ctx();
  Z3_ast a = raw(e);
  if (Z3_get_ast_kind(c, a) != Z3_APP_AST || numArgs(a) != 0 || kindOf(a) != Z3_OP_UNINTERPRETED || !e.isInt())
    return std::nullopt;
  return std::string(Z3_get_symbol_string(c, Z3_get_decl_name(c, Z3_get_app_decl(c, Z3_to_app(c, a)))));
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

void Repairer::parse(const Expr &literal, std::vector<Bound> &out) const {
  Z3_ast a = raw(literal);
  bool negated = kindOf(a) == Z3_OP_NOT;
  if (negated)
    a = raw(argOf(a, 0));
  Z3_decl_kind k = kindOf(a);
  if (!(k == Z3_OP_LE || k == Z3_OP_LT || k == Z3_OP_GE || k == Z3_OP_GT || k == Z3_OP_EQ) || numArgs(a) != 2 ||
      !argOf(a, 0).isInt() || (negated && k == Z3_OP_EQ))
    return;
  if (negated)
    k = k == Z3_OP_LE ? Z3_OP_GT : k == Z3_OP_LT ? Z3_OP_GE : k == Z3_OP_GE ? Z3_OP_LT : Z3_OP_LE;
  Linear d; // lhs - rhs
  d.add(argOf(a, 0), 1);
  d.add(argOf(a, 1), -1);
  if (d.overflow)
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
  b.var = var->first;
  auto flipped = [](Bound x) {
    x.coef = -x.coef;
    x.constant = -x.constant;
    for (auto &t : x.rest)
      t.first = -t.first;
    return x;
  };
  for (auto &t : b.rest)
    if (t.first == INT64_MIN)
      return;
  b.coef = var->second;
  // d = coef*x + rest; the literal as coef'*x + rest' >= 0 (integers: > is >=
  // 1).
  switch (k) {
  case Z3_OP_GE: out.push_back(b); break;
  case Z3_OP_GT: --b.constant, out.push_back(b); break;
  case Z3_OP_LE: out.push_back(flipped(b)); break;
  case Z3_OP_LT: {
    Bound f = flipped(b);
    --f.constant;
    out.push_back(std::move(f));
    break;
  }
  default: // EQ: both ways
    out.push_back(b);
    out.push_back(flipped(b));
    break;
  }
}

std::vector<Expr> conjunctsOf(const Expr &formula) {
  std::vector<Expr> parts;
  if (formula.isValid())
    flatten(formula, false, parts);
  return parts;
}

std::vector<const Repairer::Bound *> Repairer::boundsOf(const std::vector<Expr> &parts) {
  std::vector<const Bound *> out;
  if (parsed_.size() > 100'000)
    parsed_.clear();
  for (const Expr &part : parts) {
    auto [it, fresh] = parsed_.try_emplace(part.id());
    if (fresh) {
      it->second.first = part;
      parse(part, it->second.second);
    }
    for (const Bound &b : it->second.second)
      out.push_back(&b);
  }
  return out;
}

std::optional<std::unordered_map<std::string, int64_t>>
Repairer::values(const std::vector<const Bound *> &bounds, const Expr::Env &fixed, const Expr::AppEnv &apps) {
  std::map<std::string, std::pair<std::optional<int64_t>, std::optional<int64_t>>> box;
  for (const Bound *b : bounds) {
    int64_t r = b->constant;
    for (auto &[coef, atom] : b->rest) {
      auto v = atom.eval(fixed, apps);
      int64_t p;
      if (!v || __builtin_mul_overflow(coef, *v, &p) || __builtin_add_overflow(r, p, &r))
        return std::nullopt;
    }
    if (r == INT64_MIN)
      return std::nullopt;
    auto &[lo, hi] = box[b->var];
    if (b->coef > 0) { // x >= ceil(-r / coef)
      int64_t v = ceilDivInt(-r, b->coef);
      lo = lo ? std::max(*lo, v) : v;
    } else { // x <= floor(r / -coef)
      int64_t v = floorDivInt(r, -b->coef);
      hi = hi ? std::min(*hi, v) : v;
    }
  }
  std::unordered_map<std::string, int64_t> out;
  for (auto &[var, range] : box) {
    auto &[lo, hi] = range;
    if (lo && hi && *lo > *hi)
      return std::nullopt;
    out[var] = lo ? *lo : hi ? std::min<int64_t>(*hi, 0) : 0;
  }
  return out;
}

} // namespace shardproof::smt::detail
