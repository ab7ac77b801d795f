// The prover's linear rewrites (Linear.cpp, Prover.cpp), each checked against
// numbers: products distributed over sums, adjacent sum ranges merged, and a
// sum split where 2*k crosses a bound (a shard padded to a multiple of 2).
#include "Prover.h"

#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;
using smt::Expr;

namespace {

Expr sym(const char *n) { return Expr::intVar(n); }
Expr num(int64_t v) { return Expr::intConst(v); }
Term read(ClassId c, Expr i) { return mkRead(c, {std::move(i)}); }

// A term's value with each read of class c at index i a fixed pseudo-random
// number, and the symbols taken from `sizes`.
double value(const Term &t, const std::map<std::string, int64_t> &sizes, std::map<std::string, int64_t> bound = {}) {
  auto env = [&](const std::string &n) -> std::optional<int64_t> {
    if (auto it = bound.find(n); it != bound.end())
      return it->second;
    if (auto it = sizes.find(n); it != sizes.end())
      return it->second;
    return std::nullopt;
  };
  switch (t->kind) {
  case TermKind::Const:
    return t->value;
  case TermKind::Read: {
    int64_t i = *t->idx[0].eval(env);
    return std::sin(1.7 * double(t->cls) + 0.37 * double(i) + 0.11 * double(i * i));
  }
  case TermKind::Apply: {
    double acc = t->fn == Fn::Mul ? 1 : 0;
    for (auto &a : t->args)
      acc = t->fn == Fn::Mul ? acc * value(a, sizes, bound) : acc + value(a, sizes, bound);
    return acc;
  }
  case TermKind::Sum: {
    double acc = 0;
    int64_t lo = *t->lo.eval(env), hi = *t->hi.eval(env);
    for (int64_t k = lo; k < hi; ++k) {
      bound["k!" + std::to_string(t->level)] = k;
      acc += value(t->args[0], sizes, bound);
    }
    return acc;
  }
  case TermKind::Select:
    return *t->cond.eval(env) ? value(t->args[0], sizes, bound) : value(t->args[1], sizes, bound);
  }
  return NAN;
}

struct LinearTest : ::testing::Test {
  smt::Solver solver;
  ClassTable classes;
  Prover prover{solver, classes};
  Expr k = boundVar(0);
  Term sumTo(Expr hi, Term body) { return mkSum(0, num(0), std::move(hi), std::move(body)); }
};

} // namespace

// sum_k w[k] * (p0[k] + p1[k]) + 3 * (a[0] + a[1]): six addends, same value.
TEST_F(LinearTest, ExpandLinearDistributesProductsAndSumsExactly) {
  Term t = mkAdd({sumTo(sym("n"), mkMul({read(1, k), mkAdd({read(2, k), read(3, k)})})),
                  mkMul({mkConst(3), mkAdd({read(4, num(0)), read(4, num(1))})})});
  auto e = expandLinear(t);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)->args.size(), 4u); // two sums, two scaled reads
  for (int64_t n = 0; n < 6; ++n)
    EXPECT_NEAR(value(t, {{"n", n}}), value(*e, {{"n", n}}), 1e-12) << n;
}

// The moved all-reduce: (p0 + p1) @ w is p0 @ w + p1 @ w; one bias per rank is not.
TEST_F(LinearTest, SumOverRanksCommutesWithTheContraction) {
  prover.push(sym("n") >= num(1));
  Term moved = sumTo(sym("n"), mkMul({read(1, k), mkAdd({read(2, k), read(3, k)})}));
  Term partials = mkAdd({sumTo(sym("n"), mkMul({read(2, k), read(1, k)})), sumTo(sym("n"), mkMul({read(3, k), read(1, k)}))});
  EXPECT_TRUE(prover.equal(moved, partials, 0));
  Term bias = read(5, num(0));
  EXPECT_FALSE(prover.equal(mkAdd({moved, bias}), mkAdd({partials, bias, bias}), 0));
}

// sum_{k<a} f(k) + sum_{k<b} f(k+a) = sum_{k<a+b} f(k), for a, b >= 0; a gap
// (f(k+a+1)) or an overlap (f(k+a-1)) is not the whole sum.
TEST_F(LinearTest, AdjacentSumRangesMergeOnlyWhenTheyTile) {
  Expr a = sym("a"), b = sym("b");
  prover.push(a >= num(0) && b >= num(0));
  Term whole = sumTo(a + b, read(1, k));
  auto pieces = [&](int64_t shift) { return mkAdd({sumTo(a, read(1, k)), sumTo(b, read(1, k + a + num(shift)))}); };
  EXPECT_TRUE(prover.equal(pieces(0), whole, 0));
  EXPECT_FALSE(prover.equal(pieces(1), whole, 0));
  EXPECT_FALSE(prover.equal(pieces(-1), whole, 0));
  for (int64_t x = 0; x < 4; ++x)
    for (int64_t y = 0; y < 4; ++y)
      EXPECT_NEAR(value(pieces(0), {{"a", x}, {"b", y}}), value(whole, {{"a", x}, {"b", y}}), 1e-12);
  prover.pop();
  // Without a >= 0, sum_{k<a} is empty for a < 0 while the merged range is not.
  EXPECT_FALSE(prover.equal(pieces(0), whole, 0));
}

