#include "shardproof/ir/Term.h"
#include "shardproof/support/Error.h"
#include "TermNodes.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

namespace shardproof::ir {

using detail::finish;

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

Term detail::finish(TermNode n) {
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
  TermNode n;
  n.kind = TermKind::Const;
  n.value = v == 0 ? 0.0 : v; // one zero: -0.0 and 0.0 compare equal as reals
  return finish(std::move(n));
}

Term mkRead(ClassId c, IndexVec idx) {
  TermNode n;
  n.kind = TermKind::Read;
  n.cls = c;
  for (auto &e : idx)
    e = e.simplify();
  n.idx = std::move(idx);
  return finish(std::move(n));
}

Term withClass(const Term &read, ClassId c) {
  TermNode n = *read;
  n.cls = c;
  return finish(std::move(n));
}

static bool isConst(const Term &t, double v) { return t->kind == TermKind::Const && t->value == v; }

// Operands of associative-commutative ops are kept flat and sorted by skeleton,
// which ignores index expressions, so a pattern and an instance sort alike.
bool detail::acBefore(const Term &a, const Term &b) {
  if (a->kind != b->kind)
    return a->kind < b->kind;
  if (a->kind == TermKind::Read && a->cls != b->cls)
    return a->cls < b->cls;
  return a->skeleton < b->skeleton;
}

static void sortAC(std::vector<Term> &args) { std::stable_sort(args.begin(), args.end(), detail::acBefore); }

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
  TermNode n;
  n.kind = TermKind::Apply;
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
  TermNode n;
  n.kind = TermKind::Apply;
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
  TermNode n;
  n.kind = TermKind::Apply;
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
  TermNode n;
  n.kind = TermKind::Apply;
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

// A reduction over k in [0, A*B) that reads k only as k div B and k mod B
// (two axes flattened into one: torch's matmul folds [s, b, h] into [s*b, h],
// and its backward sums the bias gradient over s*b rows) is the nested
// reduction over [0, A) x [0, B), since k -> (k div B, k mod B) is a
// bijection between them for a size B >= 0 (for A*B <= 0 both are empty).
static Term splitFlattened(Fn op, int level, const smt::Expr &hi, const Term &body) {
  smt::Expr k = boundVar(level);
  for (const std::string &name : hi.vars()) {
    if (name.find('!') != std::string::npos)
      continue; // an index or bound variable, not a size: its sign is unknown
    smt::Expr b = smt::Expr::intVar(name);
    auto a = smt::dividePolynomial(hi, b, false);
    if (!a || a->asInt())
      continue;
    smt::Expr outer = smt::Expr::intVar("split!outer"), inner = boundVar(level + 1);
    smt::Expr q = smt::floorDiv(k, b), r = smt::mod(k, b);
    Term t = mapExprs(relevel(body, level + 1, 1), [&](const smt::Expr &e) { return e.substitute({q, r}, {outer, inner}); });
    if (mentionsVar(t, *k.asVar()))
      continue;
    // The inner variable lies in [0, b): its own quotient by b is 0 and its remainder itself.
    smt::Expr zero = smt::Expr::intConst(0);
    t = mapExprs(t, [&](const smt::Expr &e) {
      smt::Expr f = e.substitute({outer}, {k}).simplify();
      return f.substitute({smt::floorDiv(inner, b), smt::mod(inner, b)}, {zero, inner}).simplify();
    });
    return mkReduce(op, level, smt::Expr::intConst(0), *a, mkReduce(op, level + 1, smt::Expr::intConst(0), b, t));
  }
  return nullptr;
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
  if (l && *l == 0)
    if (Term split = splitFlattened(op, level, hi, body))
      return split;
  TermNode n;
  n.kind = TermKind::Sum;
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
  TermNode n;
  n.kind = TermKind::Select;
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

} // namespace shardproof::ir
