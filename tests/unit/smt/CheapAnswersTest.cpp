// Answers found before Z3 is asked: index bounds proven by intervals
// (smt/Intervals.h) and kept models moved to a query's own index bounds
// (smt/Repair.h). Each must give exactly Z3's answer: a goal that does not
// follow is never proven, and a size no assumption leaves free is never moved.
#include "Terms.h"
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof::smt;
using namespace shardproof::smt::test;

TEST(Intervals, AnIndexBoundOnThePathProvesTheSameBoundWrittenAnotherWay) {
  // 0 <= i < 256 => not (256 <= i): what a cover asks of every shard's
  // column index, 0.7 ms each in Z3.
  Solver s;
  Expr i = sym("i!2"), b = sym("batch");
  s.assume(b >= k(1));
  EXPECT_TRUE(s.prove("cond", implies(k(0) <= i && i < k(256) && k(0) <= b, !(k(256) <= i)), false).proved());
  EXPECT_EQ(s.byIntervals(), 1u);
  EXPECT_EQ(s.totalQueries(), 0u);
}

TEST(Intervals, ABoundFollowsFromOneFactOfThePathAndConstants) {
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(1));
  EXPECT_TRUE(s.prove("cond", implies(k(0) <= i && i < n, i < n + k(3)), false).proved());
  // A multiple of a fact: 2*i < 2*n - 1 from i < n.
  EXPECT_TRUE(s.prove("cond", implies(k(0) <= i && i < n, k(2) * i < k(2) * n - k(1)), false).proved());
  EXPECT_EQ(s.byIntervals(), 2u);
  EXPECT_EQ(s.totalQueries(), 0u);
}

TEST(Intervals, TheSizeMinimumsBoundTheSizes) {
  // n >= 8 is an assumption, not on the path: i + n > 3 for every i >= 0.
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(8));
  EXPECT_TRUE(s.prove("size", implies(k(0) <= i, i + n > k(3)), false).proved());
  EXPECT_FALSE(s.prove("size", implies(k(0) <= i, i + n > k(8)), false).proved());
  EXPECT_EQ(s.byIntervals(), 1u);
}

TEST(Intervals, AGoalThatDoesNotFollowIsLeftToTheSolver) {
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(1));
  Proof p = s.prove("cond", implies(k(0) <= i && i < n, i < k(5)), true);
  EXPECT_EQ(p.status, Proof::Refuted);
  EXPECT_EQ(s.byIntervals(), 0u);
  EXPECT_EQ(s.totalQueries(), 1u);
}

TEST(Intervals, IntegerEdgesAreExactNotOffByOne) {
  // 0 <= i <= 255 leaves i = 255: i < 255 does not follow.
  Solver s;
  Expr i = sym("i");
  EXPECT_FALSE(s.prove("cond", implies(k(0) <= i && i <= k(255), i < k(255)), false).proved());
  // 2*i < 7 means i <= 3 over the integers, not i <= 2.
  EXPECT_TRUE(s.prove("cond", implies(k(0) <= i && k(2) * i < k(7), i <= k(3)), false).proved());
  EXPECT_FALSE(s.prove("cond", implies(k(0) <= i && k(2) * i < k(7), i <= k(2)), false).proved());
  // -3*i >= -10 means i <= 3 (floor of 10/3).
  EXPECT_TRUE(s.prove("cond", implies(k(0) <= i && k(-3) * i >= k(-10), i < k(4)), false).proved());
  EXPECT_FALSE(s.prove("cond", implies(k(0) <= i && k(-3) * i >= k(-10), i < k(3)), false).proved());
}

TEST(Intervals, ADisequalityGoalNeedsOneSideProven) {
  Solver s;
  Expr i = sym("i");
  EXPECT_TRUE(s.prove("cond", implies(k(3) <= i && i < k(9), !(i == k(2))), false).proved());
  EXPECT_FALSE(s.prove("cond", implies(k(0) <= i && i < k(9), !(i == k(2))), false).proved());
}

TEST(Repair, AKeptModelMovedInsideTheNewIndexBoundsAnswersSat) {
  // The first model has i = 0; the second query needs 12 <= i < 16, which
  // its own conjuncts say: the kept model with i moved there satisfies it.
  Solver s;
  Expr n = sym("n"), i = sym("i!1");
  s.assume(n >= k(1));
  EXPECT_EQ(s.check("first", k(0) <= i && i < k(1) && i < n, false).result, Result::Sat);
  Expr path = k(0) <= i && i < k(16) && k(10) <= i;
  EXPECT_FALSE(s.prove("cond", implies(path, i < k(12)), false).proved());
  EXPECT_EQ(s.witnessed(), 1u);
  EXPECT_EQ(s.totalQueries(), 1u);
}

TEST(Repair, ASizeAnAssumptionNamesIsNeverMoved) {
  // n is a size (assumed n >= 1): a model with n < 5 says nothing of n > 50.
  Solver s;
  Expr n = sym("n");
  s.assume(n >= k(1));
  EXPECT_EQ(s.check("small", n < k(5), false).result, Result::Sat);
  EXPECT_EQ(s.check("large", n > k(50), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 0u);
  EXPECT_EQ(s.totalQueries(), 2u);
  // And an unsatisfiable query stays unsatisfiable whatever the repair tries.
  EXPECT_EQ(s.check("none", n < k(1), false).result, Result::Unsat);
}

TEST(Repair, AMovedModelMustStillSatisfyEveryOtherConjunct) {
  // Bounds put i and j at 0; i + j == 20 then fails: Z3 decides (Sat).
  Solver s;
  Expr i = sym("i!0"), j = sym("i!1");
  EXPECT_EQ(s.check("first", i == k(0) && j == k(0), false).result, Result::Sat);
  EXPECT_EQ(s.check("sum", k(0) <= i && i < k(16) && k(0) <= j && j < k(16) && i + j == k(20), false).result,
            Result::Sat);
  EXPECT_EQ(s.witnessed(), 0u);
  EXPECT_EQ(s.totalQueries(), 2u);
  // Unsatisfiable bounds: no repair, and Z3 says Unsat.
  EXPECT_EQ(s.check("empty", k(5) <= i && i < k(3), false).result, Result::Unsat);
}
