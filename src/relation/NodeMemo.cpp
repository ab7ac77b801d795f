#include "NodeMemo.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <cstring>

namespace shardproof::relation {

using namespace ir;

static size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

// The ops whose operands mkApply sorts (Term.cpp's sortAC).
static bool commutative(const Term &t) {
  return t->kind == TermKind::Apply && t->args.size() > 1 &&
         (t->fn == Fn::Add || t->fn == Fn::Mul || t->fn == Fn::Max2 || t->fn == Fn::Min2);
}

void MemoKey::word(uint64_t w) {
  words_.push_back(w);
  hash_ = mix(hash_, w);
}

void MemoKey::real(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  word(bits);
}

void MemoKey::str(const std::string &s) {
  strs_.push_back(s);
  hash_ = mix(hash_, std::hash<std::string>()(s));
}

void MemoKey::expr(const smt::Expr &e) {
  word(e.isValid() ? 1 : 0);
  if (!e.isValid())
    return;
  exprs_.push_back(e);
  hash_ = mix(hash_, e.id());
}

void MemoKey::shape(const std::optional<Shape> &s) {
  word(s ? s->rank() + 1 : 0);
  if (s)
    for (auto &d : s->dims)
      expr(d);
}

void MemoKey::term(const Term &t) {
  word(t ? 1 : 0);
  if (t)
    walk(t);
}

// Every field of every node, in a fixed order: equal word/expr/string
// sequences mean equal trees up to the local numbering of classes.
void MemoKey::walk(const Term &t) {
  if (++nodes_ > kMaxNodes) {
    usable_ = false;
    return;
  }
  word(static_cast<uint64_t>(t->kind));
  switch (t->kind) {
  case TermKind::Const:
    real(t->value);
    break;
  case TermKind::Read: {
    auto [it, fresh] = local_.try_emplace(t->cls, static_cast<unsigned>(classes_.size()));
    if (fresh)
      classes_.push_back(t->cls);
    word(it->second);
    word(t->idx.size());
    for (auto &e : t->idx)
      expr(e);
    break;
  }
  case TermKind::Apply:
    word(static_cast<uint64_t>(t->fn));
    str(t->name);
    break;
  case TermKind::Sum:
    expr(t->lo);
    expr(t->hi);
    word(static_cast<uint64_t>(t->level));
    word(static_cast<uint64_t>(t->red));
    break;
  case TermKind::Select:
    expr(t->cond);
    break;
  }
  word(t->args.size());
  if (!commutative(t)) {
    for (auto &a : t->args)
      if (usable_)
        walk(a);
    return;
  }
  // Operands of a commutative op are sorted by class ids (mkAdd), which differ
  // from layer to layer; walked by their form instead, two layers' sums of the
  // same pieces get one key. Operands of equal form keep their order (forms
  // include the classes' ranks when the key has the table).
  llvm::SmallVector<std::pair<size_t, unsigned>, 8> order;
  for (unsigned i = 0; i < t->args.size(); ++i)
    order.push_back({formHash(t->args[i]), i});
  std::stable_sort(order.begin(), order.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (auto &[form, i] : order)
    if (usable_)
      walk(t->args[i]);
}

// The term's hash with every class left out, operands of commutative ops
// combined in sorted order: equal for two layers' terms up to renaming.
size_t MemoKey::formHash(const Term &t) {
  if (auto it = forms_.find(t.get()); it != forms_.end())
    return it->second;
  size_t h = mix(static_cast<size_t>(t->kind), t->args.size());
  switch (t->kind) {
  case TermKind::Const:
    h = mix(h, std::hash<double>()(t->value));
    break;
  case TermKind::Read:
    for (auto &e : t->idx)
      h = mix(h, e.id());
    // Only orders operands: any order gives a sound key (a hit still needs
    // equal words, and a commutative op's operands may come in any order).
    if (facts_)
      h = mix(h, static_cast<size_t>(facts_->peek(t->cls).rank + 2));
    break;
  case TermKind::Apply:
    h = mix(mix(h, static_cast<size_t>(t->fn)), std::hash<std::string>()(t->name));
    break;
  case TermKind::Sum:
    h = mix(mix(h, t->lo.id()), t->hi.id());
    h = mix(mix(h, static_cast<size_t>(t->level)), static_cast<size_t>(t->red));
    break;
  case TermKind::Select:
    h = mix(h, t->cond.id());
    break;
  }
  llvm::SmallVector<size_t, 8> args;
  for (auto &a : t->args)
    args.push_back(formHash(a));
  if (commutative(t))
    std::sort(args.begin(), args.end());
  for (size_t a : args)
    h = mix(h, a);
  forms_.try_emplace(t.get(), h);
  return h;
}

bool MemoKey::sameForm(const MemoKey &o) const {
  if (hash_ != o.hash_ || words_ != o.words_ || strs_ != o.strs_ || exprs_.size() != o.exprs_.size())
    return false;
  for (size_t i = 0; i < exprs_.size(); ++i)
    if (!exprs_[i].same(o.exprs_[i]))
      return false;
  return true;
}

bool MemoKey::namesClasses() const {
  for (auto &e : exprs_)
    if (e.hasApp())
      return true;
  return false;
}

bool Renaming::bind(ClassId from, ClassId to) {
  auto [it, fresh] = map_.try_emplace(from, to);
  return fresh || it->second == to;
}

Term Renaming::apply(const Term &t) const {
  if (map_.empty())
    return t;
  if (t->kind == TermKind::Read) { // most values: one read of their class
    ClassId c = (*this)(t->cls);
    return c == t->cls ? t : withClass(t, c);
  }
  return renameClasses(t, [this](ClassId c) { return (*this)(c); });
}

// Every fact of a class but its name, node and members (ClassInfo); a fact
// added there must be compared here.
bool sameClassFacts(const ClassInfo &a, const ClassInfo &b) {
  if (a.kind != b.kind || a.rank != b.rank || !a.shape.same(b.shape) || a.exactValue != b.exactValue ||
      a.abstractedReference != b.abstractedReference || a.finite != b.finite || a.dataDims != b.dataDims ||
      a.data != b.data ||
      a.valueRange.has_value() != b.valueRange.has_value() || (a.def == nullptr) != (b.def == nullptr))
    return false;
  if (a.valueRange && (!a.valueRange->first.same(b.valueRange->first) ||
                       !a.valueRange->second.same(b.valueRange->second)))
    return false;
  if (a.elements.size() != b.elements.size())
    return false;
  for (size_t i = 0; i < a.elements.size(); ++i)
    if (!a.elements[i].same(b.elements[i]))
      return false;
  return true;
}

// Extends a renaming from the key's classes to every class a stored
// computation consulted, checking each counterpart has the same facts.
struct Extender {
  const std::vector<ClassId> &consulted; // ascending
  Renaming &sigma;
  const ClassTable &classes;
  llvm::SmallDenseSet<ClassId, 32> settled;

  bool isConsulted(ClassId c) const { return std::binary_search(consulted.begin(), consulted.end(), c); }

  // Positional unification of two definitions: equal but for the classes
  // read, which sigma must map from a's to b's (extended where unmapped; a
  // subterm both share must read classes sigma fixes).
  bool unify(const Term &a, const Term &b) {
    return sameTermUpToReads(a, b, [&](ClassId x, ClassId y) { return sigma.bind(x, y); });
  }

  bool settle(ClassId c) {
    if (!settled.insert(c).second)
      return true;
    const ClassInfo &a = classes.peek(c);
    if (!sigma.has(c)) {
      if (a.kind != ClassInfo::Compute || !a.def)
        return sigma.bind(c, c); // a leaf or constant the inputs do not read: itself
      // A class the computation found (a rank tensor matching a reference
      // term): its counterpart computes the renamed definition.
      std::vector<ClassId> reads;
      collectReads(a.def, reads);
      for (ClassId r : reads)
        if (!sigma.has(r) && !(isConsulted(r) ? settle(r) : sigma.bind(r, r)))
          return false;
      auto found = classes.find(sigma.apply(a.def), a.shape);
      if (!found || !sigma.bind(c, *found))
        return false;
      return sameClassFacts(a, classes.peek(*found));
    }
    const ClassInfo &b = classes.peek(sigma(c));
    if (!sameClassFacts(a, b))
      return false;
    return a.kind != ClassInfo::Compute || !a.def || unify(a.def, b.def);
  }

  bool run() {
    // Classes the inputs map first: unifying their definitions maps the
    // classes those read (a weight), which identity must not claim first.
    for (bool progress = true; progress;) {
      progress = false;
      for (ClassId c : consulted)
        if (!settled.count(c) && sigma.has(c)) {
          if (!settle(c))
            return false;
          progress = true;
        }
    }
    for (ClassId c : consulted)
      if (!settle(c))
        return false;
    return true;
  }
};

bool extendRenaming(const std::vector<ClassId> &consulted, Renaming &sigma, const ClassTable &classes) {
  return Extender{consulted, sigma, classes, {}}.run();
}

bool NodeMemo::extend(const Entry &e, Renaming &sigma, const ClassTable &classes) const {
  return extendRenaming(e.consulted, sigma, classes);
}

std::optional<std::pair<const NodeMemo::Result *, Renaming>> NodeMemo::lookup(const MemoKey &key,
                                                                                const ClassTable &classes) {
  if (!key.usable())
    return std::nullopt;
  auto it = entries_.find(key.hash());
  if (it == entries_.end())
    return std::nullopt;
  // Newest first: the same node one layer down, on the same rank, was stored last.
  for (auto e_it = it->second.rbegin(); e_it != it->second.rend(); ++e_it) {
    const Entry &e = *e_it;
    if (!e.key.sameForm(key))
      continue;
    Renaming sigma;
    bool ok = true;
    for (size_t i = 0; ok && i < key.classes().size(); ++i)
      ok = sigma.bind(e.key.classes()[i], key.classes()[i]);
    if (ok && extend(e, sigma, classes)) {
      ++hits_;
      // The reused result rests on the counterparts of what the stored one
      // consulted: an enclosing recording (a layer, LayerCopy.h) must know them.
      for (ClassId c : e.consulted)
        (void)classes[sigma(c)];
      return std::make_pair(&e.result, std::move(sigma));
    }
  }
  return std::nullopt;
}

void NodeMemo::store(MemoKey key, std::vector<ClassId> consulted, Result result) {
  if (!key.usable() || key.namesClasses())
    return;
  // The result's expressions, walked as a key's are: none may name a class
  // (a data-dependent read, or a data-dependent op's bounds and values).
  MemoKey out;
  for (auto &t : result.terms)
    out.term(t);
  if (const auto &r = result.op) {
    for (auto &s : r->shapes)
      out.shape(s);
    for (auto &v : r->values)
      if (v)
        for (auto &e : v->vals)
          out.expr(e);
    if (r->state)
      r->state->forEachExpr([&](const smt::Expr &e) { out.expr(e); });
    for (auto &o : r->obligations)
      out.expr(o.cond);
  }
  if (!out.usable() || out.namesClasses())
    return;
  // A full bucket drops its oldest entry: a layer's node on each of P ranks
  // fills P entries (ranks differ in consulted classes), and the first
  // layer's never match the next (their input is the embedding, not a
  // residual add). Dropping the newest instead kept only those, and every
  // later layer missed.
  auto &bucket = entries_[key.hash()];
  if (bucket.size() >= kBucketEntries)
    bucket.erase(bucket.begin());
  ++stored_;
  bucket.push_back({std::move(key), std::move(consulted), std::move(result)});
}

} // namespace shardproof::relation
