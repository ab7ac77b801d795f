#include "Prover.h"

#include "shardproof/support/Error.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

// Ids are stable while the key holds the ASTs alive, so comparing them is exact.
bool Prover::QueryKey::operator==(const QueryKey &o) const {
  if (path.size() != o.path.size() || !cond.same(o.cond))
    return false;
  for (size_t i = 0; i < path.size(); ++i)
    if (!path[i].same(o.path[i]))
      return false;
  return true;
}

size_t Prover::QueryKeyHash::operator()(const QueryKey &k) const {
  size_t h = k.cond.id();
  for (auto &p : k.path)
    h = h * 1000003u ^ p.id();
  return h;
}

bool Prover::implies(const Expr &cond, const char *query) {
  Expr c = cond.simplify();
  if (auto b = c.asBool())
    return *b;
  for (auto &p : path_)
    if (p.same(c))
      return true;
  QueryKey key{path_, c};
  if (auto it = impliesCache_.find(key); it != impliesCache_.end()) {
    ++cacheHits_;
    return it->second;
  }
  smt::Proof pr = solver_.prove(query, smt::implies(pathCond(), c), /*wantCounterexample=*/false);
  if (pr.status == smt::Proof::Unknown) {
    sawUnknown_ = true;
    unknownReason_ = std::string(query) + ": " + pr.reason;
  }
  bool r = pr.proved();
  impliesCache_[key] = r;
  return r;
}

bool Prover::feasible(const Expr &cond, const char *query) {
  Expr c = cond.simplify();
  if (auto b = c.asBool(); b && !*b)
    return false;
  QueryKey key{path_, c};
  if (auto it = feasibleCache_.find(key); it != feasibleCache_.end()) {
    ++cacheHits_;
    return it->second;
  }
  smt::CheckResult r = solver_.check(query, pathCond() && c, /*wantModel=*/false);
  bool f = r.result != smt::Result::Unsat; // unknown counts as feasible: keeps the region
  feasibleCache_[key] = f;
  return f;
}

Expr Prover::simplifyCond(const Expr &cond) {
  Expr c = cond.simplify();
  if (c.asBool())
    return c;
  QueryKey key{path_, c};
  if (auto it = simplifyCache_.find(key); it != simplifyCache_.end()) {
    ++cacheHits_;
    return it->second;
  }
  Expr r = simplifyConjuncts(c);
  simplifyCache_.emplace(std::move(key), r);
  return r;
}

Expr Prover::simplifyConjuncts(const Expr &c0) {
  // Under the path's ranges, k mod 4 with 0 <= k < 4 is k: a shard's index
  // then reads like the rank's own (a rotary half of one head per rank).
  Expr c = smt::dropModuli(c0, [&](const Expr &x, int64_t m) {
             return implies(Expr::intConst(0) <= x && x < Expr::intConst(m), "cond.modulus");
           }).simplify();
  if (c.asBool())
    return c;
  std::vector<Expr> keep;
  for (auto &part : c.conjuncts()) {
    if (implies(part, "cond.simplify"))
      continue;
    if (implies(!part, "cond.simplify"))
      return Expr::boolConst(false);
    keep.push_back(projectIndices(part));
  }
  return smt::conj(keep).simplify();
}

// A bound on a flattened index, 4*h + d < 6 with 0 <= d < 2 on the path, is a
// bound on the head alone (h < 2): try dropping each index variable (set to
// 0) and keep the result only if the solver proves it equivalent on the path.
Expr Prover::projectIndices(const Expr &part) {
  std::vector<std::string> idx;
  for (auto &n : part.vars())
    if (n.rfind("i!", 0) == 0)
      idx.push_back(n);
  if (idx.size() < 2 || !(part.asCmp() || (part.asNot() && part.asNot()->asCmp())))
    return part;
  for (auto &w : idx) {
    // An index a data read takes (labels(i!0, i!1) >= 640): set to 0 it reads
    // another element, which the solver would take long to show may differ.
    if (part.mentionsInApplication(w))
      continue;
    Expr cand = part.substitute({Expr::intVar(w)}, {Expr::intConst(0)}).simplify();
    if (cand.asBool())
      continue;
    if (implies((part && cand) || (!part && !cand), "cond.project"))
      return cand;
  }
  return part;
}

