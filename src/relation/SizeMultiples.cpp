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
      if (!fresh) {
        int64_t l = std::lcm(it->second.second, k);
        if (l > 0) // an overflowing lcm keeps the first multiple (still a true fact)
          it->second.second = l;
      }
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
  for (ir::Value &v : g.values)
    if (v.declared)
      for (ir::Dim &d : v.declared->dims)
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
