// The rotary normal form (src/relation/Trig.cpp) in isolation: each lemma it
// applies (angle addition, cos(-x), sin^2 = 1 - cos^2, reductions added into
// one, a one-element reduction, a position's constant part) keeps the value
// of the term: both sides are evaluated on the replayer's seeded leaf data at
// every index of a small tensor. Rotated q and k shifted by the same angle
// reach the unshifted scores' normal form; only q shifted does not.
#include "Prover.h"
#include "Prover.h"
#include "Replayer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;
using smt::Expr;

namespace {

constexpr int64_t kN = 6;

struct TrigFixture : ::testing::Test {
  ClassTable table;
  smt::Solver solver{2000};
  Prover prover{solver, table};
  ClassId x, y, w, q, k;

  void SetUp() override {
    auto leaf = [&](const std::string &name, int64_t n) {
      ClassInfo ci;
      ci.label = name;
      ci.shape.dims.push_back(Expr::intConst(n));
      return table.add(ci);
    };
    x = leaf("x", kN);
    y = leaf("y", kN);
    w = leaf("w", kN);
    q = leaf("q", 4);
    k = leaf("k", 4);
    Expr i = indexVar("i", 0), j = indexVar("i", 1);
    prover.push(Expr::intConst(0) <= i && i < Expr::intConst(kN) && Expr::intConst(0) <= j &&
                j < Expr::intConst(kN));
  }

  Term at(ClassId c, const Expr &e) { return mkRead(c, {e}); }
  Term xi() { return at(x, indexVar("i", 0)); }
  Term yi() { return at(y, indexVar("i", 0)); }
  Term cosT(const Term &a) { return mkApply(Fn::Cos, {a}); }
  Term sinT(const Term &a) { return mkApply(Fn::Sin, {a}); }
  Term c(double v) { return mkConst(v); }

  // `t` and its normal form agree at every (i, j) of the small grid.
  Term expectSameValues(const Term &t) {
    auto n = prover.trigCanonical(t);
    EXPECT_TRUE(n.has_value());
    if (!n)
      return t;
    Replayer r(table, {});
    for (int64_t i = 0; i < kN; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        double a = r.at(t, {i, j}), b = r.at(*n, {i, j});
        EXPECT_NEAR(a, b, 1e-9 * (1 + std::fabs(a))) << "at (" << i << ", " << j << ")";
      }
    return *n;
  }

  bool hasTrigOfSum(const Term &t) {
    if (t->kind == TermKind::Apply && (t->fn == Fn::Cos || t->fn == Fn::Sin) && t->args[0]->kind == TermKind::Apply &&
        t->args[0]->fn == Fn::Add)
      return true;
    for (auto &a : t->args)
      if (hasTrigOfSum(a))
        return true;
    return false;
  }

  // Rotary scores of q at position p and k at position r with inv_freq w:
  // sum over the half d < 2 of rot(q)[d] rot(k)[d] + rot(q)[d+2] rot(k)[d+2],
  // written as two reductions as the prover splits them.
  Term scores(const Term &pPos, const Term &rPos) {
    Expr d = boundVar(0);
    auto angle = [&](const Term &pos) { return mkMul({at(w, d), pos}); };
    Term qa = at(q, d), qb = at(q, d + 2), ka = at(k, d), kb = at(k, d + 2);
    Term cq = cosT(angle(pPos)), sq = sinT(angle(pPos)), ck = cosT(angle(rPos)), sk = sinT(angle(rPos));
    Term first = mkMul({mkSub(mkMul({qa, cq}), mkMul({qb, sq})), mkSub(mkMul({ka, ck}), mkMul({kb, sk}))});
    Term second = mkMul({mkAdd({mkMul({qb, cq}), mkMul({qa, sq})}), mkAdd({mkMul({kb, ck}), mkMul({ka, sk})})});
    return mkAdd({mkSum(0, Expr::intConst(0), Expr::intConst(2), first),
                  mkSum(0, Expr::intConst(0), Expr::intConst(2), second)});
  }
  // A position as the prover reads arange: count(E) = sum over [0, E) of 1.
  Term count(const Expr &e, int level = 1) { return mkSum(level, Expr::intConst(0), e, c(1)); }
};

} // namespace

TEST_F(TrigFixture, CosOfASumIsExpandedByAngleAddition) {
  Term t = cosT(mkAdd({xi(), mkMul({c(3), yi()})}));
  Term n = expectSameValues(t);
  EXPECT_FALSE(hasTrigOfSum(n));
}

TEST_F(TrigFixture, SinOfADifferenceIsExpandedByAngleAddition) {
  Term t = sinT(mkSub(mkMul({c(2), xi()}), mkAdd({yi(), c(0.5)})));
  Term n = expectSameValues(t);
  EXPECT_FALSE(hasTrigOfSum(n));
}