// c <=> k < m (first = true) or c <=> k >= m (first = false), for the bound variable k.
static std::optional<std::pair<Expr, bool>> splitPoint(const Expr &cond, const std::string &k) {
  bool negate = false;
  Expr c = cond;
  if (auto n = c.asNot()) {
    negate = true;
    c = *n;
  }
  auto cmp = c.asCmp();
  if (!cmp)
    return std::nullopt;
  auto [op, a, b] = *cmp;
  auto aff = (a - b).simplify().affineIn(k);
  if (!aff || aff->first == 0)
    return std::nullopt;
  using C = Expr::Cmp;
  if (aff->first != 1 && aff->first != -1) {
    // c*k + r OP 0 with |c| > 1 (a row of a shard padded to a multiple: 2*k
    // < seq + 1): over the integers, c*k + r < 0 <=> k < ceil(-r / c) for c > 0.
    int64_t c = aff->first;
    Expr r = aff->second;
    if (c < 0) { // -c*k - r flips the comparison
      c = -c;
      r = -r;
      op = op == C::LT ? C::GT : op == C::LE ? C::GE : op == C::GT ? C::LT : op == C::GE ? C::LE : op;
    }
    Expr cc = Expr::intConst(c), lt = smt::ceilDiv(-r, cc), le = smt::ceilDiv(Expr::intConst(1) - r, cc);
    std::optional<std::pair<Expr, bool>> out;
    switch (op) {
    case C::LT: out = {lt, true}; break;  // c*k + r < 0
    case C::LE: out = {le, true}; break;  // c*k + r - 1 < 0
    case C::GT: out = {le, false}; break; // not (c*k + r <= 0)
    case C::GE: out = {lt, false}; break; // not (c*k + r < 0)
    default: return std::nullopt;
    }
    return std::make_pair(out->first.simplify(), negate ? !out->second : out->second);
  }
  Expr rest = aff->second;
  Expr m;
  bool less;
  if (aff->first == 1) { // k + rest OP 0
    switch (op) {
    case C::LT: m = -rest; less = true; break;
    case C::LE: m = Expr::intConst(1) - rest; less = true; break;
    case C::GT: m = Expr::intConst(1) - rest; less = false; break;
    case C::GE: m = -rest; less = false; break;
    default: return std::nullopt;
    }
  } else { // -k + rest OP 0
    switch (op) {
    case C::LT: m = rest + 1; less = false; break;
    case C::LE: m = rest; less = false; break;
    case C::GT: m = rest; less = true; break;
    case C::GE: m = rest + 1; less = true; break;
    default: return std::nullopt;
    }
  }
  return std::make_pair(m.simplify(), negate ? !less : less);
}

Term Prover::normalize(const Term &t, int level) {
  ++rewriteSteps_;
  switch (t->kind) {
  case TermKind::Const:
  case TermKind::Read:
    return t;
  case TermKind::Select: {
    Expr c = simplifyCond(t->cond);
    if (auto b = c.asBool())
      return normalize(t->args[*b ? 0 : 1], level);
    if (implies(!c, "select.resolve"))
      return normalize(t->args[1], level);
    Term a, b;
    {
      Scope s(*this, c);
      a = normalize(t->args[0], level);
    }
    {
      Scope s(*this, !c);
      b = normalize(t->args[1], level);
    }
    return mkSelect(c, a, b);
  }
  case TermKind::Apply: {
    std::vector<Term> args;
    for (auto &a : t->args)
      args.push_back(normalize(a, level));
    return applyNormalized(t, std::move(args), level);
  }
  case TermKind::Sum:
    return normalizeSum(t, level);
  }
  return t;
}

// `t`'s function applied to `args`, each normalized under the path. Index
// selects move to the top, so every leaf of the result is Select-free. A
// lifted select's branches were normalized under its condition already; the
// other arguments are normalized again under it only where it can say
// something about them: a sequence shard's bound says nothing about a
// weight shard's feature bound (an SP activation's 8 branches times a TP
// weight's 8 were each normalized again under the other's conditions).
Term Prover::applyNormalized(const Term &t, std::vector<Term> args, int level) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->kind != TermKind::Select)
      continue;
    const Expr c = args[i]->cond;
    Term sides[2];
    for (int branch = 0; branch < 2; ++branch) {
      Scope s(*this, branch == 0 ? c : !c);
      std::vector<Term> in = args;
      in[i] = args[i]->args[branch];
      std::optional<LinkedVars> linked;
      for (size_t j = 0; j < in.size(); ++j) {
        if (j == i)
          continue;
        if (!linked)
          linked = linkedVars(c);
        if (linked->reach(in[j]))
          in[j] = normalize(in[j], level);
      }
      sides[branch] = applyNormalized(t, std::move(in), level);
    }
    return mkSelect(c, sides[0], sides[1]);
  }
  return cancelSoftmaxShift(foldNegInfSum(mkApply(t->fn, std::move(args), t->name)));
}

