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

// A norm's variance sums (x - mean)^2 with the mean itself a sum over the
// same axis: summed afresh inside every term, it cost n^2 reads per element
// (F.group_norm's census sample ran for minutes under ASan). A Sum's value is
// kept by the values of its free variables.
TEST_F(ReplayerProbe, AVarianceSumsItsMeanOnceNotOncePerReducedElement) {
  Term mean = mkMul({mkConst(1.0 / kN), mkSum(1, Expr::intConst(0), Expr::intConst(kN), mkRead(x, {boundVar(1)}))});
  Term centered = mkSub(mkRead(x, {boundVar(0)}), mean);
  Term var = mkSum(0, Expr::intConst(0), Expr::intConst(kN), mkMul({centered, centered}));
  Replayer rp(table, {});
  rp.newProbe(100 * kN); // a tenth of the n^2 the mean re-summed per term would take
  double v = rp.at(var, {});
  ASSERT_TRUE(rp.complete()) << "the inner mean was summed again for every k!0";
  double m = 0, want = 0;
  Replayer leaves(table, {});
  std::vector<double> xs;
  for (int64_t k = 0; k < kN; ++k)
    xs.push_back(leaves.at(mkRead(x, {Expr::intConst(k)}), {}));
  for (double e : xs)
    m += e / kN;
  for (double e : xs)
    want += (e - m) * (e - m);
  EXPECT_NEAR(v, want, 1e-9 * kN);
}

// The kept value is keyed by what the sum reads from outside: a window sum
// at another output index, or under another value of an enclosing binder, is
// summed again, not taken from the first.
TEST_F(ReplayerProbe, ASumThatReadsAnOuterIndexIsKeptPerValueOfThatIndex) {
  // window[i] = sum_{k1 < 3} x[i + k1]; outer = sum_{k0 < 4} sum_{k1 < 3} x[k0 + k1]
  Term window = mkSum(0, Expr::intConst(0), Expr::intConst(3), mkRead(x, {indexVar("i", 0) + boundVar(0)}));
  Term nested = mkSum(0, Expr::intConst(0), Expr::intConst(4),
                      mkSum(1, Expr::intConst(0), Expr::intConst(3), mkRead(x, {boundVar(0) + boundVar(1)})));
  Replayer rp(table, {}), fresh(table, {});
  auto leaf = [&](int64_t k) { return fresh.at(mkRead(x, {Expr::intConst(k)}), {}); };
  double windows = 0;
  for (int64_t i = 0; i < 4; ++i) {
    double w = rp.at(window, {i});
    EXPECT_DOUBLE_EQ(w, leaf(i) + leaf(i + 1) + leaf(i + 2)) << "window at i = " << i;
    windows += w;
  }
  EXPECT_NEAR(rp.at(nested, {}), windows, 1e-12);
  EXPECT_TRUE(rp.complete());
}

