// Integer values the spec binds (`values`, `value`, `fill`, `each`): bounded
// leaves, sizes passed as data to the ranks (seq_len, lengths), their element
// terms, and the masks built from them as seen by the tensors that read them.
#include "Session.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;


// An integer input with a spec `values` range: its elements are the
// uninterpreted function valueFunction(c) of the index, bounded everywhere in
// the tensor (a quantified background fact; Z3 instantiates it per lookup).
void Session::boundValues(ClassId c, const spec::Placement &pl) {
  if (!pl.values)
    return;
  ClassInfo &ci = classes[c];
  ci.valueRange = pl.values;
  ci.exactValue = pl.exactValue;
  ci.elements = pl.elements;
  if (!pl.elements.empty()) {
    std::string list;
    for (auto &e : pl.elements)
      list += (list.empty() ? "" : ", ") + e.str();
    result.notes.push_back("the elements of '" + ci.label + "' are [" + list + "]");
    return;
  }
  if (pl.exactValue) {
    // Read back as the bound expression itself (IndexValue.cpp): no function.
    result.notes.push_back("every element of '" + ci.label + "' is " + pl.values->first.str());
    return;
  }
  IndexVec q = indexVars("q", static_cast<unsigned>(ci.shape.rank()));
  std::vector<Expr> inside;
  for (size_t d = 0; d < ci.shape.rank(); ++d)
    inside.push_back(inRange(q[d], Expr::intConst(0), ci.shape.dims[d]));
  Expr v = Expr::app(valueFunction(c), {q.begin(), q.end()});
  solver.assume(Expr::forall({q.begin(), q.end()},
                             smt::implies(smt::conj(inside), pl.values->first <= v && v <= pl.values->second)));
  result.notes.push_back("values of '" + ci.label + "' assumed in [" + pl.values->first.str() + ", " +
                         pl.values->second.str() + "]");
}

// `value: E` / `fill: E` on a small tensor of known size: its elements as
// shape arithmetic, so a Slice end or a Range limit read from it is E.
std::optional<IntTensor> Session::exactValues(const Shape &s, const spec::Placement &pl) {
  if (!pl.exactValue || !pl.values)
    return std::nullopt;
  IntTensor t;
  if (!pl.elements.empty()) {
    t.dims = {static_cast<int64_t>(pl.elements.size())};
    t.vals = pl.elements;
    return t;
  }
  int64_t count = 1;
  for (auto &d : s.dims) {
    auto v = d.simplify().asInt();
    if (!v || *v < 0 || __builtin_mul_overflow(count, *v, &count) || count > 64)
      return std::nullopt;
    t.dims.push_back(*v);
  }
  t.vals.assign(static_cast<size_t>(count), pl.values->first);
  return t;
}

// Shape arithmetic used as data (arange(n) < x.shape[1]): the element term of
// a small integer tensor known symbolically. A constant is a number; a value
// that is >= 0 at every admissible size (a size) is sum(k in [0, E): 1), the
// index-valued form Range uses; anything else has no term (nullptr).
Term Session::shapeValueTerm(const IntTensor &v, const IndexVec &idx, int level) {
  if (idx.size() != v.dims.size())
    return nullptr;
  auto elem = [&](const Expr &e) -> Term {
    Expr x = e.simplify();
    if (auto c = x.asInt())
      return mkConst(static_cast<double>(*c));
    if (!knownNonNegative(x)) {
      if (!prover.implies(x >= Expr::intConst(0), "shape.value.nonnegative"))
        return nullptr;
      ints.provenNonNegative.push_back(x);
    }
    return mkSum(level, Expr::intConst(0), x, mkConst(1));
  };
  // Select chain over the flat position of idx.
  Expr flat = Expr::intConst(0);
  for (size_t d = 0; d < idx.size(); ++d)
    flat = flat * Expr::intConst(v.dims[d]) + idx[d];
  Term t;
  for (size_t f = v.size(); f-- > 0;) {
    Term e = elem(v.vals[f]);
    if (!e)
      return nullptr;
    t = t ? mkSelect(flat == Expr::intConst(static_cast<int64_t>(f)), e, t) : e;
  }
  return t;
}

// A read of a masked tensor (a softmax whose masked columns are exp(-inf) = 0,
// a product with a 0/1 mask) shows its mask to the reader: c[idx] ? k : t[idx]
// where the class is the constant k on condition c. A sum over the sequence
// reading it then splits where the mask switches, so pad rows that are zero
// by the mask drop out of a padded reduction (masked pooling, attention times
// V), exactly, not by value.
Term Session::exposeMask(const Term &t) const {
  if (!t || t->kind != TermKind::Read)
    return t;
  const ClassInfo &ci = classes[t->cls];
  if (ci.kind != ClassInfo::Compute || !ci.def || ci.def->kind != TermKind::Select)
    return t;
  const Term &d = ci.def;
  int constBranch = d->args[0]->kind == TermKind::Const ? 0 : d->args[1]->kind == TermKind::Const ? 1 : -1;
  if (constBranch < 0 || d->cond.hasApp())
    return t;
  IndexVec uv = indexVars("u", static_cast<unsigned>(ci.shape.rank()));
  Expr cond = d->cond.substitute({uv.begin(), uv.end()}, {t->idx.begin(), t->idx.end()});
  return constBranch == 0 ? mkSelect(cond, d->args[0], t) : mkSelect(cond, t, d->args[1]);
}

