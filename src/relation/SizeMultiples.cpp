// SizeMultiples: x -> c * (x // c) for the spec's `x % c == 0` (SizeMultiples.h).
#include "SizeMultiples.h"

#include "shardproof/smt/Facts.h"

#include <map>
#include <numeric>

namespace shardproof::relation {

using smt::Expr;

SizeMultiples SizeMultiples::fromSpec(const spec::Spec &spec) {
  std::map<std::string, std::pair<Expr, int64_t>> lcm; // by name, for a stable order
  for (auto &c : spec.constraints)
    for (auto &[x, k] : smt::multiplesIn(c.expr)) {
      auto [it, fresh] = lcm.emplace(*x.asVar(), std::make_pair(x, k));
      if (fresh)
        continue;
      // An lcm past int64 keeps the multiple so far (still a true fact);
      // std::lcm itself would overflow silently.
      int64_t &mult = it->second.second, l = 0;
      if (!__builtin_mul_overflow(mult / std::gcd(mult, k), k, &l))
        mult = l;
    }
  SizeMultiples m;
  for (auto &[name, xk] : lcm) {
    Expr c = Expr::intConst(xk.second);
    m.from_.push_back(xk.first);
    m.to_.push_back(c * smt::floorDiv(xk.first, c));
  }
  return m;
}

Expr SizeMultiples::apply(const Expr &e) const {
  if (!e.isValid() || empty())
    return e;
  return e.substitute(from_, to_).simplify();
}

void SizeMultiples::apply(ir::Graph &g) const {
  if (empty())
    return;
  // Only graph inputs: every other shape is inferred from them (ShapeInference
  // reads a declared shape for inputs alone), so value_info is left as is.
  for (int id : g.inputs)
    if (auto &shape = g.values[id].declared)
      for (ir::Dim &d : shape->dims)
        d = apply(d);
}

void SizeMultiples::apply(spec::Spec &s) const {
  if (empty())
    return;
  std::function<void(spec::RelExpr &)> rel = [&](spec::RelExpr &r) {
    for (auto &a : r.args)
      rel(a);
    for (auto &kw : r.kwargs)
      for (Expr &v : kw.values)
        v = apply(v);
  };
  auto place = [&](spec::Placement &p) {
    for (Expr &e : p.sizes)
      e = apply(e);
    if (p.padMultiple)
      p.padMultiple = apply(*p.padMultiple);
    if (p.relation)
      rel(*p.relation);
    if (p.values)
      p.values = std::make_pair(apply(p.values->first), apply(p.values->second));
    for (Expr &e : p.elements)
      e = apply(e);
  };
  for (auto *group : {&s.inputs, &s.outputs, &s.layers})
    for (auto &[name, p] : *group)
      place(p);
}

} // namespace shardproof::relation