// Rows of shard 0 of a sequence padded to a multiple of 2 satisfy 2*k < n + 1:
// the sum splits at ceil((n + 1) / 2) and keeps its value.
TEST_F(LinearTest, SumSplitsWhereTwiceTheIndexCrossesABound) {
  prover.push(sym("n") >= num(1));
  Term t = sumTo(sym("n"), mkSelect(num(2) * k < sym("n") + num(1), read(1, k), read(2, k)));
  Term n = prover.normalize(t, 0);
  EXPECT_FALSE(sameTerm(n, t)) << "split at the shard boundary";
  for (int64_t v = 1; v < 9; ++v)
    EXPECT_NEAR(value(t, {{"n", v}}), value(n, {{"n", v}}), 1e-12) << v;
  // Negative coefficient and non-strict comparison: 3 - 3*k >= 0 - n, i.e. 3*k <= n + 3.
  Term u = sumTo(sym("n"), mkSelect(num(3) - num(3) * k >= num(0) - sym("n"), read(1, k), read(2, k)));
  Term nu = prover.normalize(u, 0);
  for (int64_t v = 1; v < 12; ++v)
    EXPECT_NEAR(value(u, {{"n", v}}), value(nu, {{"n", v}}), 1e-12) << v;
}

// A mean's coefficient is a size: the reference's 1/(8*batch) against a
// data-parallel rank's 1/2 * 1/(8*half) per shard, equal where batch ==
// 2*half and not otherwise (an uneven split, or the average forgotten).
TEST_F(LinearTest, CoefficientsThatAreSizesCompareByTheSolver) {
  Expr batch = sym("batch"), half = sym("half");
  auto count = [&](Expr n) { return mkMul({mkConst(8), mkSum(1, num(0), std::move(n), mkConst(1))}); };
  auto meanOf = [&](ClassId c, Expr n, double scale) {
    return mkMul({mkConst(scale), mkApply(Fn::Recip, {count(n)}), sumTo(n, read(c, k))});
  };
  Term whole = mkMul({mkApply(Fn::Recip, {count(batch)}), mkAdd({sumTo(half, read(1, k)), sumTo(half, read(2, k))})});
  Term averaged = mkAdd({meanOf(1, half, 0.5), meanOf(2, half, 0.5)});
  Term summed = mkAdd({meanOf(1, half, 1), meanOf(2, half, 1)});
  prover.push(half >= num(1) && batch == num(2) * half);
  EXPECT_TRUE(prover.equal(whole, averaged, 0));
  EXPECT_FALSE(prover.equal(whole, summed, 0));
  prover.pop();
  prover.push(half >= num(1) && batch == num(2) * half + num(1));
  EXPECT_FALSE(prover.equal(whole, averaged, 0)) << "uneven: the coefficients differ";
}

// A row-parallel bias added as b / P on each of P ranks before the all-reduce
// sums to b; b on each rank sums to P * b; a third on each of two ranks is
// not b. Opposite signs are not collected (-inf/2 - -inf/4 is no -inf/4).
TEST_F(LinearTest, SharesOfABiasAddedOnEveryRankSumToTheBias) {
  prover.push(sym("n") >= num(1));
  auto partial = [&](ClassId c) { return sumTo(sym("n"), mkMul({read(c, k), read(1, k)})); };
  Term bias = read(5, num(0));
  Term reference = mkAdd({partial(2), partial(3), bias});
  auto ranks = [&](double share) {
    return mkAdd({partial(2), mkMul({mkConst(share), bias}), partial(3), mkMul({mkConst(share), bias})});
  };
  EXPECT_TRUE(prover.equal(reference, ranks(0.5), 0));
  EXPECT_FALSE(prover.equal(reference, ranks(1), 0));
  EXPECT_FALSE(prover.equal(reference, ranks(1.0 / 3), 0));
  Term mixed = mkAdd({partial(2), partial(3), mkMul({mkConst(0.5), bias}), mkMul({mkConst(-0.25), bias})});
  EXPECT_FALSE(prover.equal(mkAdd({partial(2), partial(3), mkMul({mkConst(0.25), bias})}), mixed, 0));
  for (int64_t v = 1; v < 4; ++v)
    EXPECT_NEAR(value(reference, {{"n", v}}), value(ranks(0.5), {{"n", v}}), 1e-12) << v;
}
