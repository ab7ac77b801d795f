// A query that the model of an earlier satisfiable query also satisfies is
// answered Sat without Z3 (most index conditions a path leaves open are). The
// shortcut must give exactly the answers Z3 gives: a kept model is dropped
// when a fact joins, and never stands in for a range it was not built under.
#include "Terms.h"
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof::smt;
using namespace shardproof::smt::test;

namespace {
// forall q in [0, n): lo <= fn(q) <= hi
Expr rangeOf(const char *fn, const Expr &n, int64_t lo, int64_t hi) {
  Expr q = sym("q!0");
  Expr v = Expr::app(fn, {q});
  return Expr::forall({q}, implies(k(0) <= q && q < n, k(lo) <= v && v <= k(hi)));
}
} // namespace

TEST(WitnessCache, AnOpenConditionOnAPathIsRefutedByTheModelOfItsSibling) {
  // Both sides of `i < n / 2` are possible on the path 0 <= i < n: the
  // second question is answered by the first one's model.
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(2));
  Expr path = k(0) <= i && i < n;
  EXPECT_FALSE(s.prove("cond", implies(path, i < floorDiv(n, k(2))), false).proved());
  EXPECT_FALSE(s.prove("cond", implies(path && i >= k(1), i < floorDiv(n, k(2))), false).proved());
  EXPECT_EQ(s.witnessed(), 1u);
  EXPECT_EQ(s.totalQueries(), 1u);
  EXPECT_EQ(s.stats().at("cond").witnessed, 1u);
}

// The kept model has i below 3; the next query also denies `i < 5`, which
// is no bound the repair reads. At the lower end of its bounds (0) i still
// meets it; at the upper end (n - 1, n >= 10) it does not: Sat without Z3.
TEST(WitnessCache, AnIndexIsTriedAtBothEndsOfItsBounds) {
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(10));
  EXPECT_EQ(s.check("cond", k(0) <= i && i < n && i < k(3), false).result, Result::Sat);
  EXPECT_EQ(s.check("cond", k(0) <= i && i < n && !(i < k(5) && i >= k(0)), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 1u);
  EXPECT_EQ(s.check("cond", k(0) <= i && i < n && !(i < n && i >= k(0)), false).result, Result::Unsat);
}

TEST(WitnessCache, AProvedConditionIsStillAskedOfTheSolver) {
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(2));
  EXPECT_FALSE(s.prove("cond", implies(k(0) <= i && i < n, i < k(5)), false).proved());
  EXPECT_TRUE(s.prove("cond", implies(k(0) <= i && i < n, i < n + k(3)), false).proved());
  EXPECT_EQ(s.witnessed(), 0u);
}

TEST(WitnessCache, AModelFromBeforeANewFactIsNotReused) {
  // n = 6 satisfied the first query; once n < 3 is assumed it is no model.
  Solver s;
  Expr n = sym("n");
  s.assume(n >= k(0));
  EXPECT_EQ(s.check("size", n > k(5), false).result, Result::Sat);
  s.assume(n < k(3));
  EXPECT_EQ(s.check("size", n > k(4), false).result, Result::Unsat);
  EXPECT_EQ(s.witnessed(), 0u);
}

// Token ids in 5..9 over a tensor of n >= 1 elements, read at i.
struct IdsInRange : ::testing::Test {
  Solver s;
  Expr n = sym("n"), i = sym("i"), read = Expr::app("ids", {sym("i")});
  Expr inside = k(0) <= i && i < n;
  void SetUp() override {
    s.assume(n >= k(1));
    s.assumeOnFunction(rangeOf("ids", n, 5, 9), "ids", k(5) <= k(9));
  }
};

