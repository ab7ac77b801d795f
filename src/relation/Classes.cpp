#include "Classes.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace shardproof::relation {

// Registers every leaf of the Select tree of a definition as a matchable piece:
// a masked tensor (causal mask, padding) is matched region by region.
void ClassTable::addPieces(ClassId id, const Term &t, const smt::Expr &cond) {
  if (t->kind == ir::TermKind::Select) {
    // Every layer's classes have the same masks: simplified once.
    uint64_t at = key((static_cast<uint64_t>(cond.id()) << 32) | t->cond.id());
    auto it = regions_.find(at);
    if (it == regions_.end() || !it->second.cond.same(cond) || !it->second.mask.same(t->cond)) {
      Region r{cond, t->cond, (cond && t->cond).simplify(), (cond && !t->cond).simplify()};
      it = regions_.try_emplace(at).first;
      it->second = std::move(r);
    }
    smt::Expr in = it->second.in, out = it->second.out;
    addPieces(id, t->args[0], in);
    addPieces(id, t->args[1], out);
    return;
  }
  bySkeleton(t->skeleton).push_back({id, cond, t});
}

// --- Finiteness --------------------------------------------------------------
// Inputs are reals; -inf enters through constants (a mask) and empty maxes.
// A sum is real when its addends are (no +inf, so no inf - inf); a max is real
// when one operand is; exp(-inf) is 0; log, division and opaque functions are
// never known finite.
namespace {

using ir::Fn;
using ir::TermKind;

Finiteness join(Finiteness a, Finiteness b) {
  if (a == Finiteness::Unknown || b == Finiteness::Unknown)
    return Finiteness::Unknown;
  return a == b ? a : Finiteness::FiniteOrNegInf;
}

Finiteness ofConstant(double v) {
  if (std::isfinite(v))
    return Finiteness::Finite;
  return std::isinf(v) && v < 0 ? Finiteness::FiniteOrNegInf : Finiteness::Unknown;
}

struct FinitenessWalk {
  const ClassTable &classes;
  int budget = 4000; // term nodes visited; past it, Unknown

  Finiteness of(const Term &t) {
    if (--budget < 0)
      return Finiteness::Unknown;
    switch (t->kind) {
    case TermKind::Const:
      return ofConstant(t->value);
    case TermKind::Read:
      return classes[t->cls].finite;
    case TermKind::Select:
      return join(of(t->args[0]), of(t->args[1]));
    case TermKind::Sum: {
      Finiteness body = of(t->args[0]);
      auto lo = t->lo.asInt(), hi = t->hi.asInt();
      bool nonEmpty = lo && hi && *hi > *lo;
      if (body == Finiteness::Unknown)
        return body;
      if (t->red == Fn::Add)
        return body; // sums of reals and -infs (the empty sum is 0)
      if (t->red == Fn::Max2)
        return nonEmpty ? body : Finiteness::FiniteOrNegInf; // the empty max is -inf
      if (t->red == Fn::Mul) // -inf * -inf = +inf, -inf * 0 = NaN; the empty product is 1
        return body == Finiteness::Finite ? Finiteness::Finite : Finiteness::Unknown;
      return nonEmpty ? body : Finiteness::Unknown; // the empty min is +inf
    }
    case TermKind::Apply:
      break;
    }
    bool anyFinite = false, allFinite = true, noneUnknown = true;
    for (auto &a : t->args) {
      Finiteness f = of(a);
      anyFinite |= f == Finiteness::Finite;
      allFinite &= f == Finiteness::Finite;
      noneUnknown &= f != Finiteness::Unknown;
    }
    switch (t->fn) {
    case Fn::Add: // no +inf among reals and -infs: no NaN
    case Fn::Min2:
      return allFinite ? Finiteness::Finite : noneUnknown ? Finiteness::FiniteOrNegInf : Finiteness::Unknown;
    case Fn::Max2:
      return !noneUnknown ? Finiteness::Unknown : anyFinite ? Finiteness::Finite : Finiteness::FiniteOrNegInf;
    case Fn::Exp: // exp(-inf) = 0
      return noneUnknown ? Finiteness::Finite : Finiteness::Unknown;
    case Fn::Mul:
    case Fn::Erf:
    case Fn::Tanh:
    case Fn::Sigmoid:
    case Fn::Relu:
    case Fn::Abs:
    case Fn::Cos:
    case Fn::Sin:
      return allFinite ? Finiteness::Finite : Finiteness::Unknown;
    default: // log(0), 1/0, sqrt(-1), opaque functions: not known finite
      return Finiteness::Unknown;
    }
  }
};

} // namespace