static bool isIndexVar(const std::string &v) { return v.rfind("i!", 0) == 0 || v.rfind("k!", 0) == 0; }

// The variables adding `c` to the path can constrain: its own, and those of
// every path condition that shares one with them, to a fixpoint. Sizes count
// as linked to each other (the spec's facts relate them), and a condition on
// data (token ids) as linked to everything.
Prover::LinkedVars Prover::linkedVars(const Expr &c) const {
  LinkedVars l;
  l.all = !c.functions().empty();
  if (l.all)
    return l;
  auto take = [&](const std::vector<std::string> &vs) {
    for (const std::string &v : vs) {
      l.sizes |= !isIndexVar(v);
      l.vars.insert(v);
    }
  };
  take(c.vars());
  std::vector<std::vector<std::string>> pathVars;
  for (const Expr &p : path_)
    pathVars.push_back(p.vars());
  std::vector<bool> taken(path_.size(), false);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t p = 0; p < path_.size(); ++p)
      if (!taken[p] && std::any_of(pathVars[p].begin(), pathVars[p].end(), [&](const std::string &v) {
            return l.vars.count(v) || (l.sizes && !isIndexVar(v));
          })) {
        taken[p] = grew = true;
        take(pathVars[p]);
      }
  }
  return l;
}

// Could normalizing `t` under the linked condition differ from before?
// Only its selects' conditions and its reductions' bounds depend on the path
// (a read's indices are left as they are), so only they are looked at. A
// wrong "no" would only leave a branch unpruned: the term stays exact.
bool Prover::LinkedVars::reach(const Term &t) const {
  if (all)
    return true;
  auto touches = [&](const Expr &e) {
    if (sizes && !e.functions().empty())
      return true;
    for (const std::string &v : e.vars())
      if (vars.count(v) || (sizes && !isIndexVar(v)))
        return true;
    return false;
  };
  switch (t->kind) {
  case TermKind::Const:
  case TermKind::Read: return false;
  case TermKind::Sum:
    if (touches(t->lo) || touches(t->hi))
      return true;
    break;
  case TermKind::Select:
    if (touches(t->cond))
      return true;
    break;
  case TermKind::Apply: break;
  }
  return std::any_of(t->args.begin(), t->args.end(), [&](const Term &a) { return reach(a); });
}

// A split point of the bound variable from a condition below the top of a
// Select tree, strictly inside (lo, hi) so each part is smaller.
std::optional<Expr> Prover::innerSplitPoint(const Term &body, const std::string &k, const Expr &lo, const Expr &hi) {
  std::vector<const Term *> stack{&body};
  for (int visited = 0; !stack.empty() && visited < 64; ++visited) {
    const Term &t = *stack.back();
    stack.pop_back();
    if (t->kind != TermKind::Select)
      continue;
    if (t->cond.mentions(k))
      if (auto sp = splitPoint(t->cond, k); sp && !sp->first.mentions(k) &&
                                                implies(lo < sp->first && sp->first < hi, "sum.split"))
        return sp->first;
    stack.push_back(&t->args[0]);
    stack.push_back(&t->args[1]);
  }
  return std::nullopt;
}

// A select that is zero except where the bound variable k equals an
// expression e free of k: (e, the term there).
static std::optional<std::pair<Expr, Term>> onePoint(const Term &sel, const std::string &k) {
  bool negated = false;
  Expr c = sel->cond;
  if (auto n = c.asNot()) {
    negated = true;
    c = *n;
  }
  auto cmp = c.asCmp();
  if (!cmp || std::get<0>(*cmp) != Expr::Cmp::EQ)
    return std::nullopt;
  const Term &there = sel->args[negated ? 1 : 0], &elsewhere = sel->args[negated ? 0 : 1];
  if (elsewhere->kind != TermKind::Const || elsewhere->value != 0)
    return std::nullopt;
  auto aff = (std::get<1>(*cmp) - std::get<2>(*cmp)).simplify().affineIn(k);
  if (!aff || (aff->first != 1 && aff->first != -1))
    return std::nullopt;
  // k + r == 0 gives k = -r; -k + r == 0 gives k = r.
  Expr e = (aff->first == 1 ? -aff->second : aff->second).simplify();
  if (e.mentions(k))
    return std::nullopt;
  return std::make_pair(e, there);
}

