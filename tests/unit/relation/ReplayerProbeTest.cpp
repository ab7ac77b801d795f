// One replayer serves every same-name proposal of a walk (Propose.cpp): class
// elements computed by one probe are reused by the next, and an element whose
// evaluation ran out of budget is never kept (a later probe would otherwise
// read a cut-short sum as the tensor's value).
#include "Replayer.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;
using smt::Expr;

namespace {

struct ReplayerProbe : ::testing::Test {
  ClassTable table;
  ClassId x, total;
  static constexpr int64_t kN = 1000;

  void SetUp() override {
    ClassInfo leaf;
    leaf.label = "x";
    leaf.shape.dims = {Expr::intConst(kN)};
    x = table.add(leaf);
    // total[u] = sum_{k < kN} x[k]: about kN evaluation steps.
    ClassInfo sum;
    sum.kind = ClassInfo::Compute;
    sum.label = "total";
    sum.shape.dims = {Expr::intConst(1)};
    sum.def = mkSum(0, Expr::intConst(0), Expr::intConst(kN), mkRead(x, {boundVar(0)}));
    total = table.add(sum);
  }
  Term readTotal() const { return mkRead(total, {Expr::intConst(0)}); }
};

} // namespace

TEST_F(ReplayerProbe, AnElementOneProbeComputedCostsTheNextNothing) {
  Replayer rp(table, {});
  rp.newProbe(10 * kN);
  double first = rp.at(readTotal(), {});
  ASSERT_TRUE(rp.complete());
  rp.newProbe(10); // far too little to sum kN elements again
  double again = rp.at(readTotal(), {});
  EXPECT_TRUE(rp.complete());
  EXPECT_EQ(first, again);
}

TEST_F(ReplayerProbe, ASumCutShortByTheBudgetIsNotReadByTheNextProbe) {
  Replayer rp(table, {});
  rp.newProbe(kN / 2); // runs out halfway through the sum
  (void)rp.at(readTotal(), {});
  ASSERT_FALSE(rp.complete());
  rp.newProbe(10);
  (void)rp.at(readTotal(), {});
  EXPECT_FALSE(rp.complete()) << "the half-finished sum was kept as total's value";
  rp.newProbe(10 * kN);
  double full = rp.at(readTotal(), {});
  EXPECT_TRUE(rp.complete());
  Replayer fresh(table, {});
  EXPECT_EQ(full, fresh.at(readTotal(), {}));
}

// The walk's probes share a pool of steps past their own (Propose.cpp): what
// a probe took is what newProbe gave minus what is left.
TEST_F(ReplayerProbe, WhatAProbeTookIsWhatItWasGivenMinusWhatIsLeft) {
  Replayer rp(table, {});
  rp.newProbe(10 * kN);
  (void)rp.at(readTotal(), {});
  ASSERT_TRUE(rp.complete());
  uint64_t took = 10 * kN - rp.budgetLeft();
  EXPECT_GE(took, static_cast<uint64_t>(kN)) << "a sum of kN reads";
  EXPECT_LT(took, static_cast<uint64_t>(3 * kN));
  rp.newProbe(10 * kN);
  (void)rp.at(readTotal(), {});
  EXPECT_LE(10 * kN - rp.budgetLeft(), 2u) << "kept: the second probe reads one element";
}
