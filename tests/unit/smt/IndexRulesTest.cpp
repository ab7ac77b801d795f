// The index arithmetic that reshapes produce (split hidden into heads, merge
// heads back), simplified without the solver; each rule is also checked
// against Z3 so a wrong rule cannot hide behind a matching wrong test.
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof::smt;

namespace {

Expr k() { return Expr::intVar("k"); }
Expr c(int64_t v) { return Expr::intConst(v); }

// The rewrite must be an equivalence for every integer value of its variables.
void expectEquivalent(const Expr &before, const Expr &after) {
  Solver s;
  EXPECT_TRUE(s.prove("rule.sound", before == after).proved()) << before.str() << "  vs  " << after.str();
}

} // namespace

TEST(IndexRules, MergingHeadsBackGivesTheFlatIndex) {
  // Reshape [b, s, heads, 4] -> [b, s, 4*heads] reads head k // 4, offset k % 4;
  // the shard's column is 4*(k // 4) + k % 4 - 8, which is just k - 8.
  Expr raw = c(4) * floorDiv(k(), c(4)) + mod(k(), c(4)) - c(8);
  Expr simple = raw.simplify();
  EXPECT_TRUE(simple.same((k() - c(8)).simplify())) << simple.str();
  expectEquivalent(raw, simple);
}

TEST(IndexRules, WhichHeadBecomesARangeOfColumns) {
  // "head k // 4 lives on rank 1" is "column k >= 8": a split point for sums.
  Expr cond = (floorDiv(k(), c(4)) >= c(2)).simplify();
  EXPECT_TRUE(cond.same((k() >= c(8)).simplify())) << cond.str();
  expectEquivalent(floorDiv(k(), c(4)) >= c(2), cond);
  for (auto raw : {floorDiv(k(), c(4)) < c(2), floorDiv(k(), c(4)) <= c(2), floorDiv(k(), c(4)) > c(2),
                   floorDiv(k(), c(4)) == c(2), c(1) - floorDiv(k(), c(4)) >= c(0)}) {
    Expr simple = raw.simplify();
    EXPECT_FALSE(simple.str().find("//") != std::string::npos) << "still divides: " << simple.str();
    expectEquivalent(raw, simple);
  }
}

TEST(IndexRules, WholeMultiplesLeaveTheDivision) {
  Expr h = Expr::intVar("h");
  Expr raw = floorDiv(c(4) * h + k() + c(9), c(4)); // (4h + k + 9) // 4 = h + 2 + (k + 1) // 4
  Expr simple = raw.simplify();
  expectEquivalent(raw, simple);
  EXPECT_TRUE(mod(c(4) * h + k(), c(4)).simplify().same(mod(k(), c(4)).simplify()));
}

TEST(IndexRules, ExactDivisionSolvesAScaledHeadIndex) {
  // Unifying 4*u + k with 4*i - 8 + k binds u = i - 2.
  Expr i = Expr::intVar("i");
  auto u = divideExact(c(4) * i - c(8), 4);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->same((i - c(2)).simplify())) << u->str();
  EXPECT_FALSE(divideExact(c(4) * i - c(7), 4)) << "not a multiple of 4: no integer solution to claim";
  EXPECT_FALSE(divideExact(c(2) * i, 4));
}

TEST(IndexRules, EvaluationWithoutTheSolverFollowsFloorSemantics) {
  Expr n = Expr::intVar("n");
  auto env = [](const std::string &v) -> std::optional<int64_t> {
    if (v == "n")
      return -7;
    return std::nullopt;
  };
  EXPECT_EQ(floorDiv(n, c(4)).eval(env), -2);
  EXPECT_EQ(mod(n, c(4)).eval(env), 1);
  EXPECT_EQ(ite(n < c(0), c(10), c(20)).eval(env), 10);
  EXPECT_EQ((n < c(0) && n > c(-10)).eval(env), 1);
  EXPECT_EQ((n + Expr::intVar("unknown")).eval(env), std::nullopt) << "an unknown variable is not guessed";
}

// The evaluator answers for kept models too (Solver.cpp): a product past
// int64 that wrapped to a small number would make a false query read true.
TEST(IndexRules, EvaluationPastInt64HasNoValueInsteadOfAWrappedOne) {
  Expr n = Expr::intVar("n");
  auto big = [](const std::string &) -> std::optional<int64_t> { return int64_t{1} << 40; };
  EXPECT_EQ((n * n < c(5)).eval(big), std::nullopt) << "2^80 wrapped to 0";
  EXPECT_EQ((n * n * n).eval(big), std::nullopt);
  EXPECT_EQ((n * c(1 << 20) + n).eval(big), (int64_t{1} << 60) + (int64_t{1} << 40));
  auto least = [](const std::string &) -> std::optional<int64_t> { return INT64_MIN; };
  EXPECT_EQ((c(0) - n).eval(least), std::nullopt);
  EXPECT_EQ(floorDiv(n, c(3)).eval(least), INT64_MIN / 3 - 1);
}

