// A product reduction (ReduceProd) through the prover and the evaluator: split
// where a select flips, the parts are multiplied, never added; a product is
// never equal to the sum of the same body; the evaluator multiplies.
#include "Prover.h"
#include "Prover.h"
#include "Replayer.h"

#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;
using smt::Expr;

namespace {

constexpr int64_t kN = 5;

struct ProductFixture : ::testing::Test {
  ClassTable table;
  smt::Solver solver{2000};
  Prover prover{solver, table};
  ClassId a, b;
  Expr k = boundVar(0);

  void SetUp() override {
    auto leaf = [&](const std::string &name) {
      ClassInfo ci;
      ci.label = name;
      ci.shape.dims.push_back(Expr::intConst(kN));
      return table.add(ci);
    };
    a = leaf("a");
    b = leaf("b");
  }
  Term prod(Expr lo, Expr hi, Term body) { return mkReduce(Fn::Mul, 0, std::move(lo), std::move(hi), std::move(body)); }
  Term at(ClassId c) { return mkRead(c, {k}); }
};

} // namespace

TEST_F(ProductFixture, TheEvaluatorMultipliesAndTheEmptyProductIsOne) {
  Replayer r(table, {});
  Term p = prod(Expr::intConst(0), Expr::intConst(kN), at(a));
  double want = 1;
  for (int64_t i = 0; i < kN; ++i)
    want *= r.at(mkRead(a, {Expr::intConst(i)}), {});
  EXPECT_NEAR(r.at(p, {}), want, 1e-12);
  // A range ending at the output index i!0: empty at i = 0.
  Term upTo = prod(Expr::intConst(0), indexVar("i", 0), at(a));
  EXPECT_EQ(r.at(upTo, {0}), 1.0);
}

TEST_F(ProductFixture, ASplitAtASelectMultipliesTheTwoPartialProducts) {
  // prod over k of (k < 2 ? a[k] : b[k]) = prod_{k<2} a[k] * prod_{2<=k<5} b[k]
  Term t = prod(Expr::intConst(0), Expr::intConst(kN), mkSelect(k < Expr::intConst(2), at(a), at(b)));
  Term n = prover.normalize(t, 0);
  ASSERT_EQ(n->kind, TermKind::Apply);
  EXPECT_EQ(n->fn, Fn::Mul) << str(n, [](ClassId c) { return std::to_string(c); });
  Replayer r(table, {});
  EXPECT_NEAR(r.at(t, {}), r.at(n, {}), 1e-12);
  double want = 1;
  for (int64_t i = 0; i < kN; ++i)
    want *= r.at(mkRead(i < 2 ? a : b, {Expr::intConst(i)}), {});
  EXPECT_NEAR(r.at(n, {}), want, 1e-12);
}

TEST_F(ProductFixture, AProductIsNotTheSumOfTheSameBody) {
  Term p = prod(Expr::intConst(0), Expr::intConst(kN), at(a));
  Term s = mkSum(0, Expr::intConst(0), Expr::intConst(kN), at(a));
  EXPECT_FALSE(prover.equal(p, s, 0));
  EXPECT_TRUE(prover.equal(p, prod(Expr::intConst(0), Expr::intConst(kN), at(a)), 0));
  // Two ranks' partial products multiplied are the whole product; added they are not.
  Term parts = mkMul({prod(Expr::intConst(0), Expr::intConst(2), at(a)),
                      mkReduce(Fn::Mul, 0, Expr::intConst(0), Expr::intConst(3), mkRead(a, {k + Expr::intConst(2)}))});
  Replayer r(table, {});
  EXPECT_NEAR(r.at(parts, {}), r.at(p, {}), 1e-12);
}