TEST_F(TrigFixture, NegativeAnglesLoseTheirSign) {
  expectSameValues(mkAdd({cosT(mkMul({c(-2), xi()})), sinT(mkNeg(yi()))}));
  // cos(-x) - cos(x) and sin(-x) + sin(x) are 0.
  auto n = prover.trigCanonical(mkAdd({cosT(mkNeg(xi())), mkNeg(cosT(xi())), sinT(mkNeg(xi())), sinT(xi())}));
  ASSERT_TRUE(n);
  EXPECT_TRUE(sameTerm(*n, c(0)));
}

TEST_F(TrigFixture, SquaredSineAndCosineAddUpToOne) {
  Term t = mkAdd({mkMul({sinT(xi()), sinT(xi())}), mkMul({cosT(xi()), cosT(xi())})});
  Term n = expectSameValues(t);
  EXPECT_TRUE(sameTerm(n, c(1)));
  // And through angle addition: cos(x + y)^2 + sin(x + y)^2.
  Term s = mkAdd({xi(), yi()});
  Term u = mkAdd({mkMul({cosT(s), cosT(s)}), mkMul({sinT(s), sinT(s)})});
  EXPECT_TRUE(sameTerm(expectSameValues(u), c(1)));
}

TEST_F(TrigFixture, ReductionsOverOneRangeAreAddedIntoOne) {
  Expr d = boundVar(0);
  Term f = mkSum(0, Expr::intConst(0), Expr::intConst(4), mkMul({at(q, d), at(k, d)}));
  Term g = mkSum(0, Expr::intConst(0), Expr::intConst(4), mkMul({c(2), at(q, d), cosT(at(k, d))}));
  Term n = expectSameValues(mkAdd({f, g}));
  EXPECT_EQ(n->kind, TermKind::Sum);
}

TEST_F(TrigFixture, AOneElementReductionIsThatElement) {
  Expr d = boundVar(0);
  Term t = mkSum(0, Expr::intConst(0), Expr::intConst(1), mkMul({at(w, d), cosT(at(x, d + indexVar("i", 0)))}));
  Term n = expectSameValues(t);
  EXPECT_NE(n->kind, TermKind::Sum);
}

TEST_F(TrigFixture, APositionsConstantPartComesOut) {
  Expr i = indexVar("i", 0);
  // count(i + 7) = 7 + count(i) for i >= 0 (on the path).
  expectSameValues(mkMul({xi(), count(i + 7, 0)}));
  auto shifted = prover.trigCanonical(count(i + 7, 0));
  ASSERT_TRUE(shifted);
  EXPECT_TRUE(prover.acEqual(*shifted, mkAdd({c(7), count(i, 0)})));
  // count(i - 3) is max(i - 3, 0): not i - 3 where i < 3, so it stays whole.
  auto kept = prover.trigCanonical(count(i - 3, 0));
  ASSERT_TRUE(kept);
  EXPECT_TRUE(sameTerm(*kept, count(i - 3, 0)));
  expectSameValues(mkMul({yi(), count(i - 3, 0)}));
}

TEST_F(TrigFixture, InexactCoefficientsHaveNoNormalForm) {
  // 1e16 x + x - 1e16 x: adding the coefficients in doubles would lose the x.
  Term t = mkAdd({mkMul({c(1e16), xi()}), xi(), mkMul({c(-1e16), xi()})});
  EXPECT_FALSE(prover.trigCanonical(t).has_value());
}

TEST_F(TrigFixture, ScoresOfQAndKShiftedByOneAngleAreTheUnshiftedScores) {
  Expr i = indexVar("i", 0), j = indexVar("i", 1);
  Term plain = scores(count(i), count(j));
  Term shifted = scores(count(i + 7), count(j + 7));
  Term a = expectSameValues(plain), b = expectSameValues(shifted);
  EXPECT_TRUE(prover.acEqual(a, b));
  // Only q shifted: the difference of the positions changes.
  Term qOnly = scores(count(i + 7), count(j));
  Term n = expectSameValues(qOnly);
  EXPECT_FALSE(prover.acEqual(a, n));
  Replayer r(table, {});
  bool differs = false;
  for (int64_t p = 0; p < kN; ++p)
    differs |= std::fabs(r.at(plain, {p, p}) - r.at(qOnly, {p, p})) > 1e-6;
  EXPECT_TRUE(differs);
}

