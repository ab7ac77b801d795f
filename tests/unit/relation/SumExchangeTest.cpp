// Nested reductions compared in the other order: a batch-first reference
// reduces a weight gradient over (batch, seq), a sequence-parallel rank over
// (seq, batch) after its all-gather; the two are the same sum. The exchange
// needs independent ranges and one kind of reduction, else no proof.
#include "Prover.h"
#include "Replayer.h"

#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;
using smt::Expr;

namespace {

struct SumExchange : ::testing::Test {
  ClassTable table;
  smt::Solver solver{2000};
  Prover prover{solver, table};
  ClassId x, g;
  Expr batch = Expr::intVar("batch"), seq = Expr::intVar("seq");
  Expr k0 = boundVar(0), k1 = boundVar(1);

  void SetUp() override {
    auto leaf = [&](const std::string &name) {
      ClassInfo ci;
      ci.label = name;
      ci.shape.dims = {batch, seq};
      return table.add(ci);
    };
    x = leaf("x");
    g = leaf("g");
  }
  // red over k0 in [0, outer) of red over k1 in [0, inner) of body.
  Term nest(Fn red, Expr outer, Expr inner, Term body) {
    return mkReduce(red, 0, Expr::intConst(0), std::move(outer), mkReduce(red, 1, Expr::intConst(0), std::move(inner), std::move(body)));
  }
  Term xg(Expr b, Expr s) { return mkMul({mkRead(x, {b, s}), mkRead(g, {b, s})}); }
};

} // namespace

TEST_F(SumExchange, AWeightGradientSummedOverBatchThenSeqEqualsSeqThenBatch) {
  Term batchFirst = nest(Fn::Add, batch, seq, xg(k0, k1));
  Term seqFirst = nest(Fn::Add, seq, batch, xg(k1, k0));
  EXPECT_TRUE(prover.equal(batchFirst, seqFirst, 0));
  EXPECT_TRUE(prover.equal(seqFirst, batchFirst, 0));
}

TEST_F(SumExchange, TheExchangedSumStillReadsEachElementWhereItWas) {
  // The rank reading x at the swapped index (x[s, b]) is another sum.
  Term batchFirst = nest(Fn::Add, batch, seq, xg(k0, k1));
  Term transposedRead = nest(Fn::Add, seq, batch, mkMul({mkRead(x, {k0, k1}), mkRead(g, {k1, k0})}));
  EXPECT_FALSE(prover.equal(batchFirst, transposedRead, 0));
}

TEST_F(SumExchange, ATriangularSumIsNotExchanged) {
  // sum_{b < n} sum_{s <= b} x[b, s] is not sum_{b < n} sum_{s <= b} x[s, b]
  // (the exchange of a range depending on the outer index is another range).
  Term lower = nest(Fn::Add, batch, k0 + Expr::intConst(1), mkRead(x, {k0, k1}));
  Term upper = nest(Fn::Add, batch, k0 + Expr::intConst(1), mkRead(x, {k1, k0}));
  EXPECT_FALSE(prover.equal(lower, upper, 0));
}

TEST_F(SumExchange, AMaxOfSumsIsNotASumOfMaxes) {
  Term maxOfSums = mkReduce(Fn::Max2, 0, Expr::intConst(0), batch,
                            mkReduce(Fn::Add, 1, Expr::intConst(0), seq, mkRead(x, {k0, k1})));
  Term sumOfMaxes = mkReduce(Fn::Add, 0, Expr::intConst(0), seq,
                             mkReduce(Fn::Max2, 1, Expr::intConst(0), batch, mkRead(x, {k1, k0})));
  EXPECT_FALSE(prover.equal(maxOfSums, sumOfMaxes, 0));
  // Two maxima of one body exchange like sums do.
  EXPECT_TRUE(prover.equal(nest(Fn::Max2, batch, seq, mkRead(x, {k0, k1})), nest(Fn::Max2, seq, batch, mkRead(x, {k1, k0})), 0));
}
