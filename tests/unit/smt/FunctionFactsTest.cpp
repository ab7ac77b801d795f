// A tensor's value range (a quantified fact about one function) joins only the
// queries that apply that function, and only when it constrains nothing else:
// the answers are the ones every fact together gives.
#include "Terms.h"
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace shardproof::smt;
using namespace shardproof::smt::test;

namespace {
// forall q in [0, n): lo <= ids(q) <= hi
Expr rangeOf(const char *fn, const Expr &n, const Expr &lo, const Expr &hi) {
  Expr q = sym("q!0");
  Expr v = Expr::app(fn, {q});
  return Expr::forall({q}, implies(k(0) <= q && q < n, lo <= v && v <= hi));
}
} // namespace

TEST(FunctionFacts, AnIdsRangeStillBoundsTheIdsAQueryReads) {
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(1));
  s.assumeOnFunction(rangeOf("ids", n, k(0), k(15)), "ids", k(0) <= k(15));
  Expr read = Expr::app("ids", {i});
  EXPECT_TRUE(s.prove("reads ids", implies(k(0) <= i && i < n, read < k(16))).proved());
  EXPECT_FALSE(s.prove("reads ids", implies(k(0) <= i && i < n, read < k(15))).proved());
}

TEST(FunctionFacts, IndexArithmeticIsDecidedTheSameWithoutTheRange) {
  Solver s;
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(1));
  s.assumeOnFunction(rangeOf("ids", n, k(0), k(15)), "ids", k(0) <= k(15));
  EXPECT_TRUE(s.prove("index", implies(k(0) <= i && i < n, i < n + k(1))).proved());
  EXPECT_FALSE(s.prove("index", implies(k(0) <= i && i < n, i < k(16))).proved())
      << "a range on the ids says nothing about the sizes";
}

TEST(FunctionFacts, ARangeWhoseBoundsConstrainTheSizesStaysAFactOfEveryQuery) {
  // ids in [0, vocab - 5] over a nonempty tensor implies vocab >= 5: not a
  // fact about ids alone, so a query on the sizes must still see it.
  Solver s;
  Expr n = sym("n"), vocab = sym("vocab");
  s.assume(n >= k(1));
  s.assume(vocab >= k(1));
  s.assumeOnFunction(rangeOf("ids", n, k(0), vocab - k(5)), "ids", k(0) <= vocab - k(5));
  EXPECT_TRUE(s.prove("sizes", vocab >= k(5)).proved());
}

TEST(FunctionFacts, AFactThatAlsoAppliesTheFunctionMakesItsRangeGlobal) {
  Solver s;
  Expr n = sym("n"), m = sym("m");
  s.assume(n >= k(1));
  s.assumeOnFunction(rangeOf("ids", n, k(0), k(15)), "ids", k(0) <= k(15));
  // m is an id: the range now bounds m, and a query on m alone must know it.
  s.assume(m == Expr::app("ids", {k(0)}));
  EXPECT_TRUE(s.prove("sizes", m <= k(15)).proved());
}

TEST(FunctionFacts, ADumpedQueryDeclaresTheFunctionsItApplies) {
  Solver s;
  auto dir = std::filesystem::temp_directory_path() / ("shardproof-fn-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  s.setDumpDir(dir.string());
  Expr n = sym("n"), i = sym("i");
  s.assume(n >= k(1));
  s.assumeOnFunction(rangeOf("ids", n, k(0), k(15)), "ids", k(0) <= k(15));
  ASSERT_TRUE(s.prove("reads ids", implies(k(0) <= i && i < n, Expr::app("ids", {i}) >= k(0))).proved());
  std::string all;
  for (auto &e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path());
    std::stringstream ss;
    ss << f.rdbuf();
    all += ss.str();
  }
  EXPECT_NE(all.find("(declare-fun |ids| (Int) Int)"), std::string::npos) << all;
  std::filesystem::remove_all(dir);
}