// Nested reductions being normalized (splitting stops at 64).
static thread_local int sumDepth = 0;
struct SumDepthGuard {
  SumDepthGuard() { ++sumDepth; }
  ~SumDepthGuard() { --sumDepth; }
};

Term Prover::normalizeSum(const Term &t, int level) {
  SumDepthGuard guard;
  const int L = t->level;
  const Expr k = boundVar(L);
  Term body;
  {
    Scope s(*this, t->lo <= k && k < t->hi);
    body = normalize(t->args[0], L + 1);
  }
  return reduceNormalized(t, std::move(body), level);
}

// The reduction `t` over `body`, normalized under the path and `t`'s range.
Term Prover::reduceNormalized(const Term &t, Term body, int level) {
  int L = t->level;
  Expr k = boundVar(L);
  std::string kName = "k!" + std::to_string(L);
  Expr lo = t->lo, hi = t->hi;
  if (body->kind == TermKind::Select && t->red == Fn::Add)
    if (auto point = onePoint(body, kName)) {
      // Summing a one-hot over its columns (the log-softmax gradient's
      // sum of the target's one-hot) reads the one column there is:
      // sum_k (k == e ? x(k) : 0) = (lo <= e < hi ? x(e) : 0).
      Term at = relevel(substitute(point->second, {k}, {point->first}), L + 1, -1);
      return normalize(mkSelect(lo <= point->first && point->first < hi, at, mkConst(0)), level);
    }
  if (body->kind == TermKind::Select && sumDepth < 64) {
    const Expr c = body->cond;
    if (!c.mentions(kName)) {
      // The branches are normal under c already: each becomes a reduction
      // as it is (normalizing them again, under the same conditions in
      // another order, missed every cache: with the lifting above, a
      // first-layer MatMul of the TP8 + SP step took 0.2 s, now 0.05 s).
      Term sides[2];
      for (int branch = 0; branch < 2; ++branch) {
        Scope s(*this, branch == 0 ? c : !c);
        sides[branch] = reduceNormalized(t, body->args[branch], level);
      }
      return mkSelect(c, sides[0], sides[1]);
    }
    if (auto sp = splitPoint(c, kName)) {
      // The reduction range splits where the condition flips: sum over [lo, m) of
      // one branch plus sum over [m, hi) of the other (for a max binder, the max
      // of the two maxima: a sharded max is the max all-reduce of partial maxima).
      Expr m = sp->first;
      Term first = sp->second ? body->args[0] : body->args[1];
      Term second = sp->second ? body->args[1] : body->args[0];
      Term split = mkApply(t->red, {mkReduceLike(t, lo, m, first), mkReduceLike(t, m, hi, second)});
      // Where the switch point may fall outside the range (it depends on outer
      // indices, e.g. which head), split the cases on those indices instead of
      // clamping: each case is then a plain sum the matcher can recognise.
      // Strict bounds: a switch point that lands exactly on lo or hi (one head
      // per rank) becomes a whole sum, and an impossible middle case is pruned.
      if (!implies(m < hi, "sum.split"))
        split = mkSelect(m >= hi, mkReduceLike(t, lo, hi, first), split);
      if (!implies(lo < m, "sum.split"))
        split = mkSelect(m <= lo, mkReduceLike(t, lo, hi, second), split);
      return normalize(split, level);
    }
    // The top condition does not split the range (a periodic one such as
    // 2 <= k % 4, the half of a rotary head), but one below it may: a weight
    // concatenated from shards selects rank 0 for k < 4. Split there; under
    // each part's range that select resolves, and the parts are the ranks'
    // partial sums.
    if (auto m = innerSplitPoint(body, kName, lo, hi))
      return normalize(mkApply(t->red, {mkReduceLike(t, lo, *m, body), mkReduceLike(t, *m, hi, body)}), level);
  }
  if (!lo.asInt() || *lo.asInt() != 0) {
    body = substitute(body, {k}, {k + lo});
    hi = (hi - lo).simplify();
    lo = Expr::intConst(0);
  }
  if (implies(hi <= Expr::intConst(0), "sum.empty"))
    return mkConst(reduceIdentity(t->red));
  return mkReduceLike(t, lo, hi, body);
}

