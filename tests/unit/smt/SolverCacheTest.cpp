// The solver's result cache, its incremental mode and the parallel prefetch:
// repeated formulas are answered once, never for a different formula or under
// different assumptions, and the answers match a fresh solver's.
#include "Terms.h"
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

using namespace shardproof::smt;
using namespace shardproof::smt::test;

TEST(SolverCache, TheSameFormulaTwiceReachesZ3OnceAndIsDumpedOnce) {
  Solver s;
  auto dir = std::filesystem::temp_directory_path() / ("shardproof-cache-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  s.setDumpDir(dir.string());
  Expr n = sym("n");
  s.assume(n >= k(1));
  Expr goal = mod(n * k(4), k(2)) == k(0);
  EXPECT_TRUE(s.prove("obligation", goal).proved());
  EXPECT_TRUE(s.prove("obligation", goal).proved());
  EXPECT_EQ(s.stats().at("obligation").unsat, 1u);
  EXPECT_EQ(s.stats().at("obligation").cached, 1u);
  EXPECT_EQ(s.cacheHits(), 1u);
  EXPECT_EQ(s.totalQueries(), 1u);
  unsigned files = 0;
  for (auto &e : std::filesystem::directory_iterator(dir))
    files += e.path().extension() == ".smt2";
  EXPECT_EQ(files, 1u) << "--smt-dump writes every distinct query once";
  std::filesystem::remove_all(dir);
}

TEST(SolverCache, ARefutationIsCachedWithItsCounterexample) {
  Solver s;
  Expr n = sym("n");
  s.assume(n >= k(1));
  Proof a = s.prove("q", mod(n, k(2)) == k(0));
  Proof b = s.prove("q", mod(n, k(2)) == k(0));
  ASSERT_EQ(a.status, Proof::Refuted);
  ASSERT_EQ(b.status, Proof::Refuted);
  EXPECT_EQ(a.counterexample.get("n"), b.counterexample.get("n"));
}

TEST(SolverCache, ANewAssumptionInvalidatesEarlierAnswers) {
  Solver s;
  Expr n = sym("n");
  Expr goal = mod(n, k(2)) == k(0);
  EXPECT_EQ(s.prove("q", goal).status, Proof::Refuted);
  s.assume(n == k(6)); // now the same goal holds
  EXPECT_TRUE(s.prove("q", goal).proved()) << "a cached refutation answered under a new assumption";
}

TEST(SolverCache, WithoutMemoEveryQueryReachesZ3) {
  Solver s;
  s.setMemo(false);
  Expr x = sym("x");
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(s.prove("q", x * x >= k(0)).proved());
  EXPECT_EQ(s.stats().at("q").unsat, 3u);
  EXPECT_EQ(s.cacheHits(), 0u);
}

// The long-lived solver pops each query: a goal asserted for one query must not
// leak into the next (x = 3 then x = 4 are both satisfiable).
TEST(SolverIncremental, QueriesDoNotSeeEachOther) {
  Solver s;
  Expr x = sym("x");
  s.assume(x >= k(0));
  EXPECT_EQ(s.check("a", x == k(3)).result, Result::Sat);
  EXPECT_EQ(s.check("b", x == k(4)).result, Result::Sat);
  EXPECT_EQ(s.check("c", x < k(0)).result, Result::Unsat);
  // An assumption added after the solver exists is asserted before the next query.
  s.assume(x <= k(3));
  EXPECT_EQ(s.check("d", x == k(4)).result, Result::Unsat);
  EXPECT_EQ(s.check("e", x == k(3)).result, Result::Sat);
}

TEST(SolverIncremental, AnswersLikeAFreshSolverOnNonlinearIndexGoals) {
  Expr b = sym("batch"), q = sym("seq"), h = sym("heads"), i = sym("i!0");
  std::vector<Expr> goals = {
      b * q * h * k(64) == (b * q) * (h * k(64)),
      floorDiv(b * q * k(8), k(8)) == b * q,
      mod(i + q * k(8), k(8)) == mod(i, k(8)),
      b * q > k(1), // refuted at batch = seq = 1
      h * k(2) == k(8) || h >= k(1),
  };
  Solver inc, fresh;
  fresh.setIncremental(false);
  for (Solver *s : {&inc, &fresh})
    for (auto &v : {b, q, h})
      s->assume(v >= k(1));
  for (auto &g : goals)
    EXPECT_EQ(inc.prove("g", g).status, fresh.prove("g", g).status) << g.str();
}

TEST(SolverParallel, PrefetchedProofsBecomeCacheHitsAndFalseGoalsAreAskedAgain) {
  Solver s;
  Expr n = sym("n"), m = sym("m");
  // A bound on a sum, not on single symbols: the size facts (Facts.h) decide
  // none of these goals, Z3 does.
  s.assume(n + m >= k(4));
  std::vector<Expr> goals = {n + m >= k(1), n + m >= k(2), n + m > k(3),
                             n + m >= k(5) /* false at n + m = 4 */, n + m >= k(1) /* repeated */};
  EXPECT_EQ(s.provePrefetch("obligation", goals, 2), 3u);
  EXPECT_TRUE(s.prove("obligation", goals[0]).proved());
  EXPECT_TRUE(s.prove("obligation", goals[1]).proved());
  EXPECT_TRUE(s.prove("obligation", goals[2]).proved());
  EXPECT_EQ(s.stats().at("obligation").cached, 3u);
  Proof p = s.prove("obligation", goals[3]);
  ASSERT_EQ(p.status, Proof::Refuted) << "a goal the workers did not prove is decided on the main solver";
  EXPECT_EQ(p.counterexample.get("n").value_or(0) + p.counterexample.get("m").value_or(0), 4);
}

TEST(SolverParallel, OneJobPrefetchesNothing) {
  Solver s;
  Expr n = sym("n");
  EXPECT_EQ(s.provePrefetch("obligation", {n * n >= k(0), n + k(1) > n}, 1), 0u);
  EXPECT_EQ(s.cacheHits(), 0u);
}

TEST(SolverParallel, ATimeoutInAWorkerIsNeverAProof) {
  Solver s(50);
  Expr a = sym("a"), b = sym("b"), c = sym("c");
  Expr fermat = a * a * a + b * b * b == c * c * c && a > k(0) && b > k(0) && c > k(0);
  EXPECT_EQ(s.provePrefetch("hard", {!fermat, !(fermat && a > k(1))}, 2), 0u);
  EXPECT_NE(s.prove("hard", !fermat).status, Proof::Proved);
}

// A fast incremental query can finish before the watchdog thread wakes up: a
// zero timeout must still mean no solver answer at all, not one that depends
// on the machine's load.
TEST(SolverIncremental, ZeroTimeoutAnswersUnknownEvenForAnEasyGoal) {
  Solver s(0);
  Expr x = sym("x");
  for (int i = 0; i < 20; ++i) {
    Proof p = s.prove("easy", x * x + k(i) >= k(0));
    ASSERT_EQ(p.status, Proof::Unknown);
    EXPECT_EQ(p.reason, "solver timeout after 0 ms");
  }
}