TEST_F(IdsInRange, AModelBuiltWithoutTheRangeDoesNotAnswerAQueryUnderIt) {
  // The first query does not read ids, so its model says nothing of them
  // (completed, ids is 0 everywhere); the range's instance at i joins the
  // second query, which is unsatisfiable under it, and its evaluation.
  EXPECT_EQ(s.check("index", inside, false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", inside && read == k(0), false).result, Result::Unsat);
  EXPECT_EQ(s.witnessed(), 0u);
}

TEST_F(IdsInRange, AModelBuiltUnderTheRangeAnswersQueriesUnderIt) {
  EXPECT_EQ(s.check("ids", inside && read >= k(5), false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", inside && read <= k(9), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 1u);
}

// A kept model is read without Z3, tensors included: the ids it fixed answer
// a query true at them. A query that bounds the id at its point to other
// values takes the model with the id set there (the range's instance at the
// point is part of the query, and no other fact reads ids); one no id meets
// goes to Z3.
TEST_F(IdsInRange, AKeptModelReadsTheIdsAtThePointsItFixed) {
  Expr first = inside && i == k(0);
  EXPECT_EQ(s.check("ids", first && read == k(7), false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", first && read >= k(7) && read < k(8), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 1u);
  EXPECT_EQ(s.check("ids", first && read == k(8), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 2u);
  EXPECT_EQ(s.check("ids", first && read == k(7) && read == k(8), false).result, Result::Unsat);
}

// The value set at the point must still meet the range there: 10 is above
// it, so the bound alone (ids >= 10) is no model and Z3 says Unsat.
TEST_F(IdsInRange, AnIdSetAtAPointStaysInTheRange) {
  Expr first = inside && i == k(0);
  EXPECT_EQ(s.check("ids", first && read == k(7), false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", first && read >= k(10), false).result, Result::Unsat);
  EXPECT_EQ(s.check("ids", first && read >= k(6) && read <= k(6), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 1u);
}

// A fact that reads ids outside the range (ids(0) = 7) makes every model
// carry it: the id at 0 is no longer free to take another value.
TEST(WitnessCache, AnIdAnotherFactFixesIsNotSetToAnotherValue) {
  Solver s;
  Expr n = sym("n"), i = sym("i"), read = Expr::app("ids", {i});
  s.assume(n >= k(1));
  s.assumeOnFunction(rangeOf("ids", n, 5, 9), "ids", k(5) <= k(9));
  s.assume(Expr::app("ids", {k(0)}) == k(7));
  Expr first = k(0) <= i && i < n && i == k(0);
  EXPECT_EQ(s.check("ids", first && read == k(7), false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", first && read == k(8), false).result, Result::Unsat);
}

// The range joins a query as its instances at the points the query reads,
// quantifier-free (a fifth of the time on the TP8 step): every point gets one.
TEST_F(IdsInRange, EveryReadOfTheIdsIsKeptInTheRange) {
  Expr j = sym("j"), other = Expr::app("ids", {j});
  Expr both = inside && k(0) <= j && j < n;
  EXPECT_EQ(s.check("ids", both && read + other == k(18), false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", both && read + other >= k(19), false).result, Result::Unsat);
  EXPECT_EQ(s.check("ids", both && read + other <= k(9), false).result, Result::Unsat);
}

// A model may give ids any value outside the tensor; kept, it must not answer
// a query inside the tensor with that value.
TEST_F(IdsInRange, AModelWithIdsOutOfRangeOutsideTheTensorAnswersNothingInside) {
  EXPECT_EQ(s.check("ids", Expr::app("ids", {n}) == k(100), false).result, Result::Sat);
  EXPECT_EQ(s.check("ids", inside && read == k(100), false).result, Result::Unsat);
  EXPECT_EQ(s.witnessed(), 0u);
}

// Reads under a quantifier are no points: such a query gets the range itself.
TEST_F(IdsInRange, AQuantifiedQueryGetsTheRangeItself) {
  Expr j = sym("j");
  Expr all = Expr::forall({j}, implies(k(0) <= j && j < n, Expr::app("ids", {j}) >= k(5)));
  EXPECT_TRUE(s.prove("ids", all, false).proved());
}

TEST(WitnessCache, OffWithTheResultCache) {
  // --no-memo asks every query of Z3, to compare verdicts against.
  Solver s;
  s.setMemo(false);
  Expr n = sym("n");
  s.assume(n >= k(0));
  EXPECT_EQ(s.check("size", n > k(5), false).result, Result::Sat);
  EXPECT_EQ(s.check("size", n > k(4), false).result, Result::Sat);
  EXPECT_EQ(s.witnessed(), 0u);
}

TEST(WitnessCache, AQueryThatWantsAModelGetsOneFromTheSolver) {
  Solver s;
  Expr n = sym("n");
  s.assume(n >= k(0));
  EXPECT_EQ(s.check("size", n > k(5), false).result, Result::Sat);
  CheckResult r = s.check("size", n > k(4), true);
  ASSERT_EQ(r.result, Result::Sat);
  EXPECT_TRUE(r.model.get("n").has_value());
  EXPECT_EQ(s.witnessed(), 0u);
}