// The element term of a value-bound leaf. `value: E` with E >= 0 at every
// admissible size is sum(k in [0, E): 1), the same term a ReduceMean over E
// elements divides by and a Range index is made of, so `x.sum() / seq_len`
// meets the reference's mean; otherwise a read of the leaf.
Term Session::valueTerm(ClassId c, const spec::Placement &pl) {
  Term read = mkRead(c, indexVars("i", static_cast<unsigned>(classes[c].shape.rank())));
  if (!pl.exactValue || !pl.values)
    return read;
  if (!pl.elements.empty())
    return read; // read back element by element (IndexValue.cpp)
  Expr v = pl.values->first.simplify();
  if (!prover.implies(v >= Expr::intConst(0), "value.nonnegative"))
    return read;
  ints.provenNonNegative.push_back(v);
  return mkSum(0, Expr::intConst(0), v, mkConst(1));
}

// A value-bound input the reference does not have (a length the padded ranks
// receive as data): one leaf shared by every rank, with the bound values.
llvm::Error Session::bindRankOnlyValue(const std::string &name, const spec::Placement &pl) {
  int P = worldSize();
  std::optional<Shape> shape0;
  std::vector<int> ids(P);
  for (int r = 0; r < P; ++r) {
    std::string rn = spec::Spec::rankName(name, pl, r);
    auto id = ranks[r].find(rn);
    if (!id || !ranks[r].isSource(*id))
      return userError("spec input '" + name + "' is neither an input of the reference model " + ref.path +
                           " nor an input of rank " + std::to_string(r) + " (" + ranks[r].path + ")" +
                           didYouMean(rn, ranks[r].valueNames()),
                       pl.loc);
    auto s = rankShapeOf(r, *id);
    if (!s)
      return userError("rank " + std::to_string(r) + ": input '" + rn + "' has no declared shape", pl.loc);
    if (isFloating(ranks[r].values[*id].dtype))
      return userError("spec input '" + name + "' binds integer values, but rank " + std::to_string(r) +
                           "'s '" + rn + "' has a floating type",
                       pl.loc);
    if (auto e = checkElementCount(name, *s, pl))
      return e;
    if (!shape0)
      shape0 = *s;
    else if (s->rank() != shape0->rank())
      return userError("spec input '" + name + "': rank " + std::to_string(r) + " has rank " +
                           std::to_string(s->rank()) + ", rank 0 has " + std::to_string(shape0->rank()),
                       pl.loc);
    else
      for (size_t d = 0; d < s->rank(); ++d)
        obligations.push_back({{"rank " + std::to_string(r) + "'s '" + rn + "' has rank 0's dim " + std::to_string(d),
                                s->dims[d] == shape0->dims[d]},
                               r, "", ""});
    ids[r] = *id;
  }
  Term t = boundLeaf(name, *shape0, pl);
  for (int r = 0; r < P; ++r) {
    ValueInfo &v = rankValues[r][ids[r]];
    v.term = t;
    v.shape = rankShapeOf(r, ids[r]);
    v.dtype = ranks[r].values[ids[r]].dtype;
    v.value = exactValues(*v.shape, pl);
  }
  return llvm::Error::success();
}

// `elements: [...]` lists every element of a 1-D tensor: its length must be
// that count at every admissible size (an input error otherwise).
llvm::Error Session::checkElementCount(const std::string &name, const Shape &shape, const spec::Placement &pl) {
  if (pl.elements.empty())
    return llvm::Error::success();
  auto n = shape.rank() == 1 ? shape.dims[0].simplify().asInt() : std::nullopt;
  if (!n || *n != static_cast<int64_t>(pl.elements.size()))
    return userError("spec input '" + name + "' lists " + std::to_string(pl.elements.size()) +
                         " 'elements', but its shape is " + shape.str() +
                         " (a 1-D tensor of exactly that many elements is needed)",
                     pl.loc);
  return llvm::Error::success();
}

Term Session::boundLeaf(const std::string &name, const Shape &shape, const spec::Placement &pl) {
  ClassInfo ci;
  ci.kind = ClassInfo::Leaf;
  ci.label = name;
  ci.shape = shape;
  ClassId c = classes.add(ci);
  boundValues(c, pl);
  return valueTerm(c, pl);
}

} // namespace shardproof::relation
