// Integer tensors used as indices or masks (token ids, a vocab shard's range
// check, Megatron's masked lookup): the element term of an integer tensor read
// back as an integer expression. Leaf integer inputs are uninterpreted
// functions of their indices, input_ids(b, s), bounded by the spec's `values`
// range; comparisons become conditions, so `where(ids < start, 0, ids - start)`
// is an index the solver can reason about.
#include "IndexValues.h"

#include "shardproof/ir/OpaqueFns.h"

#include <cmath>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;


// A constant read at a symbolic index (a folded padding mask, a causal-mask
// buffer): the index condition its content equals, checked element by element
// when recognised (ConstantMask.cpp); the read's index is inside the tensor.
std::optional<Expr> IndexValues::constantCondition(const ClassTable &table, const Term &t) const {
  const ClassInfo &ci = table[t->cls];
  std::optional<ConstantCondition> found;
  if (auto it = constantConditions.find(t->cls); &table == &classes && it != constantConditions.end())
    found = it->second;
  else {
    found = recogniseConstantCondition(ci.dataDims, ci.data);
    if (&table == &classes)
      constantConditions.emplace(t->cls, found);
  }
  if (!found || t->idx.size() != ci.dataDims.size())
    return std::nullopt;
  IndexVec u = indexVars("u", static_cast<unsigned>(t->idx.size()));
  Expr cond = found->cond.substitute({u.begin(), u.end()}, {t->idx.begin(), t->idx.end()});
  auto num = [](double v) { return Expr::intConst(static_cast<int64_t>(v)); };
  return ite(cond, num(found->onTrue), num(found->onFalse)).simplify();
}

// A 1-d integer constant c0, c0 + d, c0 + 2d, ... read at a symbolic index
// (torch.arange(n) exported as a constant: the columns of a one-hot) is
// c0 + d * index; the read's index is inside the tensor.
std::optional<Expr> IndexValues::arithmeticProgression(const ClassInfo &ci, const Term &t) {
  if (t->idx.size() != 1 || ci.dataDims.size() != 1)
    return std::nullopt;
  auto ap = ir::arithmeticProgression(ci.data);
  if (!ap)
    return std::nullopt;
  return (Expr::intConst(ap->first) + Expr::intConst(ap->second) * t->idx[0]).simplify();
}

// Counts that cannot be negative: numerals >= 0, index variables (they range
// over [0, dim)), and the values proven >= 0 where their sum(k in [0, E): 1)
// term was built (valueTerm, shapeValueTerm).
bool IndexValues::knownNonNegative(const Expr &e) const {
  if (auto v = e.asInt())
    return *v >= 0;
  if (auto n = e.asVar())
    if (n->size() > 2 && (*n)[1] == '!' && ((*n)[0] == 'u' || (*n)[0] == 'i' || (*n)[0] == 'k'))
      return true;
  for (auto &x : provenNonNegative)
    if (x.same(e))
      return true;
  return false;
}

std::string IndexValues::valueFunction(ClassId c) const { return "val:" + classes[c].label; }

std::optional<Expr> IndexValues::indexValue(const ClassTable &table, const Term &t, int depth) const {
  if (depth > 64)
    return std::nullopt;
  auto sub = [&](const Term &x) { return indexValue(table, x, depth + 1); };
  switch (t->kind) {
  case TermKind::Const:
    if (std::isfinite(t->value) && t->value == std::floor(t->value) && std::abs(t->value) < 1e15)
      return Expr::intConst(static_cast<int64_t>(t->value));
    return std::nullopt;
  case TermKind::Read: {
    const ClassInfo &ci = table[t->cls];
    switch (ci.kind) {
    case ClassInfo::Leaf:
      // Only inputs the spec gives a value range are integer data we know of.
      if (&table != &classes || !ci.valueRange)
        return std::nullopt;
      // Offsets the spec lists (`cu_seqlens: {elements: [0, s1, s1 + s2]}`):
      // element i is the i-th expression (an ite chain over a symbolic i).
      if (!ci.elements.empty()) {
        if (t->idx.size() != 1)
          return std::nullopt;
        Expr i = t->idx[0].simplify();
        if (auto c = i.asInt())
          return *c >= 0 && *c < static_cast<int64_t>(ci.elements.size()) ? std::optional<Expr>(ci.elements[*c])
                                                                           : std::nullopt;
        Expr v = ci.elements.back();
        for (size_t e = ci.elements.size() - 1; e-- > 0;)
          v = ite(i == Expr::intConst(static_cast<int64_t>(e)), ci.elements[e], v);
        return v;
      }
      // A length the spec binds (`seq_len: {value: seq}`) is that expression.
      if (ci.exactValue)
        return ci.valueRange->first;
      return Expr::app(valueFunction(t->cls), {t->idx.begin(), t->idx.end()});
    case ClassInfo::Constant: {
      int64_t flat = 0;
      bool symbolic = false;
      for (size_t d = 0; d < t->idx.size(); ++d) {
        auto v = t->idx[d].asInt();
        symbolic |= !v;
        if (v && (*v < 0 || *v >= ci.dataDims[d]))
          return std::nullopt;
        flat = flat * ci.dataDims[d] + v.value_or(0);
      }
      if (!symbolic)
        return sub(mkConst(ci.data[flat]));
      if (auto c = constantCondition(table, t))
        return c;
      return arithmeticProgression(ci, t);
    }
    case ClassInfo::Compute:
      return sub(instantiate(ci.def, indexVars("u", static_cast<unsigned>(ci.shape.rank())), t->idx, 0));
    }
    return std::nullopt;
  }
  case TermKind::Select: {
    auto a = sub(t->args[0]), b = sub(t->args[1]);
    if (!a || !b)
      return std::nullopt;
    return ite(t->cond, *a, *b);
  }
  case TermKind::Sum: {
    // sum(k in [lo, hi): c) = c * max(hi - lo, 0): Range's index-valued elements.
    // Only a sum: a max/min/product of a constant is not c * n.
    auto c = t->red == Fn::Add && t->args[0]->kind == TermKind::Const ? sub(t->args[0]) : std::nullopt;
    if (!c)
      return std::nullopt;
    Expr n = (t->hi - t->lo).simplify();
    return (*c * (knownNonNegative(n) ? n : max(n, Expr::intConst(0)))).simplify();
  }
  case TermKind::Apply:
    break;
  }
  std::vector<Expr> xs;
  for (auto &a : t->args) {
    auto v = sub(a);
    if (!v)
      return std::nullopt;
    xs.push_back(*v);
  }
  switch (t->fn) {
  case Fn::Add: {
    Expr s = Expr::intConst(0);
    for (auto &x : xs)
      s = s + x;
    return s.simplify();
  }
  case Fn::Mul: {
    Expr p = Expr::intConst(1);
    for (auto &x : xs)
      p = p * x;
    return p.simplify();
  }
  case Fn::Max2:
  case Fn::Min2: {
    Expr m = xs[0];
    for (size_t i = 1; i < xs.size(); ++i)
      m = t->fn == Fn::Max2 ? max(m, xs[i]) : min(m, xs[i]);
    return m;
  }
  case Fn::Abs: return ite(xs[0] < Expr::intConst(0), -xs[0], xs[0]);
  case Fn::Opaque: // masks, casts, integer Div/Mod: their one home is ir/OpaqueFns
    return integerOpaque(t->name, xs, !xs.empty() && knownNonNegative(xs[0].simplify()));
  default:
    return std::nullopt;
  }
}

} // namespace shardproof::relation
