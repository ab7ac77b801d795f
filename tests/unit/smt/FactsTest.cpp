// Products of symbols (issue 14, item 3): a MoE dispatch reshape
// [batch, seq, 8] -> [batch, -1, 2, 8] asks whether 8*batch*seq is a multiple
// of 16*batch. Z3 timed out on it (10 s, 60 s); with `batch >= 1` known, the
// common factor cancels and the question is linear. Every rewrite is checked
// against evaluation at concrete values, so a wrong rule cannot pass.
#include "shardproof/smt/Facts.h"
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof::smt;

namespace {

Expr b() { return Expr::intVar("batch"); }
Expr s() { return Expr::intVar("seq"); }
Expr c(int64_t v) { return Expr::intConst(v); }
// mod/div that do not cancel on their own (floorDiv/mod cancel exact multiples).
Expr rawMod(const Expr &x, const Expr &y) { return mod(x, y); }

std::optional<bool> valueAt(const Expr &e, int64_t bv, int64_t sv) {
  return e.substitute({b(), s()}, {c(bv), c(sv)}).simplify().asBool();
}

// `after` agrees with `before` wherever the facts hold (batch >= 1).
void expectEquivalentForPositiveBatch(const Expr &before, const Expr &after) {
  for (int64_t bv = 1; bv <= 5; ++bv)
    for (int64_t sv = -9; sv <= 9; ++sv) {
      auto x = valueAt(before, bv, sv), y = valueAt(after, bv, sv);
      ASSERT_TRUE(x && y) << before.str() << " / " << after.str();
      EXPECT_EQ(*x, *y) << "batch=" << bv << " seq=" << sv << ": " << before.str() << " vs " << after.str();
    }
}

SizeFacts batchAtLeastOne() {
  SizeFacts f;
  f.learn(b() >= c(1));
  return f;
}

} // namespace

TEST(SizeFacts, TheDispatchReshapeObligationIsDecidedNotATimeout) {
  // seq == 4 * seq_local, seq % 8 == 0: every rank's shard holds whole pairs.
  Expr local = Expr::intVar("seq_local");
  Solver sv(5000);
  sv.assume(b() >= c(1));
  sv.assume(local >= c(1));
  sv.assume(s() == c(4) * local);
  sv.assume(rawMod(s(), c(8)) == c(0));
  Expr goal = rawMod(c(8) * b() * local, c(16) * b()) == c(0);
  Proof p = sv.prove("dispatch", goal);
  EXPECT_TRUE(p.proved()) << p.reason;
  // Pairs of an odd shard do not fit: refuted, not a timeout.
  Solver odd(5000);
  odd.assume(b() >= c(1));
  odd.assume(local >= c(1));
  Proof q = odd.prove("dispatch.odd", goal);
  EXPECT_EQ(q.status, Proof::Refuted) << q.reason;
}

TEST(SizeFacts, WithoutAPositiveBatchNothingIsCancelled) {
  // batch may be 0: (8*0*seq) mod 0 is not ours to decide.
  SizeFacts f;
  f.learn(b() >= c(0));
  Expr goal = rawMod(c(8) * b() * s(), c(16) * b()) == c(0);
  EXPECT_TRUE(f.apply(goal).same(goal)) << f.apply(goal).str();
  SizeFacts none;
  EXPECT_TRUE(none.apply(goal).same(goal));
}

TEST(SizeFacts, ZeroGuardsOfAPositiveSymbolFold) {
  // The -1 of a reshape is guarded: ite(batch == 0, ..., seq div 2).
  SizeFacts f = batchAtLeastOne();
  EXPECT_EQ(f.apply(b() == c(0)).asBool(), std::optional<bool>(false));
  EXPECT_EQ(f.apply(b() >= c(0)).asBool(), std::optional<bool>(true));
  EXPECT_EQ(f.apply(c(3) * b() * b() + c(2) > c(4)).asBool(), std::optional<bool>(true));
  Expr guarded = ite(b() == c(0), c(0), floorDiv(s(), c(2)));
  EXPECT_TRUE(f.apply(guarded).same(floorDiv(s(), c(2)).simplify())) << f.apply(guarded).str();
  // Not decided by the bound: seq has none, and 2*batch - 3 may be either sign.
  Expr open = c(2) * b() - c(3) >= c(0);
  EXPECT_FALSE(f.apply(open).asBool().has_value());
}

TEST(SizeFacts, EveryRewriteIsAnEquivalenceWhereTheFactsHold) {
  SizeFacts f = batchAtLeastOne();
  std::vector<Expr> cases = {
      rawMod(c(8) * b() * s(), c(16) * b()) == c(0),
      floorDiv(c(8) * b() * s(), c(16) * b()) == c(3),
      floorDiv(c(6) * b() * s() + c(4) * b() * b(), c(4) * b()) <= s(),
      rawMod(c(6) * b() * s(), c(4) * b()) == c(2) * b(),
      c(3) * b() * s() - c(6) * b() == c(0),
      b() * s() < c(2) * b(),
      b() * b() * s() >= b() * c(5),
      b() == c(0) || s() > c(1),
  };
  for (auto &e : cases) {
    Expr after = f.apply(e);
    EXPECT_FALSE(after.same(e.simplify())) << "no rule applied to " << e.str();
    expectEquivalentForPositiveBatch(e, after);
  }
  // The first case is linear once rewritten: no product of symbols left.
  Expr dispatch = f.apply(cases[0]);
  EXPECT_LE(dispatch.degree(), 1u) << dispatch.str();
}

TEST(SizeFacts, BoundsAreReadFromTheFormsAssumptionsTake) {
  SizeFacts f;
  f.learn((b() > c(0)) && (c(2) <= s()));
  Expr m = Expr::intVar("m");
  f.learn(m == c(7));
  f.learn(!(Expr::intVar("n") <= c(3)));
  EXPECT_EQ(f.lowerBound(b()), std::optional<int64_t>(1));
  EXPECT_EQ(f.lowerBound(s()), std::optional<int64_t>(2));
  EXPECT_EQ(f.lowerBound(m), std::optional<int64_t>(7));
  EXPECT_EQ(f.lowerBound(Expr::intVar("n")), std::optional<int64_t>(4));
  // Upper bounds and facts over two symbols teach nothing here.
  SizeFacts g;
  g.learn(b() <= c(9));
  g.learn(b() + s() >= c(3));
  EXPECT_TRUE(g.empty());
}

// Results are kept by goal; a fact learned later must not be hidden by a
// result kept from before it (the goal is asked again and gets the new rewrite).
TEST(SizeFacts, AResultKeptFromBeforeAFactIsNotReusedAfterIt) {
  SizeFacts f;
  f.learn(s() >= c(0));
  Expr goal = b() == c(0);
  EXPECT_FALSE(f.apply(goal).asBool().has_value()) << "b may still be 0";
  EXPECT_FALSE(f.apply(goal).asBool().has_value()) << "the same, kept";
  f.learn(b() >= c(1));
  EXPECT_EQ(f.apply(goal).asBool(), std::optional<bool>(false)) << f.apply(goal).str();
}