// --- equality -----------------------------------------------------------------------

std::optional<Expr> Prover::firstDifference(const Term &a, const Term &b, int level) {
  if (sameTerm(a, b))
    return std::nullopt;
  auto split = [&](const Term &sel, bool selIsA) -> std::optional<Expr> {
    const Expr &c = sel->cond;
    for (int branch = 0; branch < 2; ++branch) {
      Expr cc = branch == 0 ? c : !c;
      if (implies(!cc, "equal.prune"))
        continue;
      Scope s(*this, cc);
      const Term &x = sel->args[branch];
      const Term &o = selIsA ? b : a;
      Term other = termSize(o) <= maxTermNodes_ ? normalize(o, level) : o;
      auto d = selIsA ? firstDifference(x, other, level) : firstDifference(other, x, level);
      if (d)
        return d;
    }
    return std::nullopt;
  };
  if (a->kind == TermKind::Select)
    return split(a, true);
  if (b->kind == TermKind::Select)
    return split(b, false);
  // -(x - y) and y - x: compare linear combinations with constants distributed.
  if (a->kind == TermKind::Apply || b->kind == TermKind::Apply) {
    Term da = distributeConstants(a), db = distributeConstants(b);
    if (!sameTerm(da, a) || !sameTerm(db, b))
      return firstDifference(da, db, level);
  }
  std::optional<Expr> d = nodeDifference(a, b, level);
  // Not the same shape, but perhaps the same linear combination (Linear.cpp).
  if (d && (a->kind == TermKind::Sum || isAddTerm(a) || b->kind == TermKind::Sum || isAddTerm(b))) {
    if (linearDepth_ == 0)
      linearBudget_ = 256;
    if (equalAsLinear(a, b, level))
      return std::nullopt;
  }
  return d;
}

// a and b compared node by node (neither is a Select).
std::optional<Expr> Prover::nodeDifference(const Term &a, const Term &b, int level) {
  auto diff = [&]() -> std::optional<Expr> { return pathCond(); };
  if (a->kind != b->kind || a->args.size() != b->args.size())
    return diff();
  switch (a->kind) {
  case TermKind::Const:
    return a->value == b->value ? std::nullopt : diff();
  case TermKind::Read:
    if (a->cls != b->cls || a->idx.size() != b->idx.size())
      return diff();
    for (size_t d = 0; d < a->idx.size(); ++d)
      if (!equalExpr(a->idx[d], b->idx[d]))
        return (pathCond() && a->idx[d] != b->idx[d]).simplify();
    return std::nullopt;
  case TermKind::Apply:
    if (a->fn != b->fn || a->name != b->name)
      return diff();
    for (size_t i = 0; i < a->args.size(); ++i)
      if (auto d = firstDifference(a->args[i], b->args[i], level))
        return d;
    return std::nullopt;
  case TermKind::Sum:
    return a->red != b->red ? diff() : sumDifference(a, b, level);
  case TermKind::Select:
    break;
  }
  return diff();
}

// Both normalized (lower bounds 0), so only the upper bounds and bodies count.
std::optional<Expr> Prover::sumDifference(const Term &a, const Term &b, int level) {
  std::optional<Expr> d;
  if (!equalExpr(a->hi, b->hi)) {
    d = (pathCond() && a->hi != b->hi).simplify();
  } else {
    Expr k = boundVar(a->level);
    Scope s(*this, Expr::intConst(0) <= k && k < a->hi);
    d = firstDifference(a->args[0], b->args[0], level + 1);
  }
  if (!d || exchanging_ > 0 || a->args[0]->kind != TermKind::Sum)
    return d;
  auto swapped = exchangedReductions(b);
  if (!swapped || !equalExpr(a->hi, (*swapped)->hi))
    return d;
  ++exchanging_;
  auto e = sumDifference(a, *swapped, level);
  --exchanging_;
  return e ? d : std::nullopt;
}

std::optional<Term> Prover::exchangedReductions(const Term &t) {
  if (t->kind != TermKind::Sum || t->args[0]->kind != TermKind::Sum)
    return std::nullopt;
  const Term &inner = t->args[0];
  Expr outerK = boundVar(t->level), innerK = boundVar(inner->level);
  // Same reduction, and the inner range independent of the outer index (a
  // triangular sum_i sum_{j<i} has no such exchange).
  if (inner->red != t->red || inner->level != t->level + 1 || !(t->lo.asInt() == 0) ||
      !(inner->lo.asInt() == 0) || inner->hi.mentions("k!" + std::to_string(t->level)))
    return std::nullopt;
  Term body = substitute(inner->args[0], {outerK, innerK}, {innerK, outerK});
  return mkReduceLike(t, inner->lo, inner->hi, mkReduceLike(inner, t->lo, t->hi, body));
}

