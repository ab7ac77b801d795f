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
    // Index selects move to the top, so every leaf of the result is Select-free.
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i]->kind != TermKind::Select)
        continue;
      auto thenArgs = args, elseArgs = args;
      thenArgs[i] = args[i]->args[0];
      elseArgs[i] = args[i]->args[1];
      return normalize(mkSelect(args[i]->cond, mkApply(t->fn, thenArgs, t->name),
                                mkApply(t->fn, elseArgs, t->name)),
                       level);
    }
    return foldNegInfSum(mkApply(t->fn, std::move(args), t->name));
  }
  case TermKind::Sum:
    return normalizeSum(t, level);
  }
  return t;
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

Term Prover::normalizeSum(const Term &t, int level) {
  static thread_local int depth = 0;
  struct Guard {
    Guard() { ++depth; }
    ~Guard() { --depth; }
  } guard;
  int L = t->level;
  Expr k = boundVar(L);
  std::string kName = "k!" + std::to_string(L);
  Expr lo = t->lo, hi = t->hi;
  Term body;
  {
    Scope s(*this, lo <= k && k < hi);
    body = normalize(t->args[0], L + 1);
  }
  if (body->kind == TermKind::Select && depth < 64) {
    const Expr &c = body->cond;
    if (!c.mentions(kName))
      return normalize(mkSelect(c, mkReduceLike(t, lo, hi, body->args[0]), mkReduceLike(t, lo, hi, body->args[1])),
                       level);
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

// --- matching -------------------------------------------------------------------

bool Prover::equalExpr(const Expr &a, const Expr &b) {
  if (a.same(b))
    return true;
  Expr d = (a - b).simplify();
  if (auto v = d.asInt())
    return *v == 0;
  return implies(a == b, "index.equal");
}

bool Prover::unifyIndex(const Expr &p0, const Expr &t, std::vector<Expr> &binding,
                        const std::vector<Expr> &vars) {
  std::vector<Expr> from, to;
  for (size_t v = 0; v < vars.size(); ++v)
    if (binding[v].isValid()) {
      from.push_back(vars[v]);
      to.push_back(binding[v]);
    }
  Expr p = p0.substitute(from, to).simplify();
  int freeVar = -1, nFree = 0;
  for (size_t v = 0; v < vars.size(); ++v)
    if (!binding[v].isValid() && p.mentions(*vars[v].asVar())) {
      freeVar = static_cast<int>(v);
      ++nFree;
    }
  if (nFree == 0)
    return equalExpr(p, t);
  if (nFree > 1)
    return false;
  auto aff = p.affineIn(*vars[freeVar].asVar());
  if (!aff)
    return false;
  // a*u + rest = t: u = (t - rest) / a, when that division is exact in the
  // linear form (a head index scaled by the head size: 4*u + k = 4*i - 8 + k).
  auto u = smt::divideExact(t - aff->second, aff->first);
  if (!u)
    return false;
  binding[freeVar] = *u;
  return true;
}

// Structural part of unification: same shape of term, and the index equations
// (pattern expr = term expr, under the binder ranges in scope) to solve after.
bool Prover::collectEquations(const Term &p, const Term &t, std::vector<IndexEquation> &eqs,
                              std::vector<Expr> &scope) {
  if (p->kind != t->kind || p->args.size() != t->args.size() || p->skeleton != t->skeleton)
    return false;
  switch (p->kind) {
  case TermKind::Const:
    return p->value == t->value;
  case TermKind::Read:
    if (p->cls != t->cls || p->idx.size() != t->idx.size())
      return false;
    for (size_t d = 0; d < p->idx.size(); ++d)
      eqs.push_back({p->idx[d], t->idx[d], scope, false});
    return true;
  case TermKind::Apply:
    if (p->fn != t->fn || p->name != t->name)
      return false;
    for (size_t i = 0; i < p->args.size(); ++i)
      if (!collectEquations(p->args[i], t->args[i], eqs, scope))
        return false;
    return true;
  case TermKind::Sum: {
    if (p->level != t->level || p->red != t->red)
      return false;
    eqs.push_back({p->lo, t->lo, scope, false});
    eqs.push_back({p->hi, t->hi, scope, false});
    Expr k = boundVar(t->level);
    scope.push_back(t->lo <= k && k < t->hi);
    bool ok = collectEquations(p->args[0], t->args[0], eqs, scope);
    scope.pop_back();
    return ok;
  }
  case TermKind::Select:
    eqs.push_back({p->cond, t->cond, scope, true});
    return collectEquations(p->args[0], t->args[0], eqs, scope) &&
           collectEquations(p->args[1], t->args[1], eqs, scope);
  }
  return false;
}

// A stuck index equation a*u + b*w + c = t with several unknowns is the
// mixed-radix form of a flattened (head, offset) index: bind the unknown with
// the largest coefficient to the multiple-of-a part of t - c (floor split of the
// constant); the equation then solves the rest exactly. It picks one solution;
// whether it lies inside the class's bounds is checked by the caller's region.
bool Prover::guessMixedRadix(const std::vector<IndexEquation> &eqs, const std::vector<size_t> &pending,
                             std::vector<Expr> &binding, const std::vector<Expr> &vars) {
  std::vector<Expr> from, to;
  for (size_t v = 0; v < vars.size(); ++v)
    if (binding[v].isValid()) {
      from.push_back(vars[v]);
      to.push_back(binding[v]);
    }
  for (size_t i : pending) {
    const IndexEquation &eq = eqs[i];
    if (eq.isCond)
      continue;
    Expr p = eq.pattern.substitute(from, to).simplify();
    int best = -1;
    int64_t coef = 0;
    std::vector<Expr> others;
    for (size_t v = 0; v < vars.size(); ++v) {
      if (binding[v].isValid() || !p.mentions(*vars[v].asVar()))
        continue;
      others.push_back(vars[v]);
      auto aff = p.affineIn(*vars[v].asVar());
      if (aff && aff->first > coef) {
        coef = aff->first;
        best = static_cast<int>(v);
      }
    }
    if (best < 0 || coef <= 1)
      continue;
    // t - (p with every unknown at 0) = coef*u_best + (the other unknowns' part).
    Expr base = p.substitute(others, std::vector<Expr>(others.size(), Expr::intConst(0)));
    binding[best] = smt::divModLinear(eq.term - base, coef).first;
    return true;
  }
  return false;
}

bool Prover::unify(const Term &p, const Term &t, std::vector<Expr> &binding, const std::vector<Expr> &vars,
                   std::vector<Expr> &sideConds) {
  std::vector<IndexEquation> eqs;
  std::vector<Expr> scope;
  if (!collectEquations(p, t, eqs, scope))
    return false;
  auto waiting = [&](const Expr &e) {
    for (size_t v = 0; v < vars.size(); ++v)
      if (!binding[v].isValid() && e.mentions(*vars[v].asVar()))
        return true;
    return false;
  };
  // An equation whose pattern side mentions several unbound variables waits
  // until other equations (possibly in other reads) bind all but one of them.
  std::vector<size_t> pending;
  for (size_t i = 0; i < eqs.size(); ++i)
    pending.push_back(i);
  while (!pending.empty()) {
    std::vector<size_t> next;
    for (size_t i : pending) {
      const IndexEquation &eq = eqs[i];
      for (auto &c : eq.scope)
        push(c);
      bool ok;
      if (eq.isCond) {
        ok = !waiting(eq.pattern);
        if (ok) {
          std::vector<Expr> from, to;
          for (size_t v = 0; v < vars.size(); ++v)
            if (binding[v].isValid()) {
              from.push_back(vars[v]);
              to.push_back(binding[v]);
            }
          Expr pc = eq.pattern.substitute(from, to).simplify();
          ok = pc.same(eq.term) || implies(pc == eq.term, "select.cond.equal");
        }
      } else {
        std::vector<Expr> snapshot = binding;
        ok = unifyIndex(eq.pattern, eq.term, binding, vars);
        if (!ok)
          binding = snapshot;
        // Fully bound but not equal everywhere: the class computes the term
        // where the indices agree (two ranks holding the same kv head each
        // cover the query heads that map to it). Only conditions on free
        // indices can bound a region, not ones on a reduction variable.
        if (!ok && !waiting(eq.pattern)) {
          std::vector<Expr> from, to;
          for (size_t v = 0; v < vars.size(); ++v)
            if (binding[v].isValid()) {
              from.push_back(vars[v]);
              to.push_back(binding[v]);
            }
          Expr agree = (eq.pattern.substitute(from, to) == eq.term).simplify();
          bool onBound = false;
          for (auto &n : agree.vars())
            onBound |= n.rfind("k!", 0) == 0;
          if (!onBound && feasible(agree, "match.agree")) {
            sideConds.push_back(agree);
            ok = true;
          }
        }
      }
      for (size_t k = 0; k < eq.scope.size(); ++k)
        pop();
      if (ok)
        continue;
      if (!waiting(eq.pattern))
        return false; // fails outright
      next.push_back(i);
    }
    if (next.size() == pending.size() && !guessMixedRadix(eqs, pending, binding, vars))
      return false; // no progress
    pending = std::move(next);
  }
  return true;
}

static bool hasReduction(const Term &t) {
  if (t->kind == TermKind::Sum)
    return true;
  for (auto &a : t->args)
    if (hasReduction(a))
      return true;
  return false;
}

// Variants of `t` with one pair of adjacent operands of an associative-
// commutative node swapped, where the two have the same skeleton (at most 8).
static void collectSwaps(const Term &t, const std::function<Term(const Term &)> &wrap, std::vector<Term> &out) {
  if (out.size() >= 8)
    return;
  bool ac = t->kind == TermKind::Apply &&
            (t->fn == Fn::Add || t->fn == Fn::Mul || t->fn == Fn::Max2 || t->fn == Fn::Min2);
  if (ac)
    for (size_t i = 0; i + 1 < t->args.size() && out.size() < 8; ++i)
      if (t->args[i]->skeleton == t->args[i + 1]->skeleton && !sameTerm(t->args[i], t->args[i + 1])) {
        std::vector<Term> args = t->args;
        std::swap(args[i], args[i + 1]);
        TermNode n = *t;
        n.args = std::move(args);
        out.push_back(wrap(std::make_shared<const TermNode>(std::move(n))));
      }
  for (size_t i = 0; i < t->args.size() && out.size() < 8; ++i) {
    auto inner = [&, i](const Term &x) {
      TermNode n = *t;
      n.args[i] = x;
      return wrap(std::make_shared<const TermNode>(std::move(n)));
    };
    collectSwaps(t->args[i], inner, out);
  }
}

static std::vector<Term> swappedTwins(const Term &t) {
  std::vector<Term> out;
  collectSwaps(t, [](const Term &x) { return x; }, out);
  return out;
}

std::optional<Term> Prover::tryMatch(const Term &t, int level, unsigned &matches, bool wholeOnly) {
  // Skeletons count binder levels; class definitions are stored at depth 0. A
  // reduction nested in another one (the row max inside LogSoftmax's exp-sum)
  // is looked up as if it stood at the top.
  size_t skeleton = level > 0 && hasReduction(t) ? relevel(t, level, -level)->skeleton : t->skeleton;
  const auto &cands = classes_.withSkeleton(skeleton);
  if (cands.empty())
    return std::nullopt;
  std::vector<std::pair<Expr, Term>> pieces;
  Expr remaining = Expr::boolConst(true);
  bool covered = false;
  for (const ClassTable::Piece &pc : cands) {
    ClassId c = pc.cls;
    const ClassInfo &ci = classes_[c];
    Term pattern = relevel(pc.leaf, 0, level);
    std::vector<Expr> vars;
    for (size_t d = 0; d < ci.shape.rank(); ++d)
      vars.push_back(indexVar("u", static_cast<unsigned>(d)));
    std::vector<Expr> binding(vars.size()), sideConds;
    Scope s(*this, remaining);
    bool unified = unify(pattern, t, binding, vars, sideConds);
    // Operands of + and * are sorted by skeleton, which ignores indices: two
    // reads of one class (q and k cut from one fused projection) may sit in
    // either order. Try the pattern with such a pair swapped.
    if (!unified)
      for (const Term &alt : swappedTwins(pattern)) {
        binding.assign(vars.size(), Expr());
        sideConds.clear();
        if ((unified = unify(alt, t, binding, vars, sideConds)))
          break;
      }
    if (!unified)
      continue;
    IndexVec at;
    std::vector<Expr> inBounds;
    for (size_t d = 0; d < vars.size(); ++d) {
      // An index the definition ignores (broadcast) may take any in-range value.
      Expr b = binding[d].isValid() ? binding[d] : Expr::intConst(0);
      at.push_back(b);
      inBounds.push_back(Expr::intConst(0) <= b);
      inBounds.push_back(b < ci.shape.dims[d]);
    }
    // Inside the class's bounds, and inside the piece's region of its definition.
    inBounds.push_back(pc.cond.substitute(vars, {at.begin(), at.end()}));
    inBounds.insert(inBounds.end(), sideConds.begin(), sideConds.end());
    Expr region = simplifyCond(smt::conj(inBounds));
    Term read = mkRead(c, at);
    if (auto b = region.asBool(); b && *b) {
      pieces.push_back({Expr::boolConst(true), read});
      covered = true;
      break;
    }
    if (feasible(region, "match.region")) {
      pieces.push_back({region, read});
      remaining = (remaining && !region).simplify();
    }
  }
  if (pieces.empty())
    return std::nullopt;
  // The whole path may be covered by the union of partial regions.
  bool complete = covered;
  if (!complete) {
    Scope s(*this, remaining);
    complete = !feasible(Expr::boolConst(true), "match.rest");
  }
  if (wholeOnly && !complete)
    return std::nullopt;
  ++matches;
  Term result = t;
  if (!covered && complete)
    result = pieces.back().second, pieces.pop_back();
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it)
    result = mkSelect(it->first, it->second, result);
  return result;
}

Term Prover::cover(const Term &t, int level, unsigned &matches) {
  ++rewriteSteps_;
  switch (t->kind) {
  case TermKind::Const:
  case TermKind::Read:
    return t;
  case TermKind::Select: {
    // A class defined by the same Select (a masked tensor) covers both branches.
    if (auto r = tryMatch(t, level, matches, /*wholeOnly=*/true))
      return *r;
    // A select on token ids that an all-reduce of masked lookups computes.
    if (auto r = tryMaskedSum(t, level)) {
      ++matches;
      return *r;
    }
    // mask ? (head < 1 ? A : B) : (head < 1 ? C : D) is the same tensor as
    // head < 1 ? (mask ? A : C) : (mask ? B : D), whose inner Selects can be
    // whole masked rank tensors: the nesting order must not decide the match.
    // Only when that pays: the first inner Select matches a class whole.
    const Term &x = t->args[0], &y = t->args[1];
    if (x->kind == TermKind::Select && y->kind == TermKind::Select &&
        (x->cond.same(y->cond) || implies((x->cond && y->cond) || (!x->cond && !y->cond), "select.commute"))) {
      const Expr &d = x->cond;
      std::optional<Term> first;
      {
        Scope s(*this, d);
        first = tryMatch(mkSelect(t->cond, x->args[0], y->args[0]), level, matches, /*wholeOnly=*/true);
      }
      if (first) {
        Scope s(*this, !d);
        return mkSelect(d, *first, cover(mkSelect(t->cond, x->args[1], y->args[1]), level, matches));
      }
    }
    Term a, b;
    {
      Scope s(*this, t->cond);
      a = cover(t->args[0], level, matches);
    }
    {
      Scope s(*this, !t->cond);
      b = cover(t->args[1], level, matches);
    }
    return mkSelect(t->cond, a, b);
  }
  default:
    break;
  }
  if (auto r = tryMatch(t, level, matches))
    return *r;
  // Scores of rotated q and k that a rank computes with other angles.
  if (auto r = tryRotaryMatch(t, level)) {
    ++matches;
    return *r;
  }
  // No class computes the whole term: cover its parts, then try again (a sum of
  // matched partial products may be a collective's output).
  Term rebuilt;
  if (t->kind == TermKind::Apply) {
    std::vector<Term> args;
    for (auto &a : t->args)
      args.push_back(cover(a, level, matches));
    rebuilt = mkApply(t->fn, std::move(args), t->name);
  } else {
    Expr k = boundVar(t->level);
    Term body;
    {
      Scope s(*this, Expr::intConst(0) <= k && k < t->hi);
      body = cover(t->args[0], level + 1, matches);
    }
    rebuilt = mkReduceLike(t, t->lo, t->hi, body);
  }
  if (sameTerm(rebuilt, t))
    return t;
  Term n = normalize(rebuilt, level);
  if (n->kind == TermKind::Select)
    return cover(n, level, matches);
  if (auto r = tryMatch(n, level, matches))
    return *r;
  return n;
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
  case TermKind::Sum: {
    if (a->red != b->red)
      return diff();
    if (!equalExpr(a->hi, b->hi))
      return (pathCond() && a->hi != b->hi).simplify();
    Expr k = boundVar(a->level);
    Scope s(*this, Expr::intConst(0) <= k && k < a->hi);
    return firstDifference(a->args[0], b->args[0], level + 1);
  }
  case TermKind::Select:
    break;
  }
  return diff();
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

bool Prover::expandHighest(Term &t, ClassId &highest) {
  highest = highestComputed(t, classes_);
  if (highest == static_cast<ClassId>(-1))
    return false;
  t = expandClass(t, highest, 0);
  return true;
}

} // namespace shardproof::relation
