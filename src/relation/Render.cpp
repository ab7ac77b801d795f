// Rendering relation terms in the spec's relation language where possible:
// `x`, `concat(h@0, h@1, axis=2)`, `sum(p@0, p@1)`; the raw term otherwise.
#include "Session.h"

#include <algorithm>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

// Is `idx` the identity index, except on `axis` where it may be shifted?
static bool identityExcept(const IndexVec &idx, int axis, Expr *shift) {
  for (size_t d = 0; d < idx.size(); ++d) {
    Expr v = indexVar("i", static_cast<unsigned>(d));
    if (static_cast<int>(d) == axis) {
      auto aff = idx[d].affineIn("i!" + std::to_string(d));
      if (!aff || aff->first != 1)
        return false;
      if (shift)
        *shift = aff->second;
      continue;
    }
    if (!idx[d].same(v))
      return false;
  }
  return true;
}

static std::optional<std::string> renderRel(const Session &S, const Term &t) {
  switch (t->kind) {
  case TermKind::Read:
    if (identityExcept(t->idx, -1, nullptr))
      return S.className(t->cls);
    for (size_t a = 0; a < t->idx.size(); ++a) {
      Expr shift;
      if (identityExcept(t->idx, static_cast<int>(a), &shift) && shift.isValid()) {
        if (auto s = shift.asInt(); s && *s < 0)
          break;
        return "slice(" + S.className(t->cls) + ", axis=" + std::to_string(a) + ", start=" + shift.str() + ")";
      }
    }
    return std::nullopt;
  case TermKind::Apply: {
    if (t->fn != Fn::Add)
      return std::nullopt;
    std::string s = "sum(";
    for (size_t i = 0; i < t->args.size(); ++i) {
      auto r = renderRel(S, t->args[i]);
      if (!r)
        return std::nullopt;
      s += (i ? ", " : "") + *r;
    }
    return s + ")";
  }
  case TermKind::Select: {
    // concat: a chain Select(i_a < m, X0, Select(i_a < m2, X1, ...)) of reads
    // shifted along one axis.
    std::vector<Term> parts;
    Term cur = t;
    int axis = -1;
    while (cur->kind == TermKind::Select) {
      Expr cond = cur->cond.asNot().value_or(cur->cond);
      if (!cond.asCmp())
        return std::nullopt;
      auto vars = cur->cond.vars();
      int a = -1;
      for (auto &v : vars)
        if (v.rfind("i!", 0) == 0)
          a = std::stoi(v.substr(2));
      if (a < 0 || (axis >= 0 && a != axis))
        return std::nullopt;
      axis = a;
      parts.push_back(cur->args[0]);
      cur = cur->args[1];
    }
    parts.push_back(cur);
    // Order the parts by where they sit on the axis (the Select chain may test
    // the last shard first), and say concat only when they tile [0, n) exactly.
    std::vector<std::pair<Expr, Term>> placed;
    for (auto &p : parts) {
      Expr shift;
      if (p->kind != TermKind::Read || !identityExcept(p->idx, axis, &shift))
        return std::nullopt;
      placed.push_back({(-shift).simplify(), p});
    }
    std::stable_sort(placed.begin(), placed.end(), [](auto &a, auto &b) {
      auto x = a.first.asInt(), y = b.first.asInt();
      return x && y && *x < *y;
    });
    Expr next = Expr::intConst(0);
    std::string s = "concat(";
    for (size_t i = 0; i < placed.size(); ++i) {
      const ClassInfo &ci = S.classes[placed[i].second->cls];
      if (!placed[i].first.simplify().same(next.simplify()) || static_cast<size_t>(axis) >= ci.shape.rank())
        return std::nullopt;
      next = next + ci.shape.dims[axis];
      s += (i ? ", " : "") + S.className(placed[i].second->cls);
    }
    return s + ", axis=" + std::to_string(axis) + ")";
  }
  default:
    return std::nullopt;
  }
}

std::string Session::render(const Term &t) const {
  if (auto r = renderRel(*this, t))
    return *r;
  return ir::str(t, [&](ClassId c) { return classes.label(c); });
}

} // namespace shardproof::relation
