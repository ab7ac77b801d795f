// Integer values the spec binds (`values`, `value`, `fill`, `each`): bounded
// leaves, sizes passed as data to the ranks (seq_len, lengths), their element
// terms, and the masks built from them as seen by the tensors that read them.
#include "Bind.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;


// An integer input with a spec `values` range: its elements are the
// uninterpreted function valueFunction(c) of the index, bounded everywhere in
// the tensor (a quantified background fact; Z3 instantiates it per lookup).
void InputBinding::boundValues(ClassId c, const spec::Placement &pl) {
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
  Expr v = Expr::app(ints.valueFunction(c), {q.begin(), q.end()});
  // Met by the constant lo whenever lo <= hi: queries that read no element of
  // this tensor are asked without the quantifier.
  solver.assumeOnFunction(
      Expr::forall({q.begin(), q.end()},
                   smt::implies(smt::conj(inside), pl.values->first <= v && v <= pl.values->second)),
      ints.valueFunction(c), pl.values->first <= pl.values->second);
  result.notes.push_back("values of '" + ci.label + "' assumed in [" + pl.values->first.str() + ", " +
                         pl.values->second.str() + "]");
}

// `value: E` / `fill: E` on a small tensor of known size: its elements as
// shape arithmetic, so a Slice end or a Range limit read from it is E.
std::optional<IntTensor> InputBinding::exactValues(const Shape &s, const spec::Placement &pl) {
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

// The element term of a value-bound leaf. `value: E` with E >= 0 at every
// admissible size is sum(k in [0, E): 1), the same term a ReduceMean over E
// elements divides by and a Range index is made of, so `x.sum() / seq_len`
// meets the reference's mean; otherwise a read of the leaf.
Term InputBinding::valueTerm(ClassId c, const spec::Placement &pl) {
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
llvm::Error InputBinding::bindRankOnlyValue(const std::string &name, const spec::Placement &pl) {
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
llvm::Error InputBinding::checkElementCount(const std::string &name, const Shape &shape, const spec::Placement &pl) {
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

Term InputBinding::boundLeaf(const std::string &name, const Shape &shape, const spec::Placement &pl) {
  ClassInfo ci;
  ci.kind = ClassInfo::Leaf;
  ci.label = name;
  ci.shape = shape;
  ClassId c = classes.add(ci);
  boundValues(c, pl);
  return valueTerm(c, pl);
}

} // namespace shardproof::relation
