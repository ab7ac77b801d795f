// Where a shallow probe cuts (Replayer::cutBelow): the classes it evaluates
// exactly when it compares a reference tensor's term with the ranks' terms.
#include "Replayer.h"

#include <llvm/ADT/DenseMap.h>

#include <functional>
#include <unordered_set>

namespace shardproof::relation {

using namespace ir;

namespace {

// The classes `terms` read, and the classes their definitions read, down to
// `levels` definitions below.
std::set<ClassId> classesNear(const ClassTable &classes, const std::vector<Term> &terms, unsigned levels) {
  std::set<ClassId> near;
  std::vector<ClassId> frontier;
  std::unordered_set<const TermNode *> seen; // terms are DAGs: each shared subterm once
  std::function<void(const Term &)> walk = [&](const Term &t) {
    if (!seen.insert(t.get()).second)
      return;
    if (t->kind == TermKind::Read && near.insert(t->cls).second)
      frontier.push_back(t->cls);
    for (const Term &u : t->args)
      walk(u);
  };
  for (const Term &t : terms)
    walk(t);
  for (unsigned l = 0; l < levels && !frontier.empty(); ++l)
    for (ClassId c : std::exchange(frontier, {}))
      if (classes[c].kind == ClassInfo::Compute)
        walk(classes[c].def);
  return near;
}

// Whether `t` sums over an index (each shared subterm visited once).
bool sums(const Term &t, llvm::DenseMap<const TermNode *, bool> &seen) {
  auto [it, fresh] = seen.try_emplace(t.get(), false);
  if (!fresh)
    return it->second;
  bool s = t->kind == TermKind::Sum;
  for (const Term &u : t->args)
    s = s || sums(u, seen);
  seen[t.get()] = s;
  return s;
}

} // namespace

// A class both sides read enters both alike: pseudo-random numbers for it
// show a difference above it as well as its exact values would. A reduction
// is where the cost is: at the 405B shape's LM end the loss's proposal read
// every token's 1024 logits of 256 products each, 5.6 M steps exact, past the
// probe's budget, against 9,000 with the logits cut. Other shared classes
// stay exact where they are near: a mask's 0/1 values or a normalizer's sign
// are facts a comparison above them may rest on, which pseudo-random numbers
// would not keep.
std::set<ClassId> shallowCut(const ClassTable &classes, const Term &a, const std::vector<Term> &sides,
                             unsigned levels) {
  std::set<ClassId> nearA = classesNear(classes, {a}, levels), nearB = classesNear(classes, sides, levels);
  std::set<ClassId> exact = nearA;
  exact.insert(nearB.begin(), nearB.end());
  llvm::DenseMap<const TermNode *, bool> seen;
  for (auto it = exact.begin(); it != exact.end();) {
    const ClassInfo &ci = classes[*it];
    if (ci.kind == ClassInfo::Compute && nearA.count(*it) && nearB.count(*it) && sums(ci.def, seen))
      it = exact.erase(it);
    else
      ++it;
  }
  return exact;
}

} // namespace shardproof::relation
