// Attention scores of rotated q and k (RoPE) matched to a rank class: both
// sides are expanded to their Cos/Sin and compared in the rotary normal form
// (Trig.cpp). Candidates are the rank's score classes whose expansion can
// read what the reference term reads, so a layer does not expand every other
// layer's scores.
#include "Prover.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <unordered_set>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {
constexpr size_t kMaxExpandedNodes = 200000;
// Polynomial classes that are not rotary (a residual stream's adds, a norm's
// products) expanded in a row: enough for a scale or a norm applied on the
// other side of the rotation. Unbounded, a score's expansion followed the
// residual stream down through every layer below (530 nodes in the first
// layer of an 8-layer step, 1298 in the eighth) and its normal form grew
// with it, 6 s of that step's 41.
constexpr unsigned kPlainDepth = 2;
} // namespace

// A definition that is elementwise arithmetic (a rotated q is a Select on
// the rotary half over sums of products).
static bool polynomialTop(const Term &d) {
  if (d->kind == TermKind::Select)
    return polynomialTop(d->args[0]) || polynomialTop(d->args[1]);
  return d->kind == TermKind::Apply && (d->fn == Fn::Add || d->fn == Fn::Mul || isTrig(d));
}

static bool hasTrig(const Term &t);

// A class whose elements are a polynomial in Cos/Sin values: a rotary table,
// q * cos, the rotated q. `seen` bounds the walk.
bool Prover::rotaryClass(ClassId c, std::unordered_set<ClassId> &seen) const {
  if (!seen.insert(c).second || seen.size() > 512)
    return false;
  const ClassInfo &ci = classes_.peek(c);
  if (ci.kind != ClassInfo::Compute || !ci.def || !polynomialTop(ci.def))
    return false;
  if (hasTrig(ci.def))
    return true;
  std::vector<ClassId> reads;
  collectReads(ci.def, reads);
  for (ClassId r : reads)
    if (rotaryClass(r, seen))
      return true;
  return false;
}

bool Prover::rotaryClass(ClassId c) {
  if (auto it = rotaryClass_.find(c); it != rotaryClass_.end())
    return it->second;
  std::unordered_set<ClassId> seen;
  return rotaryClass_[c] = rotaryClass(c, seen);
}

static bool hasTrig(const Term &t) {
  if (isTrig(t))
    return true;
  for (auto &a : t->args)
    if (hasTrig(a))
      return true;
  return false;
}

// Reads of rotary classes replaced by their definitions, down to Cos/Sin and
// through their angles (a position table, inv_freq @ positions).
Term Prover::expandRotary(const Term &t, int level, bool angle, size_t &budget, unsigned plain) {
  if (budget == 0)
    return t;
  --budget;
  switch (t->kind) {
  case TermKind::Const:
    return t;
  case TermKind::Read: {
    const ClassInfo &ci = classes_[t->cls];
    if (ci.kind != ClassInfo::Compute || !ci.def)
      return t;
    const Term &d = ci.def;
    bool poly = polynomialTop(d);
    bool inAngle = angle && (d->kind != TermKind::Apply || d->fn == Fn::Add || d->fn == Fn::Mul);
    if (!poly && !inAngle)
      return t;
    unsigned next = plain;
    if (!inAngle && !rotaryClass(t->cls)) {
      if (plain == 0)
        return t;
      next = plain - 1;
    }
    Term inst = instantiate(d, indexVars("u", static_cast<unsigned>(ci.shape.rank())), t->idx, level);
    return expandRotary(inst, level, angle, budget, next);
  }
  case TermKind::Apply: {
    std::vector<Term> args;
    for (auto &a : t->args)
      args.push_back(expandRotary(a, level, angle || isTrig(t), budget, plain));
    return mkApply(t->fn, std::move(args), t->name);
  }
  case TermKind::Sum:
    return mkReduceLike(t, t->lo, t->hi, expandRotary(t->args[0], t->level + 1, angle, budget, plain));
  case TermKind::Select:
    return mkSelect(t->cond, expandRotary(t->args[0], level, angle, budget, plain),
                    expandRotary(t->args[1], level, angle, budget, plain));
  }
  return t;
}