// A same-name proposal whose full probe runs out of steps is probed shallowly
// (Propose.cpp): classes below the cut are not evaluated but read as numbers
// keyed by class and index, so the probe's cost does not grow with the layers
// below (rejecting the LM end's picked logits of a 16-layer step evaluated
// every layer: 25 s).
TEST_F(ReplayerProbe, AShallowProbeReadsWhatIsBelowItsCutWithoutEvaluatingIt) {
  // layer[0] = total, layer[d] = 2 * layer[d-1]: a deep chain over the sum.
  std::vector<ClassId> layer{total};
  for (int d = 1; d < 200; ++d) {
    ClassInfo c;
    c.kind = ClassInfo::Compute;
    c.label = "layer" + std::to_string(d);
    c.shape.dims = {Expr::intConst(1)};
    c.def = mkMul({mkConst(2), mkRead(layer.back(), {Expr::intConst(0)})});
    layer.push_back(table.add(c));
  }
  ClassId top = layer.back(), below = layer[layer.size() - 2], other = layer[layer.size() - 3];
  Term readTop = mkRead(top, {Expr::intConst(0)});
  Replayer shallow(table, {});
  shallow.cutBelow({top});
  shallow.setBudget(20); // the full evaluation takes over kN steps
  double v = shallow.at(readTop, {});
  ASSERT_TRUE(shallow.complete()) << "the shallow probe evaluated the chain below its cut";
  // The cut class reads the same wherever it is read: twice it, as the top
  // computes it, on either side of a proposal.
  Term viaBelow = mkMul({mkConst(2), mkRead(below, {Expr::intConst(0)})});
  EXPECT_EQ(v, shallow.at(viaBelow, {}));
  // Another class below the cut reads other numbers: a proposal that reads
  // the wrong layer differs.
  EXPECT_NE(v, shallow.at(mkMul({mkConst(2), mkRead(other, {Expr::intConst(0)})}), {}));
  // Without the cut, the same term is the real value: 2^199 times the sum.
  Replayer full(table, {});
  double real = full.at(readTop, {});
  ASSERT_TRUE(full.complete());
  EXPECT_NEAR(real, std::ldexp(full.at(readTotal(), {}), 199), std::fabs(real) * 1e-12);
}

// What a shallow probe reads below its cut is often a normalizer (a sum of
// exponentials, a variance) that a log, a root or a division reads. Numbers
// in [-1, 1] there made both sides NaN, which compare as nothing, and the
// training step's loss proposal fell to a second of unfolding.
TEST_F(ReplayerProbe, ALogOrRootOfWhatIsBelowTheCutIsANumber) {
  ClassInfo sq;
  sq.kind = ClassInfo::Compute;
  sq.label = "sq";
  sq.shape.dims = {Expr::intConst(kN)};
  sq.def = mkMul({mkRead(x, {indexVar("u", 0)}), mkRead(x, {indexVar("u", 0)})});
  ClassId below = table.add(sq);
  ClassInfo top;
  top.kind = ClassInfo::Compute;
  top.label = "top";
  top.shape.dims = {Expr::intConst(kN)};
  Term read = mkRead(below, {indexVar("u", 0)});
  top.def = mkAdd({mkApply(Fn::Log, {read}), mkDiv(mkConst(1), mkApply(Fn::Sqrt, {read}))});
  ClassId topId = table.add(top);
  Replayer shallow(table, {});
  shallow.cutBelow({topId});
  shallow.setBudget(100 * kN);
  for (int64_t k = 0; k < 64; ++k) {
    double v = shallow.at(mkRead(topId, {Expr::intConst(k)}), {});
    ASSERT_TRUE(shallow.complete());
    EXPECT_TRUE(std::isfinite(v)) << "element " << k << " of log(c) + 1/sqrt(c) below the cut is " << v;
  }
}

// Neighbouring tensors' shallow probes share one replayer (Propose.cpp): the
// LM end's picked logits, their reshape and the loss all read the logits,
// 0.4 s to evaluate at the bench's widths. Widening the cut keeps what was
// computed, unless a kept element read a newly exact class as a cut leaf:
// that element would disagree with the class's exact values.
struct ShallowChain : ReplayerProbe {
  ClassId mid, top; // mid[0] = 3 * total[0], top[0] = 2 * mid[0]
  void SetUp() override {
    ReplayerProbe::SetUp();
    ClassInfo m;
    m.kind = ClassInfo::Compute;
    m.label = "mid";
    m.shape.dims = {Expr::intConst(1)};
    m.def = mkMul({mkConst(3), readTotal()});
    mid = table.add(m);
    ClassInfo t = m;
    t.label = "top";
    t.def = mkMul({mkConst(2), mkRead(mid, {Expr::intConst(0)})});
    top = table.add(t);
  }
  Term read(ClassId c) const { return mkRead(c, {Expr::intConst(0)}); }
};