bool Prover::equal(const Term &a, const Term &b, int level) { return !firstDifference(a, b, level); }

bool Prover::isAddTerm(const Term &t) { return t->kind == TermKind::Apply && t->fn == Fn::Add; }

ClassId Prover::highestComputed(const Term &t, const ClassTable &classes) {
  std::vector<ClassId> reads;
  collectReads(t, reads);
  ClassId best = 0;
  bool any = false;
  for (ClassId c : reads)
    if (classes[c].kind == ClassInfo::Compute && (!any || c > best)) {
      best = c;
      any = true;
    }
  return any ? best : static_cast<ClassId>(-1);
}

static Term expandAtIn(const Term &t, ClassId c, const ClassTable &classes, int level);

Term Prover::expandAt(const Term &t, ClassId c, int level) const { return expandAtIn(t, c, classes_, level); }

static Term expandAtIn(const Term &t, ClassId c, const ClassTable &classes, int level) {
  switch (t->kind) {
  case TermKind::Const: return t;
  case TermKind::Read: {
    if (t->cls != c)
      return t;
    const ClassInfo &ci = classes[c];
    return instantiate(ci.def, indexVars("u", static_cast<unsigned>(ci.shape.rank())), t->idx, level);
  }
  case TermKind::Apply: {
    std::vector<Term> args;
    for (auto &a : t->args)
      args.push_back(expandAtIn(a, c, classes, level));
    return mkApply(t->fn, std::move(args), t->name);
  }
  case TermKind::Sum:
    return mkReduceLike(t, t->lo, t->hi, expandAtIn(t->args[0], c, classes, t->level + 1));
  case TermKind::Select:
    return mkSelect(t->cond, expandAtIn(t->args[0], c, classes, level), expandAtIn(t->args[1], c, classes, level));
  }
  return t;
}

Term Prover::expandClass(const Term &t, ClassId c, int level) {
  return normalize(expandAtIn(t, c, classes_, level), level);
}

Term Prover::expandClassInNormal(const Term &t, ClassId c, int level) {
  bool changed = false;
  return renormalizeExpanded(t, c, level, changed);
}

// Follows `t`'s structure down, pushing the conditions normalize pushed, so
// an unchanged subterm is under the path it was normalized under and stays
// as it is; a changed one is built again as normalize builds it (the
// reductions of an unfolding's untouched layers were rebuilt at every step).
Term Prover::renormalizeExpanded(const Term &t, ClassId c, int level, bool &changed) {
  switch (t->kind) {
  case TermKind::Const: return t;
  case TermKind::Read:
    if (t->cls != c)
      return t;
    changed = true;
    return normalize(expandAtIn(t, c, classes_, level), level);
  case TermKind::Select: {
    Term sides[2];
    bool any = false;
    for (int branch = 0; branch < 2; ++branch) {
      Scope s(*this, branch == 0 ? t->cond : !t->cond);
      sides[branch] = renormalizeExpanded(t->args[branch], c, level, any);
    }
    if (!any)
      return t;
    changed = true;
    return mkSelect(t->cond, sides[0], sides[1]);
  }
  case TermKind::Apply: {
    std::vector<Term> args;
    bool any = false;
    for (const Term &a : t->args)
      args.push_back(renormalizeExpanded(a, c, level, any));
    if (!any)
      return t;
    changed = true;
    return applyNormalized(t, std::move(args), level);
  }
  case TermKind::Sum: {
    SumDepthGuard guard;
    const Expr k = boundVar(t->level);
    Term body;
    bool any = false;
    {
      Scope s(*this, t->lo <= k && k < t->hi);
      body = renormalizeExpanded(t->args[0], c, t->level + 1, any);
    }
    if (!any)
      return t;
    changed = true;
    return reduceNormalized(t, std::move(body), level);
  }
  }
  return t;
}

bool Prover::expandHighest(Term &t, ClassId &highest) {
  highest = highestComputed(t, classes_);
  if (highest == static_cast<ClassId>(-1))
    return false;
  t = expandClass(t, highest, 0);
  return true;
}

} // namespace shardproof::relation
