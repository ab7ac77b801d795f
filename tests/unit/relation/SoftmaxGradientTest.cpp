// The cross-entropy gradient, two ways. The reference's log-softmax backward
// is g - softmax(x) * sum_v g[v] with g the target's one-hot (negated), so it
// needs sum_v onehot[v] = 1: a sum of a select on `v == target` is the one
// column there is. Megatron's vocab-parallel backward saves its softmax
// shifted by the all-reduced max, exp(x - m) / sum exp(y - m), which is the
// reference's unshifted exp(x) / sum exp(y). Each rule is exact, and each
// has a near miss that must stay unproven.
#include "Prover.h"

#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;
using smt::Expr;

namespace {

struct SoftmaxGradient : ::testing::Test {
  ClassTable table;
  smt::Solver solver{2000};
  Prover prover{solver, table};
  ClassId x, w, m, m2;
  Expr vocab = Expr::intConst(16), k = boundVar(0);
  Expr target = Expr::app("val:labels", {Expr::intConst(0)});

  void SetUp() override {
    auto leaf = [&](const std::string &name, std::vector<Expr> dims) {
      ClassInfo ci;
      ci.label = name;
      ci.shape.dims.assign(dims.begin(), dims.end());
      return table.add(ci);
    };
    x = leaf("x", {vocab});
    w = leaf("w", {vocab});
    m = leaf("max", {Expr::intConst(1)});
    m2 = leaf("other_max", {Expr::intConst(1)});
  }
  Term sum(Expr hi, Term body) { return mkSum(0, Expr::intConst(0), std::move(hi), std::move(body)); }
  Term at(ClassId c, Expr i) { return mkRead(c, {std::move(i)}); }
  Term shifted(ClassId c, Expr i, ClassId by) {
    return mkApply(Fn::Exp, {mkAdd({at(c, std::move(i)), mkNeg(at(by, Expr::intConst(0)))})});
  }
  Term softmax(Term numerator, Term denominatorBody) {
    return mkMul({std::move(numerator), mkApply(Fn::Recip, {sum(vocab, std::move(denominatorBody))})});
  }
  bool equal(const Term &a, const Term &b) {
    return prover.equal(prover.normalize(a, 0), prover.normalize(b, 0), 0);
  }
};

} // namespace

TEST_F(SoftmaxGradient, ASumOfTheTargetsOneHotIsOneWhenTheTargetIsInRange) {
  Prover::Scope s(prover, Expr::intConst(0) <= target && target < vocab);
  Term oneHot = mkSelect(k == target, mkConst(-1), mkConst(0));
  EXPECT_TRUE(equal(sum(vocab, oneHot), mkConst(-1)));
  // The column the one-hot picks is read at the target.
  Term picked = sum(vocab, mkSelect(target == k, at(w, k), mkConst(0)));
  EXPECT_TRUE(equal(picked, at(w, target)));
}

TEST_F(SoftmaxGradient, ATargetOutsideTheSummedColumnsPicksNothing) {
  // Columns [0, 8) of a rank's shard, a target in [8, 16): zero, not w[target].
  Prover::Scope s(prover, Expr::intConst(8) <= target && target < vocab);
  Term picked = sum(Expr::intConst(8), mkSelect(k == target, at(w, k), mkConst(0)));
  EXPECT_TRUE(equal(picked, mkConst(0)));
  EXPECT_FALSE(equal(picked, at(w, target)));
}

TEST_F(SoftmaxGradient, ASelectWhoseOtherColumnsAreNotZeroIsNotOneColumn) {
  Prover::Scope s(prover, Expr::intConst(0) <= target && target < vocab);
  Term softmaxMinusOneHot = sum(vocab, mkSelect(k == target, mkAdd({at(x, k), mkConst(-1)}), at(x, k)));
  EXPECT_FALSE(equal(softmaxMinusOneHot, mkAdd({at(x, target), mkConst(-1)})));
}

TEST_F(SoftmaxGradient, ASoftmaxShiftedByTheMaxIsTheUnshiftedOne) {
  Expr i = indexVar("i", 0);
  Prover::Scope s(prover, Expr::intConst(0) <= i && i < vocab);
  Term stable = softmax(shifted(x, i, m), shifted(x, k, m));
  Term plain = softmax(mkApply(Fn::Exp, {at(x, i)}), mkApply(Fn::Exp, {at(x, k)}));
  EXPECT_TRUE(equal(stable, plain));
}

TEST_F(SoftmaxGradient, ShiftsThatDoNotCancelStayUnproven) {
  Expr i = indexVar("i", 0);
  Prover::Scope s(prover, Expr::intConst(0) <= i && i < vocab);
  Term plain = softmax(mkApply(Fn::Exp, {at(x, i)}), mkApply(Fn::Exp, {at(x, k)}));
  // Numerator and denominator shifted by different amounts.
  EXPECT_FALSE(equal(softmax(shifted(x, i, m), shifted(x, k, m2)), plain));
  // Only the numerator shifted.
  EXPECT_FALSE(equal(softmax(shifted(x, i, m), mkApply(Fn::Exp, {at(x, k)})), plain));
  // Two shifted factors over one shifted denominator: exp(-m) is left over.
  Term twice = mkMul({shifted(x, i, m), shifted(w, i, m), mkApply(Fn::Recip, {sum(vocab, shifted(x, k, m))})});
  Term twicePlain = mkMul({mkApply(Fn::Exp, {at(x, i)}), mkApply(Fn::Exp, {at(w, i)}),
                           mkApply(Fn::Recip, {sum(vocab, mkApply(Fn::Exp, {at(x, k)}))})});
  EXPECT_FALSE(equal(twice, twicePlain));
}
