#include "shardproof/ir/Term.h"
#include "shardproof/support/Error.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

namespace shardproof::ir {

const char *fnName(Fn f) {
  switch (f) {
  case Fn::Add: return "add";
  case Fn::Mul: return "mul";
  case Fn::Recip: return "recip";
  case Fn::Erf: return "erf";
  case Fn::Tanh: return "tanh";
  case Fn::Exp: return "exp";
  case Fn::Log: return "log";
  case Fn::Sqrt: return "sqrt";
  case Fn::Sigmoid: return "sigmoid";
  case Fn::Relu: return "relu";
  case Fn::Abs: return "abs";
  case Fn::Cos: return "cos";
  case Fn::Sin: return "sin";
  case Fn::Pow: return "pow";
  case Fn::Max2: return "max";
  case Fn::Min2: return "min";
  case Fn::Opaque: return "opaque";
  }
  return "?";
}

static size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

static Term finish(TermNode n) {
  size_t h = static_cast<size_t>(n.kind) * 1315423911u, s = h;
  switch (n.kind) {
  case TermKind::Const:
    h = mix(h, std::hash<double>()(n.value));
    s = h;
    break;
  case TermKind::Read:
    s = mix(s, n.cls);
    h = mix(h, n.cls);
    for (auto &e : n.idx)
      h = mix(h, e.id());
    break;
  case TermKind::Apply:
    h = mix(h, static_cast<size_t>(n.fn));
    h = mix(h, std::hash<std::string>()(n.name));
    s = h;
    break;
  case TermKind::Sum:
    h = mix(mix(h, n.lo.id()), n.hi.id());
    h = mix(mix(h, n.level), static_cast<size_t>(n.red));
    s = mix(mix(s, n.level), static_cast<size_t>(n.red));
    break;
  case TermKind::Select:
    h = mix(h, n.cond.id());
    break;
  }
  for (auto &a : n.args) {
    h = mix(h, a->hash);
    s = mix(s, a->skeleton);
  }
  n.hash = h;
  n.skeleton = s;
  return std::make_shared<const TermNode>(std::move(n));
}

Term mkConst(double v) {
  TermNode n{TermKind::Const};
  n.value = v == 0 ? 0.0 : v; // one zero: -0.0 and 0.0 compare equal as reals
  return finish(std::move(n));
}

Term mkRead(ClassId c, IndexVec idx) {
  TermNode n{TermKind::Read};
  n.cls = c;
  for (auto &e : idx)
    e = e.simplify();
  n.idx = std::move(idx);
  return finish(std::move(n));
}

static bool isConst(const Term &t, double v) { return t->kind == TermKind::Const && t->value == v; }

// Operands of associative-commutative ops are kept flat and sorted by skeleton,
// which ignores index expressions, so a pattern and an instance sort alike.
static void sortAC(std::vector<Term> &args) {
  std::stable_sort(args.begin(), args.end(), [](const Term &a, const Term &b) {
    if (a->kind != b->kind)
      return a->kind < b->kind;
    if (a->kind == TermKind::Read && a->cls != b->cls)
      return a->cls < b->cls;
    return a->skeleton < b->skeleton;
  });
}

Term mkAdd(std::vector<Term> args) {
  std::vector<Term> flat;
  double c = 0;
  for (auto &a : args) {
    if (a->kind == TermKind::Apply && a->fn == Fn::Add)
      flat.insert(flat.end(), a->args.begin(), a->args.end());
    else
      flat.push_back(a);
  }
  std::vector<Term> keep;
  for (auto &a : flat) {
    if (a->kind == TermKind::Const)
      c += a->value;
    else
      keep.push_back(a);
  }
  if (c != 0 || keep.empty())
    keep.push_back(mkConst(c));
  if (keep.size() == 1)
    return keep[0];
  sortAC(keep);
  TermNode n{TermKind::Apply};
  n.fn = Fn::Add;
  n.args = std::move(keep);
  return finish(std::move(n));
}

Term mkMul(std::vector<Term> args) {
  std::vector<Term> flat;
  double c = 1;
  for (auto &a : args) {
    if (a->kind == TermKind::Apply && a->fn == Fn::Mul)
      flat.insert(flat.end(), a->args.begin(), a->args.end());
    else
      flat.push_back(a);
  }
  std::vector<Term> keep;
  for (auto &a : flat) {
    if (a->kind == TermKind::Const)
      c *= a->value;
    else
      keep.push_back(a);
  }
  if (c == 0)
    return mkConst(0);
  if (c != 1 || keep.empty())
    keep.insert(keep.begin(), mkConst(c));
  if (keep.size() == 1)
    return keep[0];
  sortAC(keep);
  TermNode n{TermKind::Apply};
  n.fn = Fn::Mul;
  n.args = std::move(keep);
  return finish(std::move(n));
}

Term mkNeg(const Term &a) { return mkMul({mkConst(-1), a}); }
Term mkSub(const Term &a, const Term &b) { return mkAdd({a, mkNeg(b)}); }
Term mkDiv(const Term &a, const Term &b) {
  if (b->kind == TermKind::Const && b->value != 0)
    return mkMul({a, mkConst(1.0 / b->value)});
  return mkMul({a, mkApply(Fn::Recip, {b})});
}

double reduceIdentity(Fn op) {
  if (op == Fn::Mul)
    return 1; // the empty product
  if (op == Fn::Max2)
    return -INFINITY;
  if (op == Fn::Min2)
    return INFINITY;
  return 0;
}

// max/min are associative, commutative and idempotent: kept flat, sorted like
// Add's operands, without repeats and without their identity (-inf for max),
// so max(max(a, b), c), max(a, max(c, b)) and an all-reduce's max over ranks
// are one term.
static Term mkExtremum(Fn f, std::vector<Term> args) {
  std::vector<Term> flat;
  for (auto &a : args) {
    if (a->kind == TermKind::Apply && a->fn == f)
      flat.insert(flat.end(), a->args.begin(), a->args.end());
    else
      flat.push_back(a);
  }
  std::vector<Term> keep;
  std::optional<double> c;
  for (auto &a : flat) {
    if (a->kind == TermKind::Const) {
      c = !c ? a->value : f == Fn::Max2 ? std::max(*c, a->value) : std::min(*c, a->value);
      continue;
    }
    bool seen = false;
    for (auto &k : keep)
      seen |= sameTerm(k, a);
    if (!seen)
      keep.push_back(a);
  }
  if (c && (*c != reduceIdentity(f) || keep.empty()))
    keep.push_back(mkConst(*c));
  if (keep.size() == 1)
    return keep[0];
  sortAC(keep);
  TermNode n{TermKind::Apply};
  n.fn = f;
  n.args = std::move(keep);
  return finish(std::move(n));
}

// Operands each function takes (0: any number); a wrong count is a bug in an
// op's index map, which would otherwise evaluate garbage or crash in replay.
static size_t arity(Fn f) {
  switch (f) {
  case Fn::Recip: case Fn::Erf: case Fn::Tanh: case Fn::Exp: case Fn::Log: case Fn::Sqrt:
  case Fn::Sigmoid: case Fn::Relu: case Fn::Abs: case Fn::Cos: case Fn::Sin:
    return 1;
  case Fn::Pow:
    return 2;
  default:
    return 0;
  }
}

Term mkApply(Fn f, std::vector<Term> args, std::string name) {
  SP_CHECK(arity(f) == 0 || args.size() == arity(f),
           std::string("function ") + fnName(f) + " applied to " + std::to_string(args.size()) + " operands");
  for (auto &a : args)
    SP_CHECK(a != nullptr, std::string("function ") + fnName(f) + " applied to a missing operand");
  if (f == Fn::Add)
    return mkAdd(std::move(args));
  if (f == Fn::Mul)
    return mkMul(std::move(args));
  if ((f == Fn::Max2 || f == Fn::Min2) && !args.empty())
    return mkExtremum(f, std::move(args));
  // exp(-inf) = 0 exactly (IEEE and the limit over the reals): what makes a
  // where(mask, s, -inf) column vanish from a softmax. A finite fill value
  // (-1e9) stays exp(c): close to zero is not equal.
  if (f == Fn::Exp && args.size() == 1 && args[0]->kind == TermKind::Const && std::isinf(args[0]->value) &&
      args[0]->value < 0)
    return mkConst(0);
  TermNode n{TermKind::Apply};
  n.fn = f;
  n.name = std::move(name);
  n.args = std::move(args);
  return finish(std::move(n));
}

Term mkSum(int level, smt::Expr lo, smt::Expr hi, Term body) {
  return mkReduce(Fn::Add, level, std::move(lo), std::move(hi), std::move(body));
}

Term mkReduceLike(const Term &like, smt::Expr lo, smt::Expr hi, Term body) {
  return mkReduce(like->red, like->level, std::move(lo), std::move(hi), std::move(body));
}

Term mkReduce(Fn op, int level, smt::Expr lo, smt::Expr hi, Term body) {
  // Binders are k!0, k!1, ... by depth; the op is one with an identity.
  SP_CHECK(level >= 0, "a reduction bound at level " + std::to_string(level));
  SP_CHECK(op == Fn::Add || op == Fn::Mul || op == Fn::Max2 || op == Fn::Min2,
           std::string("a reduction by ") + fnName(op));
  SP_CHECK(body != nullptr, "a reduction of a missing body");
  lo = lo.simplify();
  hi = hi.simplify();
  auto l = lo.asInt(), h = hi.asInt();
  if (l && h && *h <= *l)
    return mkConst(reduceIdentity(op));
  if (op == Fn::Add && isConst(body, 0))
    return body;
  // The max of a constant over a range known to be non-empty is that constant.
  if ((op == Fn::Max2 || op == Fn::Min2) && body->kind == TermKind::Const && l && h)
    return body;
  // A product of ones is 1; of another constant c over n elements, c^n (not c).
  if (op == Fn::Mul && isConst(body, 1))
    return body;
  if (op == Fn::Mul && body->kind == TermKind::Const && l && h)
    return mkConst(std::pow(body->value, static_cast<double>(*h - *l)));
  // A reduction over exactly one element is that element, for every op: the
  // body at k!level = lo, its inner binders moved up one level (`x[:, :1].sum(1)`
  // is x[:, 0], which the reference reads as such).
  if (auto width = (hi - lo).simplify().asInt(); width && *width == 1)
    return relevel(substitute(body, {boundVar(level)}, {lo}), level + 1, -1);
  TermNode n{TermKind::Sum};
  n.red = op;
  n.level = level;
  n.lo = lo;
  n.hi = hi;
  n.args = {std::move(body)};
  return finish(std::move(n));
}

static Term liftIte(const smt::Expr &c, const Term &a, const Term &b, int budget) {
  if (auto v = c.asBool())
    return *v ? a : b;
  if (budget <= 0)
    return mkSelect(c, a, b);
  if (auto it = c.findIntIte())
    if (auto parts = it->asIte()) {
      auto &[p, x, y] = *parts;
      return mkSelect(p, liftIte(c.substitute({*it}, {x}).simplify(), a, b, budget - 1),
                      liftIte(c.substitute({*it}, {y}).simplify(), a, b, budget - 1));
    }
  // A boolean combination of index comparisons (Z3 turns the ites of
  // `seg(q) == seg(k)` into `!(s1 <= k && s1 + s2 <= k)`): split on one
  // comparison at a time. Conditions on data values stay whole (a token-id
  // range is matched as one mask, MaskedSum.cpp).
  if (!c.hasApp())
    if (auto atom = c.findAtom())
      return mkSelect(*atom, liftIte(c.substitute({*atom}, {smt::Expr::boolConst(true)}).simplify(), a, b, budget - 1),
                      liftIte(c.substitute({*atom}, {smt::Expr::boolConst(false)}).simplify(), a, b, budget - 1));
  return mkSelect(c, a, b);
}

Term mkMaskSelect(const smt::Expr &cond, Term thenT, Term elseT) {
  return liftIte(cond.simplify(), thenT, elseT, 6);
}

Term mkSelect(smt::Expr cond, Term thenT, Term elseT) {
  cond = cond.simplify();
  if (auto b = cond.asBool())
    return *b ? thenT : elseT;
  if (sameTerm(thenT, elseT))
    return thenT;
  TermNode n{TermKind::Select};
  n.cond = cond;
  n.args = {std::move(thenT), std::move(elseT)};
  return finish(std::move(n));
}

// The same few variables are asked for at every node: each is built once and
// kept for the process (like the solver context they live in).
static smt::Expr cachedVar(const char *prefix, unsigned d) {
  static auto *cache = new llvm::DenseMap<std::pair<unsigned, unsigned>, smt::Expr>;
  if (prefix[0] == 0 || prefix[1] != 0 || d >= 256)
    return smt::Expr::intVar(std::string(prefix) + "!" + std::to_string(d));
  auto [it, fresh] = cache->try_emplace({static_cast<unsigned char>(prefix[0]), d});
  if (fresh)
    it->second = smt::Expr::intVar(std::string(prefix) + "!" + std::to_string(d));
  return it->second;
}

smt::Expr indexVar(const char *prefix, unsigned d) { return cachedVar(prefix, d); }
smt::Expr boundVar(int level) {
  return level >= 0 ? cachedVar("k", static_cast<unsigned>(level)) : smt::Expr::intVar("k!" + std::to_string(level));
}
IndexVec indexVars(const char *prefix, unsigned rank) {
  IndexVec v;
  for (unsigned d = 0; d < rank; ++d)
    v.push_back(indexVar(prefix, d));
  return v;
}

// Structural equality; `reads` decides each pair of classes read at the same
// place (nullptr: they must be the same class, and shared subterms are equal).
static bool sameWalk(const Term &a, const Term &b, const std::function<bool(ClassId, ClassId)> *reads) {
  if (!reads && a == b)
    return true;
  if ((!reads && a->hash != b->hash) || a->kind != b->kind || a->args.size() != b->args.size())
    return false;
  switch (a->kind) {
  case TermKind::Const:
    if (a->value != b->value)
      return false;
    break;
  case TermKind::Read:
    if (a->idx.size() != b->idx.size() || (reads ? !(*reads)(a->cls, b->cls) : a->cls != b->cls))
      return false;
    for (size_t i = 0; i < a->idx.size(); ++i)
      if (!a->idx[i].same(b->idx[i]))
        return false;
    break;
  case TermKind::Apply:
    if (a->fn != b->fn || a->name != b->name)
      return false;
    break;
  case TermKind::Sum:
    if (a->level != b->level || a->red != b->red || !a->lo.same(b->lo) || !a->hi.same(b->hi))
      return false;
    break;
  case TermKind::Select:
    if (!a->cond.same(b->cond))
      return false;
    break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!sameWalk(a->args[i], b->args[i], reads))
      return false;
  return true;
}

bool sameTerm(const Term &a, const Term &b) { return sameWalk(a, b, nullptr); }

bool sameTermUpToReads(const Term &a, const Term &b, const std::function<bool(ClassId, ClassId)> &reads) {
  return sameWalk(a, b, &reads);
}

// Rebuilds `t` with `f` applied to its expressions and `rec` to its children.
static Term rebuild(const Term &t, const std::function<smt::Expr(const smt::Expr &)> &f,
                    const std::function<Term(const Term &)> &rec, int levelDelta = 0, int from = 0) {
  switch (t->kind) {
  case TermKind::Const: return t;
  case TermKind::Read: {
    IndexVec idx;
    for (auto &e : t->idx)
      idx.push_back(f(e));
    return mkRead(t->cls, std::move(idx));
  }
  case TermKind::Apply: {
    std::vector<Term> args;
    for (auto &a : t->args)
      args.push_back(rec(a));
    return mkApply(t->fn, std::move(args), t->name);
  }
  case TermKind::Sum: {
    int lvl = t->level >= from ? t->level + levelDelta : t->level;
    return mkReduce(t->red, lvl, f(t->lo), f(t->hi), rec(t->args[0]));
  }
  case TermKind::Select:
    return mkSelect(f(t->cond), rec(t->args[0]), rec(t->args[1]));
  }
  return t;
}

Term mapExprs(const Term &t, const std::function<smt::Expr(const smt::Expr &)> &f) {
  std::function<Term(const Term &)> rec = [&](const Term &x) { return mapExprs(x, f); };
  return rebuild(t, f, rec);
}

Term substitute(const Term &t, const std::vector<smt::Expr> &from, const std::vector<smt::Expr> &to) {
  if (from.empty())
    return t;
  return mapExprs(t, [&](const smt::Expr &e) { return e.substitute(from, to); });
}

static int maxLevel(const Term &t) {
  int m = -1;
  if (t->kind == TermKind::Sum)
    m = t->level;
  for (auto &a : t->args)
    m = std::max(m, maxLevel(a));
  return m;
}

Term relevel(const Term &t, int from, int delta) {
  if (delta == 0)
    return t;
  int top = maxLevel(t);
  if (top < from)
    return t;
  std::vector<smt::Expr> vf, vt;
  for (int l = from; l <= top; ++l) {
    vf.push_back(boundVar(l));
    vt.push_back(boundVar(l + delta));
  }
  std::function<Term(const Term &)> rec;
  auto f = [&](const smt::Expr &e) { return e.substitute(vf, vt); };
  rec = [&](const Term &x) { return rebuild(x, f, rec, delta, from); };
  return rec(t);
}

Term instantiate(const Term &t, const IndexVec &vars, const IndexVec &exprs, int level) {
  Term r = relevel(t, 0, level);
  return substitute(r, {vars.begin(), vars.end()}, {exprs.begin(), exprs.end()});
}

Term distributeConstants(const Term &t) {
  if (t->kind != TermKind::Apply)
    return t;
  if (t->fn == Fn::Add) {
    std::vector<Term> args;
    for (auto &a : t->args)
      args.push_back(distributeConstants(a));
    return mkAdd(std::move(args));
  }
  // c * (a + b): exactly a constant and one sum.
  if (t->fn == Fn::Mul && t->args.size() == 2 && t->args[0]->kind == TermKind::Const &&
      t->args[1]->kind == TermKind::Apply && t->args[1]->fn == Fn::Add) {
    std::vector<Term> args;
    for (auto &a : t->args[1]->args)
      args.push_back(distributeConstants(mkMul({t->args[0], a})));
    return mkAdd(std::move(args));
  }
  return t;
}

// Renaming classes changes no kind, index, bound or condition: a node whose
// children kept their kinds (none became a constant) meets the same folds in
// its smart constructor as before, so it is copied with its new children
// rather than rebuilt (a reused layer renames about a million nodes; the
// index simplification and bound arithmetic of mkRead and mkReduce were most
// of that). Operands of Add, Mul, Max2 and Min2 are re-sorted by class, and a
// Select whose branches became equal folds: those still go through mkApply
// and mkSelect.
static bool keptKinds(const std::vector<Term> &before, const std::vector<Term> &after) {
  for (size_t i = 0; i < before.size(); ++i)
    if (after[i]->kind != before[i]->kind || after[i]->kind == TermKind::Const)
      return false;
  return true;
}

static Term renameIn(const Term &t, const std::function<ClassId(ClassId)> &rename,
                     llvm::SmallDenseMap<const TermNode *, Term, 16> &done) {
  if (auto it = done.find(t.get()); it != done.end())
    return it->second;
  Term out;
  switch (t->kind) {
  case TermKind::Const:
    out = t;
    break;
  case TermKind::Read: {
    ClassId c = rename(t->cls);
    if (c == t->cls) {
      out = t;
    } else {
      TermNode n{TermKind::Read};
      n.cls = c;
      n.idx = t->idx; // simplified when t was made
      out = finish(std::move(n));
    }
    break;
  }
  case TermKind::Apply: {
    std::vector<Term> args;
    args.reserve(t->args.size());
    bool same = true;
    for (auto &a : t->args) {
      args.push_back(renameIn(a, rename, done));
      same &= args.back() == a;
    }
    // Nothing below renamed (index arithmetic, constants): the node as it is,
    // not rebuilt (and its operands re-sorted) by the smart constructor.
    if (same) {
      out = t;
    } else if (t->fn != Fn::Add && t->fn != Fn::Mul && t->fn != Fn::Max2 && t->fn != Fn::Min2 &&
               keptKinds(t->args, args)) {
      TermNode n{TermKind::Apply};
      n.fn = t->fn;
      n.name = t->name;
      n.args = std::move(args);
      out = finish(std::move(n));
    } else {
      out = mkApply(t->fn, std::move(args), t->name);
    }
    break;
  }
  case TermKind::Sum: {
    Term body = renameIn(t->args[0], rename, done);
    if (body == t->args[0]) {
      out = t;
    } else if (keptKinds(t->args, {body})) {
      TermNode n{TermKind::Sum};
      n.red = t->red;
      n.level = t->level;
      n.lo = t->lo;
      n.hi = t->hi;
      n.args = {std::move(body)};
      out = finish(std::move(n));
    } else {
      out = mkReduce(t->red, t->level, t->lo, t->hi, std::move(body));
    }
    break;
  }
  case TermKind::Select: {
    Term a = renameIn(t->args[0], rename, done), b = renameIn(t->args[1], rename, done);
    if (a == t->args[0] && b == t->args[1]) {
      out = t;
    } else if (!sameTerm(a, b)) {
      TermNode n{TermKind::Select};
      n.cond = t->cond;
      n.args = {std::move(a), std::move(b)};
      out = finish(std::move(n));
    } else {
      out = mkSelect(t->cond, std::move(a), std::move(b));
    }
    break;
  }
  }
  done.try_emplace(t.get(), out);
  return out;
}

Term renameClasses(const Term &t, const std::function<ClassId(ClassId)> &rename) {
  llvm::SmallDenseMap<const TermNode *, Term, 16> done;
  return renameIn(t, rename, done);
}

void collectReads(const Term &t, std::vector<ClassId> &out) {
  if (t->kind == TermKind::Read) {
    if (std::find(out.begin(), out.end(), t->cls) == out.end())
      out.push_back(t->cls);
    return;
  }
  for (auto &a : t->args)
    collectReads(a, out);
}

size_t termSize(const Term &t) {
  size_t n = 1;
  for (auto &a : t->args)
    n += termSize(a);
  return n;
}

bool mentionsVar(const Term &t, const std::string &name) {
  switch (t->kind) {
  case TermKind::Const: return false;
  case TermKind::Read:
    return std::any_of(t->idx.begin(), t->idx.end(), [&](const smt::Expr &e) { return e.mentions(name); });
  case TermKind::Sum:
    if (t->lo.mentions(name) || t->hi.mentions(name))
      return true;
    break;
  case TermKind::Select:
    if (t->cond.mentions(name))
      return true;
    break;
  case TermKind::Apply: break;
  }
  return std::any_of(t->args.begin(), t->args.end(), [&](const Term &a) { return mentionsVar(a, name); });
}

bool isPure(const Term &t) {
  if (t->kind == TermKind::Apply || t->kind == TermKind::Sum)
    return false;
  for (auto &a : t->args)
    if (!isPure(a))
      return false;
  return true;
}

std::pair<Term, smt::Expr> concatAlong(size_t n, size_t axis, const IndexVec &iv,
                                       const std::function<smt::Expr(size_t)> &length,
                                       const std::function<Term(size_t, const IndexVec &)> &piece) {
  std::vector<smt::Expr> off(n + 1, smt::Expr::intConst(0));
  for (size_t j = 0; j < n; ++j)
    off[j + 1] = (off[j] + length(j)).simplify();
  Term t;
  for (size_t j = n; j-- > 0;) {
    IndexVec src = iv;
    src[axis] = iv[axis] - off[j];
    Term p = piece(j, src);
    t = t ? mkSelect(iv[axis] < off[j + 1], p, t) : p;
  }
  return {t, off[n]};
}

static std::string fmtNum(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string str(const Term &t, const std::function<std::string(ClassId)> &className) {
  auto rec = [&](const Term &x) { return str(x, className); };
  switch (t->kind) {
  case TermKind::Const: return fmtNum(t->value);
  case TermKind::Read: {
    std::string s = className(t->cls) + "[";
    for (size_t i = 0; i < t->idx.size(); ++i)
      s += (i ? ", " : "") + t->idx[i].str();
    return s + "]";
  }
  case TermKind::Apply: {
    if (t->fn == Fn::Add || t->fn == Fn::Mul) {
      std::string s = "(";
      for (size_t i = 0; i < t->args.size(); ++i)
        s += (i ? (t->fn == Fn::Add ? " + " : " * ") : "") + rec(t->args[i]);
      return s + ")";
    }
    std::string s = t->fn == Fn::Opaque ? t->name : fnName(t->fn);
    s += "(";
    for (size_t i = 0; i < t->args.size(); ++i)
      s += (i ? ", " : "") + rec(t->args[i]);
    return s + ")";
  }
  case TermKind::Sum:
    return std::string(t->red == Fn::Max2 ? "max" : t->red == Fn::Min2 ? "min" : t->red == Fn::Mul ? "prod" : "sum") + "(k!" + std::to_string(t->level) + " in [" + t->lo.str() + ", " + t->hi.str() +
           "): " + rec(t->args[0]) + ")";
  case TermKind::Select:
    return "(" + t->cond.str() + " ? " + rec(t->args[0]) + " : " + rec(t->args[1]) + ")";
  }
  return "?";
}

} // namespace shardproof::ir
