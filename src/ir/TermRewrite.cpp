// Walks over terms: rewriting their index expressions (substitution,
// re-levelling binders), renaming the classes they read, and the queries and
// printing that read them whole. Construction and comparison are Term.cpp.
#include "shardproof/ir/Term.h"
#include "TermNodes.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

namespace shardproof::ir {

using detail::finish;

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
static bool keptKind(const Term &before, const Term &after) {
  return after->kind == before->kind && after->kind != TermKind::Const;
}
static bool keptKinds(const std::vector<Term> &before, const std::vector<Term> &after) {
  for (size_t i = 0; i < before.size(); ++i)
    if (!keptKind(before[i], after[i]))
      return false;
  return true;
}
// `t` with other children, its hash and skeleton computed again.
static Term copyWith(const Term &t, std::vector<Term> args) {
  TermNode n = *t;
  n.args = std::move(args);
  return finish(std::move(n));
}

// Renamed operands of a flat, folded Add or Mul that mkAdd / mkMul would
// leave as they are: no operand became one of the same op (to flatten), each
// Apply kept its function, and they are still in the stable order the
// constructor sorts by (a layer copy's images keep their classes' order).
static bool stillSorted(const std::vector<Term> &before, const std::vector<Term> &after) {
  for (size_t i = 0; i < after.size(); ++i) {
    if (after[i]->kind == TermKind::Apply && after[i]->fn != before[i]->fn)
      return false;
    if (i > 0 && detail::acBefore(after[i], after[i - 1]))
      return false;
  }
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
      TermNode n = *t; // its index expressions were simplified when t was made
      n.cls = c;
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
      out = copyWith(t, std::move(args));
    } else if ((t->fn == Fn::Add || t->fn == Fn::Mul) && keptKinds(t->args, args) && stillSorted(t->args, args)) {
      out = copyWith(t, std::move(args)); // what mkAdd / mkMul would build: nothing to flatten, fold or move
    } else {
      out = mkApply(t->fn, std::move(args), t->name);
    }
    break;
  }
  case TermKind::Sum: {
    Term body = renameIn(t->args[0], rename, done);
    if (body == t->args[0]) {
      out = t;
    } else if (keptKind(t->args[0], body)) {
      out = copyWith(t, {std::move(body)});
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
      out = copyWith(t, {std::move(a), std::move(b)});
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

bool readsData(const Term &t) {
  if (t->kind == TermKind::Read)
    for (auto &e : t->idx)
      if (e.hasApp())
        return true;
  if (t->kind == TermKind::Select && t->cond.hasApp())
    return true;
  if (t->kind == TermKind::Sum && (t->lo.hasApp() || t->hi.hasApp()))
    return true;
  for (auto &a : t->args)
    if (readsData(a))
      return true;
  return false;
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
