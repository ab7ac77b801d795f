// Constant folding at the edges of int64_t (fuzzing finding, see
// tests/fuzz/regressions/relation): folds that do not fit are left to Z3's
// unbounded integers instead of wrapping (undefined behaviour, and a wrong size).
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace shardproof::smt;

namespace {
constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
Expr c(int64_t v) { return Expr::intConst(v); }
} // namespace

TEST(SmtFold, SumBeyondInt64IsExact) {
  Expr e = c(kMax) + c(1);
  ASSERT_TRUE(e.isValid());
  EXPECT_FALSE(e.asInt()) << "does not fit in int64_t, so it must not fold: " << e.str();
  Solver s;
  EXPECT_TRUE(s.prove("exact", e - c(1) == c(kMax)).proved()) << e.str();
  EXPECT_TRUE(s.prove("positive", e > c(kMax)).proved()) << "did not wrap to a negative number";
}

TEST(SmtFold, DifferenceProductAndNegationBeyondInt64AreExact) {
  Solver s;
  EXPECT_TRUE(s.prove("sub", c(kMin) - c(1) < c(kMin)).proved());
  EXPECT_TRUE(s.prove("mul", c(kMax) * c(2) > c(kMax)).proved());
  EXPECT_TRUE(s.prove("neg", -c(kMin) > c(kMax)).proved());
  EXPECT_FALSE((-c(kMin)).asInt());
}

TEST(SmtFold, DivisionEdgesFoldOrStayExact) {
  Solver s;
  Expr q = floorDiv(c(kMin), c(-1));
  EXPECT_FALSE(q.asInt());
  EXPECT_TRUE(s.prove("div", q > c(kMax)).proved());
  ASSERT_TRUE(mod(c(kMin), c(-1)).asInt());
  EXPECT_EQ(*mod(c(kMin), c(-1)).asInt(), 0);
  // Floor modulo of a number near INT64_MIN: the remainder, not a - q*b
  // (q*b itself is below INT64_MIN here).
  ASSERT_TRUE(mod(c(kMin + 1), c(3)).asInt());
  EXPECT_EQ(*mod(c(kMin + 1), c(3)).asInt(), 2);
  EXPECT_EQ(*floorDiv(c(kMin + 1), c(3)).asInt(), -3074457345618258603);
  EXPECT_EQ(*mod(c(-7), c(-4)).asInt(), -3);
  EXPECT_EQ(*mod(c(7), c(-4)).asInt(), -1);
  // ceildiv adds b - 1 first, which must not overflow either.
  Expr cd = ceilDiv(c(kMax), c(2));
  EXPECT_TRUE(s.prove("ceildiv", cd == c(kMax / 2 + 1)).proved()) << cd.str();
}

// c*(x//c) + a*(x%c) merges to a*x only when the coefficient of x//c is a*c.
// With a = 2^62 + 1 and c = 4 that product wraps to 4 in int64, which used to
// match the coefficient 4 and turn the sum into a different term.
TEST(SmtFold, DivModMergeChecksItsProductForOverflow) {
  Expr x = Expr::intVar("x");
  int64_t a = (int64_t(1) << 62) + 1;
  Expr e = c(4) * floorDiv(x, c(4)) + c(a) * mod(x, c(4));
  Expr s = e.simplify();
  Solver solver;
  EXPECT_TRUE(solver.prove("same", s == e).proved()) << e.str() << "  simplified to  " << s.str();
}
