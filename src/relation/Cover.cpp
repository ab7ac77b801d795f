// The prover's matching half: index unification of a term against class
// definitions, and cover, which rewrites a reference term into reads of the
// rank classes that compute it (see Prover.h; normalization and equality stay
// in Prover.cpp).
#include "Prover.h"

#include "shardproof/support/Error.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

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
  return selectChain(std::move(pieces), !covered && complete ? nullptr : t);
}

Term Prover::selectChain(std::vector<std::pair<Expr, Term>> pieces, Term otherwise) {
  if (!otherwise) {
    otherwise = pieces.back().second;
    pieces.pop_back();
  }
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it)
    otherwise = mkSelect(it->first, it->second, otherwise);
  return otherwise;
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

} // namespace shardproof::relation
