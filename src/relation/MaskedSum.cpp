// A select on data that a reduction over ranks computes: Megatron's masked
// lookups. Rank r looks up only the ids in its vocab range and zeroes the
// rest; the all-reduce adds them. Where the masks partition the range of ids,
// that sum equals the reference's select on the id (`id < 5 ? W@0[id] :
// W@1[id - 5]`), but no class definition has that select's shape: the
// all-reduce is a sum of masked selects (normalized into a select tree on the
// masks, the combinations the value range rules out pruned), or a sum of
// reads of masked classes. This match takes such a class whole, expands its
// masked addends one layer, and proves it equal to the reference's select on
// the path (the select conditions are decided under the value range).
// Under sequence parallelism the masked lookups are reduce-scattered along the
// sequence: rank r's class holds chunk r of the sum, and the reference select
// is the concatenation of those classes, each proven equal on its chunk.
#include "Prover.h"

#include <algorithm>
#include <cmath>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

static bool selectOnData(const Term &t) { return t->kind == TermKind::Select && t->cond.hasApp(); }

// The classes a masked reduction's value is read from, or none if `c` is not
// one: a select tree on data (masked addends already merged), or a sum of
// reads of computed classes at least one of which is such a select.
static std::vector<ClassId> maskedLeaves(const ClassTable &classes, ClassId c) {
  const ClassInfo &ci = classes[c];
  std::vector<ClassId> reads;
  if (ci.kind != ClassInfo::Compute || !ci.def)
    return reads;
  if (selectOnData(ci.def)) {
    collectReads(ci.def, reads);
  } else if (ci.def->kind == TermKind::Apply && ci.def->fn == Fn::Add && ci.def->args.size() >= 2) {
    bool masked = false;
    for (auto &a : ci.def->args) {
      if (a->kind != TermKind::Read || classes[a->cls].kind != ClassInfo::Compute)
        return {};
      masked |= selectOnData(classes[a->cls].def);
    }
    if (!masked)
      return {};
    for (auto &a : ci.def->args)
      collectReads(classes[a->cls].def, reads);
  }
  std::sort(reads.begin(), reads.end());
  return reads;
}

// Where class `c` holds the reference tensor's element at `iv`: the same index
// on every axis the class is as long as (an all-reduce leaves the whole tensor
// on every rank); on a shorter axis of a rank's own class, chunk `rank` of it
// (a reduce-scatter hands rank r the r-th of P equal chunks, in rank order),
// inside that chunk. Only a guess: the caller proves the values equal there.
bool Prover::sumSite(const ClassInfo &ci, const IndexVec &iv, IndexVec &at, Expr &region) {
  std::vector<Expr> inChunk;
  for (size_t d = 0; d < iv.size(); ++d) {
    const Expr &n = ci.shape.dims[d];
    if (implies(iv[d] < n, "masked.bounds")) {
      at.push_back(iv[d]);
      continue;
    }
    if (ci.rank < 0)
      return false;
    Expr first = (Expr::intConst(ci.rank) * n).simplify();
    at.push_back((iv[d] - first).simplify());
    inChunk.push_back(first <= iv[d]);
    inChunk.push_back(iv[d] < first + n);
  }
  region = simplifyCond(smt::conj(inChunk));
  return true;
}

std::optional<Term> Prover::tryMaskedSum(const Term &t, int level) {
  if (level != 0 || !selectOnData(t))
    return std::nullopt;
  // maskedSums_ is derived from class definitions outside any recording.
  classes_.poisonRecording();
  for (ClassId c = static_cast<ClassId>(maskedSums_.size()); c < classes_.size(); ++c)
    maskedSums_.push_back(maskedLeaves(classes_, c));
  std::vector<ClassId> want;
  collectReads(t, want);
  std::sort(want.begin(), want.end());
  std::vector<std::pair<Expr, Term>> pieces; // (where, the class read there), each proven
  Expr remaining = Expr::boolConst(true);
  for (ClassId c = 0; c < maskedSums_.size(); ++c) {
    const auto &have = maskedSums_[c];
    if (have.empty() || !std::includes(have.begin(), have.end(), want.begin(), want.end()))
      continue;
    const ClassInfo &ci = classes_[c];
    IndexVec iv = indexVars("i", static_cast<unsigned>(ci.shape.rank())), at;
    Expr region;
    if (!sumSite(ci, iv, at, region))
      continue;
    if (auto b = region.asBool(); b && !*b)
      continue;
    Scope s(*this, region);
    if (!feasible(remaining, "masked.region"))
      continue;
    Term read = mkRead(c, at);
    Term expanded = expandAt(read, c, level);
    if (!selectOnData(ci.def))
      for (auto &a : ci.def->args)
        expanded = expandAt(expanded, a->cls, level);
    expanded = normalize(expanded, level);
    bool before = sawUnknown_;
    if (!equal(t, expanded, level) || (sawUnknown_ && !before))
      continue;
    if (auto b = region.asBool(); b && *b)
      return read; // the whole tensor (an all-reduce)
    pieces.push_back({region, read});
    remaining = (remaining && !region).simplify();
  }
  // A concatenation over ranks (a reduce-scatter): only when the chunks proven
  // cover every index on the path.
  if (pieces.empty() || feasible(remaining, "masked.rest"))
    return std::nullopt;
  return selectChain(std::move(pieces));
}

// --- Columns masked with -inf ----------------------------------------------------
// where(mask, -inf, logits) - m: in the masked columns the term is -inf + (-m),
// which is -inf exactly when -m is finite (a real), and not when m can be
// -inf itself (-inf - (-inf) is NaN: a max over masked columns only). So the
// fold asks every other addend to be finite, from the terms and the facts of
// the classes they read (ClassInfo::finite).
Term Prover::foldNegInfSum(const Term &t) const {
  if (t->kind != TermKind::Apply || t->fn != Fn::Add)
    return t;
  auto isNegInf = [](const Term &a) { return a->kind == TermKind::Const && std::isinf(a->value) && a->value < 0; };
  if (std::none_of(t->args.begin(), t->args.end(), isNegInf))
    return t;
  for (auto &a : t->args)
    if (!isNegInf(a) && classes_.finiteness(a) != Finiteness::Finite)
      return t;
  return mkConst(-INFINITY);
}

} // namespace shardproof::relation