Finiteness ClassTable::finiteness(const Term &t) const { return FinitenessWalk{*this}.of(t); }

// A new class's finiteness, from what it is (classes are created after the
// classes their definitions read, so those facts are already there).
static Finiteness finitenessOf(const ClassTable &table, const ClassInfo &ci) {
  switch (ci.kind) {
  case ClassInfo::Leaf:
    return ci.abstractedReference ? Finiteness::Unknown : Finiteness::Finite; // inputs are reals
  case ClassInfo::Constant: {
    Finiteness f = Finiteness::Finite;
    for (double v : ci.data)
      f = join(f, ofConstant(v));
    return f;
  }
  case ClassInfo::Compute:
    return ci.def ? table.finiteness(ci.def) : Finiteness::Unknown;
  }
  return Finiteness::Unknown;
}

ClassId ClassTable::add(ClassInfo info) {
  info.finite = finitenessOf(*this, info);
  return addWithFacts(std::move(info));
}

ClassId ClassTable::addWithFacts(ClassInfo info) {
  // A class made inside a recorded computation is known to it by construction,
  // not through a recorded access: its result cannot be replayed by renaming.
  if (recording_)
    poisoned_ = true;
  ClassId id = static_cast<ClassId>(classes_.size());
  if (info.kind == ClassInfo::Compute && info.def) {
    addPieces(id, info.def, smt::Expr::boolConst(true));
    // The whole Select as well: a reference term with the same mask is one read.
    if (info.def->kind == ir::TermKind::Select)
      bySkeleton(info.def->skeleton).push_back({id, smt::Expr::boolConst(true), info.def});
  }
  classes_.push_back(std::move(info));
  return id;
}

ClassId ClassTable::intern(ClassInfo info, bool &created) {
  if (auto c = find(info.def, info.shape)) {
    created = false;
    return *c;
  }
  created = true;
  return addNew(std::move(info));
}

ClassId ClassTable::addNew(ClassInfo info) {
  info.finite = finitenessOf(*this, info);
  return addImage(std::move(info));
}

ClassId ClassTable::addImage(ClassInfo info) {
  size_t h = info.def->hash;
  ClassId id = addWithFacts(std::move(info));
  byHash_[key(h)].push_back(id);
  return id;
}

std::optional<ClassId> ClassTable::find(const Term &def, const ir::Shape &shape) const {
  auto it = byHash_.find(key(def->hash));
  if (it == byHash_.end())
    return std::nullopt;
  for (ClassId c : it->second)
    if (ir::sameTerm(classes_[c].def, def) && classes_[c].shape.same(shape))
      return c;
  return std::nullopt;
}

std::vector<ClassId> ClassTable::Recording::consulted() const {
  std::vector<ClassId> out(t_.log_.begin() + static_cast<std::ptrdiff_t>(start_), t_.log_.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<ClassTable::Piece> &ClassTable::bySkeleton(size_t skeleton) {
  auto [it, fresh] = skeletonAt_.try_emplace(key(skeleton), static_cast<unsigned>(skeletons_.size()));
  if (fresh)
    skeletons_.emplace_back();
  return skeletons_[it->second];
}

const std::vector<ClassTable::Piece> &ClassTable::withSkeleton(size_t skeleton) const {
  auto it = skeletonAt_.find(key(skeleton));
  return it == skeletonAt_.end() ? none_ : skeletons_[it->second];
}

ClassId ClassTable::constant(const std::string &label, const std::vector<int64_t> &dims,
                             const std::vector<double> &data) {
  size_t h = std::hash<size_t>()(dims.size());
  for (auto d : dims)
    h = h * 31 + std::hash<int64_t>()(d);
  for (auto v : data)
    h = h * 131 + std::hash<double>()(v);
  for (ClassId c : byContent_[key(h)])
    if (classes_[c].dataDims == dims && classes_[c].data == data)
      return c;
  ClassInfo info;
  info.kind = ClassInfo::Constant;
  info.label = label;
  for (auto d : dims)
    info.shape.dims.push_back(smt::Expr::intConst(d));
  info.data = data;
  info.dataDims = dims;
  ClassId id = add(std::move(info));
  byContent_[key(h)].push_back(id);
  return id;
}

} // namespace shardproof::relation