TEST_F(ShallowChain, AWiderCutKeepsElementsThatReadNoNewlyExactClass) {
  Replayer rp(table, {});
  rp.cutBelow({mid});
  rp.newProbe(10 * kN);
  double midCut = rp.at(read(mid), {}); // 3 * (total read as a cut leaf)
  ASSERT_TRUE(rp.complete());
  // top was never read as a cut leaf: it may become exact, mid's element kept.
  ASSERT_TRUE(rp.widenCut({top}));
  rp.newProbe(5); // too few steps to evaluate mid again
  EXPECT_EQ(rp.at(read(top), {}), 2 * midCut);
  EXPECT_TRUE(rp.complete());
}

TEST_F(ShallowChain, AClassReadAsACutLeafCannotBecomeExactUnderKeptElements) {
  Replayer rp(table, {});
  rp.cutBelow({mid});
  rp.newProbe(10 * kN);
  (void)rp.at(read(mid), {});
  // mid's kept element read total as a cut leaf: making total exact now
  // would leave mid reading other numbers than total's.
  EXPECT_FALSE(rp.widenCut({total}));
  // Nothing changed: total still reads as its cut leaf, the same as before.
  Replayer again(table, {});
  again.cutBelow({mid});
  EXPECT_EQ(rp.at(read(total), {}), again.at(read(total), {}));
}

// The shallow cut of a proposal (ShallowCut.cpp). At the 405B shape's LM end
// the loss's proposal read every token's 1024 logits of 256 products each on
// both sides: 5.6 M steps evaluated exactly, past the probe's budget, so the
// probe gave up (0.12 s) and left the proposal to the unfolding. The logits
// enter both sides alike: read as pseudo-random numbers they still show any
// difference above them.
TEST_F(ReplayerProbe, AShallowCutLeavesOutTheReductionsBothSidesRead) {
  auto compute = [&](const std::string &label, Term def) {
    ClassInfo c;
    c.kind = ClassInfo::Compute;
    c.label = label;
    c.shape.dims = {Expr::intConst(1)};
    c.def = std::move(def);
    return table.add(c);
  };
  Term x0 = mkRead(x, {Expr::intConst(0)});
  ClassId square = compute("square", mkMul({x0, x0})); // shared, no reduction
  Term readTotal0 = readTotal(), readSquare = mkRead(square, {Expr::intConst(0)});
  ClassId own = compute("own", mkSum(0, Expr::intConst(0), Expr::intConst(kN),
                                     mkMul({mkRead(x, {boundVar(0)}), readSquare}))); // one side only
  Term a = mkAdd({readTotal0, readSquare});
  Term b = mkAdd({mkMul({mkRead(own, {Expr::intConst(0)}), readTotal0}), readSquare});
  std::set<ClassId> exact = shallowCut(table, a, {b}, 4);
  EXPECT_FALSE(exact.count(total)) << "the sum both sides read was left exact";
  EXPECT_TRUE(exact.count(square)) << "a shared class without a reduction (a mask's 0/1 values) was cut";
  EXPECT_TRUE(exact.count(own)) << "a reduction only one side reads was cut";
  // With that cut, telling a from b costs the one-sided sum only.
  auto steps = [&](const std::set<ClassId> &cut, bool &differ) {
    Replayer rp(table, {});
    rp.cutBelow(cut);
    rp.newProbe(100 * kN);
    differ = rp.at(a, {}) != rp.at(b, {});
    EXPECT_TRUE(rp.complete());
    return 100 * kN - rp.budgetLeft();
  };
  bool differ = false, differExact = false;
  std::set<ClassId> withTotal = exact;
  withTotal.insert(total);
  uint64_t cutSteps = steps(exact, differ), exactSteps = steps(withTotal, differExact);
  EXPECT_TRUE(differ && differExact);
  EXPECT_GE(exactSteps, cutSteps + kN) << "the shared sum was evaluated under the cut";
}
