// A softmax computed stably, exp(x - m) / sum_k exp(y_k - m), is the plain
// exp(x) / sum_k exp(y_k): exp(-m) is a common factor of the numerator and of
// every addend of the denominator. Megatron's vocab-parallel cross-entropy
// saves its softmax shifted by the all-reduced max; the reference's
// log-softmax backward reads an unshifted one. The identity is exact over the
// reals when the denominator's sums are not empty (checked on the path).
#include "Prover.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

bool isMinus(const Term &t, const Term &m) {
  return t->kind == TermKind::Apply && t->fn == Fn::Mul && t->args.size() == 2 &&
         t->args[0]->kind == TermKind::Const && t->args[0]->value == -1 && sameTerm(t->args[1], m);
}

// exp(... + -m + ...) without the -m, or nullptr when `e` is no such exp.
Term withoutShift(const Term &e, const Term &m) {
  if (e->kind != TermKind::Apply || e->fn != Fn::Exp || e->args[0]->kind != TermKind::Apply ||
      e->args[0]->fn != Fn::Add)
    return nullptr;
  std::vector<Term> rest;
  bool found = false;
  for (auto &a : e->args[0]->args) {
    if (!found && isMinus(a, m))
      found = true;
    else
      rest.push_back(a);
  }
  return found ? mkApply(Fn::Exp, {mkAdd(std::move(rest))}) : nullptr;
}

} // namespace

// One addend of the denominator, sum_k ... sum_l exp(y - m), without the -m;
// nullptr if it is not such a sum or a range may be empty.
Term Prover::unshiftedSum(const Term &t, const Term &m) {
  if (t->kind != TermKind::Sum || t->red != Fn::Add)
    return nullptr;
  {
    Scope s(*this, t->lo < t->hi);
    if (!implies(t->lo < t->hi, "softmax.shift"))
      return nullptr;
  }
  const Term &body = t->args[0];
  Term inner = body->kind == TermKind::Sum ? unshiftedSum(body, m) : withoutShift(body, m);
  return inner ? mkReduceLike(t, t->lo, t->hi, inner) : nullptr;
}

Term Prover::cancelSoftmaxShift(const Term &t) {
  if (t->kind != TermKind::Apply || t->fn != Fn::Mul)
    return t;
  // Exactly one exp(... - m) and one recip over sums of exp(... - m).
  for (size_t e = 0; e < t->args.size(); ++e) {
    const Term &num = t->args[e];
    if (num->kind != TermKind::Apply || num->fn != Fn::Exp || num->args[0]->kind != TermKind::Apply ||
        num->args[0]->fn != Fn::Add)
      continue;
    for (auto &shift : num->args[0]->args) {
      if (shift->kind != TermKind::Apply || shift->fn != Fn::Mul || shift->args.size() != 2 ||
          shift->args[0]->kind != TermKind::Const || shift->args[0]->value != -1)
        continue;
      const Term &m = shift->args[1];
      unsigned shiftedExps = 0;
      for (auto &a : t->args)
        shiftedExps += withoutShift(a, m) != nullptr;
      if (shiftedExps != 1)
        continue;
      for (size_t r = 0; r < t->args.size(); ++r) {
        const Term &rc = t->args[r];
        if (rc->kind != TermKind::Apply || rc->fn != Fn::Recip)
          continue;
        const Term &den = rc->args[0];
        std::vector<Term> addends = isAddTerm(den) ? den->args : std::vector<Term>{den}, plain;
        for (auto &a : addends) {
          Term u = unshiftedSum(a, m);
          if (!u)
            break;
          plain.push_back(u);
        }
        if (plain.size() != addends.size())
          continue;
        std::vector<Term> args = t->args;
        args[e] = withoutShift(num, m);
        args[r] = mkApply(Fn::Recip, {mkAdd(std::move(plain))});
        return mkMul(std::move(args));
      }
    }
  }
  return t;
}

} // namespace shardproof::relation