// Random polynomials in cos/sin of sums of leaves: every normal form has the
// term's values.
TEST_F(TrigFixture, RandomTrigPolynomialsKeepTheirValues) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, 7), coef(-3, 3);
  std::function<Term(int)> gen = [&](int depth) -> Term {
    int kind = depth <= 0 ? pick(rng) % 3 : pick(rng);
    switch (kind) {
    case 0: return xi();
    case 1: return yi();
    case 2: return c(coef(rng));
    case 3: return mkAdd({gen(depth - 1), gen(depth - 1)});
    case 4: return mkMul({gen(depth - 1), gen(depth - 1)});
    case 5: return cosT(mkAdd({mkMul({c(coef(rng)), gen(depth - 2)}), gen(depth - 2)}));
    case 6: return sinT(mkAdd({gen(depth - 2), mkMul({c(coef(rng)), gen(depth - 2)})}));
    default: return mkMul({sinT(gen(depth - 1)), sinT(gen(depth - 1))});
    }
  };
  int normalized = 0;
  for (int n = 0; n < 60; ++n) {
    Term t = gen(4);
    if (prover.trigCanonical(t)) {
      expectSameValues(t);
      ++normalized;
    }
  }
  EXPECT_GT(normalized, 40);
}

// The rotary matcher compares a reference score with a rank's score class
// only if the class's expansion can read what the score reads: in a model of
// L layers, layer k's scores are not expanded against the other layers'.
TEST_F(TrigFixture, ARotatedQReachesQAndTheFrequenciesButNotThroughAMatmul) {
  Expr u = indexVar("u", 0);
  ClassInfo mm; // a projection: a sum, not elementwise
  mm.kind = ClassInfo::Compute;
  mm.shape.dims.push_back(Expr::intConst(4));
  mm.def = mkSum(1, Expr::intConst(0), Expr::intConst(kN), mkMul({at(x, boundVar(1)), at(y, boundVar(1))}));
  ClassId proj = table.add(mm);
  ClassInfo ro; // proj * cos(w * 3) - q * sin(w * 3)
  ro.kind = ClassInfo::Compute;
  ro.shape.dims.push_back(Expr::intConst(4));
  Term ang = mkMul({at(w, u), c(3)});
  ro.def = mkSub(mkMul({at(proj, u), cosT(ang)}), mkMul({at(q, u), sinT(ang)}));
  ClassId rot = table.add(ro);

  const std::vector<ClassId> &r = prover.rotaryReach(rot, false);
  EXPECT_EQ(r, (std::vector<ClassId>{w, q, proj, rot}));
  EXPECT_EQ(prover.rotaryReach(proj, false), std::vector<ClassId>{proj}) << "a matmul is read, not expanded";
  EXPECT_EQ(prover.rotaryReach(proj, true), (std::vector<ClassId>{x, y, proj})) << "inside an angle it is";
}

TEST_F(TrigFixture, AReadOnOnlyOneSideOfASelectIsNotRequired) {
  Expr cond = indexVar("i", 0) < Expr::intConst(3);
  std::vector<ClassId> req;
  Prover::requiredReads(mkSelect(cond, mkAdd({xi(), yi()}), mkMul({xi(), at(w, indexVar("i", 0))})), req);
  EXPECT_EQ(req, std::vector<ClassId>{x});
  Prover::requiredReads(mkAdd({at(w, indexVar("i", 0)), mkSelect(cond, yi(), mkMul({yi(), c(2)}))}), req);
  EXPECT_EQ(req, (std::vector<ClassId>{y, w}));
}

TEST_F(TrigFixture, ARotatedValuesExpansionStopsTwoPlainAddsIntoTheResidualStream) {
  // h1 = x + y, h2 = h1 + y, ..., h4 = h3 + y: a residual stream, polynomial
  // but not rotary. Expanded through every add, a score in layer L carried
  // all L layers below it into its normal form.
  Expr u = indexVar("u", 0);
  auto add = [&](const Term &def) {
    ClassInfo ci;
    ci.kind = ClassInfo::Compute;
    ci.shape.dims.push_back(Expr::intConst(kN));
    ci.def = def;
    return table.add(ci);
  };
  ClassId h = x;
  std::vector<ClassId> stream{x};
  for (int l = 0; l < 4; ++l)
    stream.push_back(h = add(mkAdd({at(h, u), at(y, u)})));
  ClassId rot = add(mkMul({at(h, u), cosT(mkMul({at(w, u), c(3)}))}));

  size_t budget = 1000;
  Term e = prover.expandRotary(at(rot, indexVar("i", 0)), 0, false, budget, 2);
  std::vector<ClassId> reads;
  Prover::requiredReads(e, reads);
  EXPECT_EQ(reads, (std::vector<ClassId>{y, w, stream[2]})) << "h4 and h3 expanded, h2 read";
  budget = 1000;
  e = prover.expandRotary(at(rot, indexVar("i", 0)), 0, false, budget, 10);
  Prover::requiredReads(e, reads);
  EXPECT_EQ(reads, (std::vector<ClassId>{x, y, w})) << "with room, down to the stream's start";
}