// Evaluated again, an expression reads its compiled form: the same answers.
TEST(IndexRules, AnExpressionEvaluatedTwiceGivesTheSameAnswers) {
  Expr n = Expr::intVar("n"), i = Expr::intVar("i");
  Expr e = ite(i < floorDiv(n, c(2)), i * c(2), mod(i, c(3)) - n);
  for (int64_t iv : {0, 3, 7, 9})
    for (int round = 0; round < 2; ++round) {
      auto env = [&](const std::string &v) -> std::optional<int64_t> { return v == "n" ? 16 : iv; };
      int64_t want = iv < 8 ? 2 * iv : iv % 3 - 16;
      EXPECT_EQ(e.eval(env), want) << "i = " << iv << ", round " << round;
    }
}

TEST(IndexRules, AScaledHeadIndexComparesAsAHeadBound) {
  Expr h = Expr::intVar("h");
  // 4*h < 6 holds exactly for h < 2; 4*h <= 6 too; 4*h == 6 never.
  for (auto raw : {c(4) * h < c(6), c(4) * h <= c(6), c(4) * h > c(6), c(4) * h >= c(6), c(4) * h == c(8),
                   c(4) * h - c(2) * k() < c(7)}) {
    Expr simple = raw.simplify();
    expectEquivalent(raw, simple);
  }
  EXPECT_EQ((c(4) * h < c(6)).simplify().str(), "h < 2");
  EXPECT_EQ((c(4) * h == c(6)).simplify().asBool(), false);
}

TEST(IndexRules, AProductOfSizesDividedByItsOwnFactorsCancels) {
  // A [b, s, 32] tensor viewed as [b, s, -1] has (b*s*32) // (b*s) = 32
  // columns; the division is exact as polynomials, so it is 32 wherever b*s != 0.
  Expr b = Expr::intVar("b"), s = Expr::intVar("s");
  EXPECT_TRUE(floorDiv(b * s * c(32), b * s).simplify().same(c(32))) << floorDiv(b * s * c(32), b * s).simplify().str();
  EXPECT_TRUE(mod(b * s * c(32), s * b).simplify().same(c(0)));
  Expr sum = floorDiv(c(4) * b * s + c(8) * b, c(2) * b).simplify(); // 2s + 4
  EXPECT_TRUE(sum.same((c(2) * s + c(4)).simplify())) << sum.str();
  // Not a multiple: left alone (b*s + 1 over b*s is not a polynomial).
  EXPECT_NE(floorDiv(b * s + c(1), b * s).str().find("//"), std::string::npos);
  EXPECT_NE(floorDiv(c(3) * b * s, c(2) * b).str().find("//"), std::string::npos);
}

TEST(IndexRules, AMultipleOfASizeOverThatSizeHasNoZeroGuard) {
  // (b*i + j) // b with the offset j dropped (the prover's projection of a
  // flattened row index) is i: Z3 alone writes ite(b == 0, ..., i), which
  // never matches the rank's plain i.
  Expr b = Expr::intVar("b"), i = Expr::intVar("i"), j = Expr::intVar("j");
  Expr e = floorDiv(b * i + j, b).substitute({j}, {c(0)}).simplify();
  EXPECT_TRUE(e.same(i)) << e.str();
}

TEST(IndexRules, AModulusOfAnIndexKnownInRangeIsTheIndex) {
  // On a shard of one rotary head (0 <= k < 4), "k % 4 < 2" is "k < 2".
  auto inRange = [](const Expr &x, int64_t m) { return x.same(k()) && m == 4; };
  Expr cond = dropModuli(mod(k(), c(4)) < c(2), inRange).simplify();
  EXPECT_TRUE(cond.same((k() < c(2)).simplify())) << cond.str();
  EXPECT_TRUE(dropModuli(floorDiv(k(), c(4)) + c(1), inRange).simplify().same(c(1)));
  // Not known in range: kept.
  Expr h = Expr::intVar("h");
  EXPECT_NE(dropModuli(mod(h, c(4)), inRange).str().find("%"), std::string::npos);
}