// Classes a read of `c` can turn into under expandRotary, a superset (it
// ignores kPlainDepth; itself included:
// the budget may stop there), in the given angle mode. Class definitions never
// change, so this is kept per class; a residual stream's reach grows with the
// layers below it, a score's stays small (q, k, the rotary tables).
const std::vector<ClassId> &Prover::rotaryReach(ClassId c, bool angle) {
  uint64_t key = uint64_t(c) * 2 + (angle ? 1 : 0);
  if (auto it = rotaryReach_.find(key); it != rotaryReach_.end())
    return it->second;
  std::vector<ClassId> out{c};
  const ClassInfo &ci = classes_.peek(c);
  if (ci.kind == ClassInfo::Compute && ci.def) {
    const Term &d = ci.def;
    bool inAngle = angle && (d->kind != TermKind::Apply || d->fn == Fn::Add || d->fn == Fn::Mul);
    if (polynomialTop(d) || inAngle) {
      std::unordered_set<const TermNode *> seen;
      termReach(d, angle, seen, out);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return rotaryReach_[key] = std::move(out);
}

// The reach of every read in `t`, with the angle mode expandRotary would have there.
void Prover::termReach(const Term &t, bool angle, std::unordered_set<const TermNode *> &seen,
                       std::vector<ClassId> &out) {
  if (!seen.insert(t.get()).second)
    return;
  if (t->kind == TermKind::Read) {
    const std::vector<ClassId> &r = rotaryReach(t->cls, angle);
    out.insert(out.end(), r.begin(), r.end());
    return;
  }
  bool inner = angle || isTrig(t);
  for (auto &a : t->args)
    termReach(a, t->kind == TermKind::Apply ? inner : angle, seen, out);
}

// What rhs0 = expandRotary(instantiate(def of c)) can read, sorted.
const std::vector<ClassId> &Prover::rotaryDefReach(ClassId c) {
  if (auto it = rotaryDefReach_.find(c); it != rotaryDefReach_.end())
    return it->second;
  std::vector<ClassId> out;
  std::unordered_set<const TermNode *> seen;
  termReach(classes_.peek(c).def, false, seen, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return rotaryDefReach_[c] = std::move(out);
}

// A score class: a sum reading rotary values (kept per class).
bool Prover::rotaryScores(ClassId c) {
  if (auto it = rotaryScores_.find(c); it != rotaryScores_.end())
    return it->second;
  std::vector<ClassId> defReads;
  collectReads(classes_.peek(c).def, defReads);
  std::unordered_set<ClassId> seen;
  bool any = false;
  for (size_t i = 0; i < defReads.size() && !any; ++i)
    any = rotaryClass(defReads[i], seen);
  return rotaryScores_[c] = any;
}

// Reads that every branch of `t` has outside selects (sorted): acEqual pairs
// them structurally with reads of the other side, so a term equal to `t` on
// a feasible path reads them too.
void Prover::requiredReads(const Term &t, std::vector<ClassId> &out) {
  std::vector<ClassId> found;
  std::function<void(const Term &, std::vector<ClassId> &)> walk = [&](const Term &x, std::vector<ClassId> &acc) {
    switch (x->kind) {
    case TermKind::Read:
      acc.push_back(x->cls);
      return;
    case TermKind::Select: {
      std::vector<ClassId> a, b, both;
      walk(x->args[0], a);
      walk(x->args[1], b);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
      acc.insert(acc.end(), both.begin(), both.end());
      return;
    }
    default:
      for (auto &a : x->args)
        walk(a, acc);
    }
  };
  walk(t, found);
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  out = std::move(found);
}

// The expansions read class definitions the recording does not log (and scan
// every class), so a match found here cannot be replayed by a renaming: it
// poisons the recording. A search that finds nothing adds nothing to the
// cover's result, which rests on the logged accesses alone; reusing such a
// result elsewhere can at most leave a tensor unmatched that a fresh search
// would match (never a relation the derivation does not prove).
std::optional<Term> Prover::tryRotaryMatch(const Term &t, int level) {
  // Scores: a reduction, or reductions added (the rotary halves split apart).
  auto isSum = [](const Term &x) { return x->kind == TermKind::Sum && x->red == Fn::Add; };
  if (level != 0 || !(isSum(t) || (t->kind == TermKind::Apply && t->fn == Fn::Add &&
                                   std::any_of(t->args.begin(), t->args.end(), isSum))))
    return std::nullopt;
  // Only terms that meet rotary values: a Cos/Sin, or a read of a rotary class.
  bool rotary = hasTrig(t);
  std::vector<ClassId> reads;
  collectReads(t, reads);
  std::unordered_set<ClassId> seen;
  for (size_t i = 0; i < reads.size() && !rotary; ++i)
    rotary = rotaryClass(reads[i], seen);
  if (!rotary)
    return std::nullopt;
  // The reference tensor's rank: its element names i!0 .. i!(rank - 1).
  unsigned rank = 0;
  while (rank < 16 && mentionsVar(t, "i!" + std::to_string(rank)))
    ++rank;
  size_t budget = kMaxExpandedNodes;
  const bool unknownBefore = sawUnknown_;
  Term lhs0 = expandRotary(t, level, false, budget, kPlainDepth);
  if (budget == 0)
    return std::nullopt;
  auto lhs = trigCanonical(normalize(lhs0, level));
  if (!lhs)
    return std::nullopt;
  std::vector<ClassId> needed;
  requiredReads(*lhs, needed);
  std::vector<std::pair<Expr, Term>> pieces;
  Expr remaining = Expr::boolConst(true);
  for (ClassId c = 0; c < classes_.size(); ++c) {
    const ClassInfo &ci = classes_.peek(c);
    if (ci.kind != ClassInfo::Compute || !ci.def || ci.def->kind != TermKind::Sum || ci.def->red != Fn::Add ||
        ci.shape.rank() != rank)
      continue;
    if (!rotaryScores(c))
      continue;
    // Cheap and necessary: what the reference term reads outside any select
    // must be something the candidate's expansion can read.
    const std::vector<ClassId> &reach = rotaryDefReach(c);
    if (!std::all_of(needed.begin(), needed.end(),
                     [&](ClassId r) { return std::binary_search(reach.begin(), reach.end(), r); }))
      continue;
    IndexVec iv = indexVars("i", rank), at;
    Expr region;
    if (!sumSite(classes_[c], iv, at, region))
      continue;
    if (auto b = region.asBool(); b && !*b)
      continue;
    Scope s(*this, region);
    if (!feasible(remaining, "rotary.region"))
      continue;
    std::vector<Expr> inBounds;
    for (size_t d = 0; d < rank; ++d)
      inBounds.push_back(Expr::intConst(0) <= at[d] && at[d] < ci.shape.dims[d]);
    if (!implies(smt::conj(inBounds), "rotary.bounds"))
      continue;
    size_t b2 = kMaxExpandedNodes;
    Term rhs0 = expandRotary(instantiate(ci.def, indexVars("u", rank), at, level), level, false, b2, kPlainDepth);
    if (b2 == 0)
      continue;
    auto rhs = trigCanonical(normalize(rhs0, level));
    if (!rhs || !acEqual(*lhs, *rhs) || sawUnknown_ != unknownBefore)
      continue;
    Term read = mkRead(c, at);
    if (auto b = region.asBool(); b && *b) {
      classes_.poisonRecording();
      return read;
    }
    pieces.push_back({region, read});
    remaining = (remaining && !region).simplify();
  }
  if (pieces.empty() || feasible(remaining, "rotary.rest"))
    return std::nullopt;
  classes_.poisonRecording();
  return selectChain(std::move(pieces));
}

} // namespace shardproof::relation
