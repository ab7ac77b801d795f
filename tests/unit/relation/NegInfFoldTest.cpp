// A column masked with -inf: `-inf - m` folds to -inf (so its exp is 0) only
// when m is finite. A max over the masked columns alone can be -inf itself,
// and -inf - (-inf) is NaN, so that sum stays as it is.
#include "Prover.h"

#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace shardproof;
using namespace shardproof::ir;
using namespace shardproof::relation;
using smt::Expr;

namespace {

ir::Shape vec(int64_t n) {
  ir::Shape s;
  s.dims.push_back(Expr::intConst(n));
  return s;
}

struct NegInfFold : ::testing::Test {
  smt::Solver solver;
  ClassTable t;
  Prover p{solver, t};
  ClassId logits = leaf("logits");

  ClassId leaf(const std::string &name) {
    ClassInfo ci;
    ci.label = name;
    ci.shape = vec(3);
    return t.add(ci);
  }
  // The class whose element u!0 is `def` (a row max, a masked row).
  ClassId computed(const std::string &name, Term def, int64_t n = 3) {
    ClassInfo ci;
    ci.kind = ClassInfo::Compute;
    ci.label = name;
    ci.shape = vec(n);
    ci.def = std::move(def);
    bool created;
    return t.intern(ci, created);
  }
  // Column k of where(k >= 1, -inf, logits): columns 1 and 2 are padding.
  Term masked(const Expr &k) {
    return mkSelect(k >= Expr::intConst(1), mkConst(-INFINITY), mkRead(logits, {k}));
  }
  // The row max over columns [lo, hi), normalized as a rank's ReduceMax is
  // (split where the mask switches).
  Term rowMax(int64_t lo, int64_t hi) {
    return p.normalize(mkReduce(Fn::Max2, 0, Expr::intConst(lo), Expr::intConst(hi), masked(boundVar(0))), 0);
  }
  Term minusInfMinus(ClassId m) { return mkSub(mkConst(-INFINITY), mkRead(m, {Expr::intConst(0)})); }
};

TEST_F(NegInfFold, MaskedColumnMinusTheRowMaxIsMinusInfinity) {
  // m = max over all three columns: column 0 is real, so m is finite.
  ClassId m = computed("m", rowMax(0, 3), 1);
  Term t = p.normalize(minusInfMinus(m), 0);
  ASSERT_EQ(t->kind, TermKind::Const);
  EXPECT_TRUE(std::isinf(t->value) && t->value < 0);
  EXPECT_TRUE(sameTerm(p.normalize(mkApply(Fn::Exp, {minusInfMinus(m)}), 0), mkConst(0)));
}

TEST_F(NegInfFold, MaxOverMaskedColumnsOnlyMayBeMinusInfinity) {
  // m = max over columns 1 and 2, both -inf: -inf - m is NaN, not -inf.
  ClassId m = computed("m", rowMax(1, 3), 1);
  Term t = p.normalize(minusInfMinus(m), 0);
  EXPECT_NE(t->kind, TermKind::Const);
}

TEST_F(NegInfFold, UnknownFunctionsAreNotFinite) {
  // log(x) is -inf at 0: the fold needs every addend known finite.
  ClassId m = computed("logm", mkApply(Fn::Log, {mkRead(logits, indexVars("u", 1))}));
  EXPECT_NE(p.normalize(minusInfMinus(m), 0)->kind, TermKind::Const);
  // A plain input is a real.
  EXPECT_EQ(p.normalize(minusInfMinus(logits), 0)->kind, TermKind::Const);
}

// A mask added to attention scores 126 layers up: whether the scores are
// finite is a fact of their class, derived when each layer's class was made.
// The fold used to walk every layer's definition down to the embedding, so
// the cost grew with depth and the layer's result, having consulted the
// whole stack, was never reused for the next layer.
TEST_F(NegInfFold, AMaskOverAClassManyLayersUpConsultsThatClassOnly) {
  ClassId h = logits;
  for (int layer = 0; layer < 200; ++layer)
    h = computed("h" + std::to_string(layer),
                 mkAdd({mkRead(h, indexVars("u", 1)), mkApply(Fn::Tanh, {mkRead(logits, indexVars("u", 1))})}));
  EXPECT_EQ(t[h].finite, Finiteness::Finite);
  ClassTable::Recording rec(t);
  Term sum = p.normalize(minusInfMinus(h), 0);
  ASSERT_EQ(sum->kind, TermKind::Const);
  EXPECT_TRUE(std::isinf(sum->value) && sum->value < 0);
  EXPECT_EQ(rec.consulted(), std::vector<ClassId>{h});
  // A log anywhere below is inherited: not known finite, no fold.
  ClassId l = computed("log", mkApply(Fn::Log, {mkRead(logits, indexVars("u", 1))}));
  ClassId above = computed("above", mkAdd({mkRead(l, indexVars("u", 1)), mkRead(h, indexVars("u", 1))}));
  EXPECT_EQ(t[above].finite, Finiteness::Unknown);
  EXPECT_NE(p.normalize(minusInfMinus(above), 0)->kind, TermKind::Const);
}

} // namespace
