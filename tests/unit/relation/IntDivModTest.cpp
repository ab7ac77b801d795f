// Integer Div and Mod on data, followed exactly (IndexValue.cpp): ONNX's Div
// truncates toward zero, Mod (fmod=0) takes the divisor's sign, Mod fmod=1
// the dividend's. Z3's own div/mod are Euclidean, so each of these would be
// wrong for some negative operand if the signs were not spelled out.
//
// Each case: the reference is y = x; the rank computes y = where(cond(k), x, 0)
// with k an int64 scalar the spec binds to `s - 9`, s in [0, 18] (k in [-9, 9]).
// A condition true for every k is VERIFIED; one false for some k is REFUTED,
// with that k's s in the counterexample, confirmed on numbers.
#include "GraphBuilder.h"
#include "shardproof/relation/Verifier.h"

#include <gtest/gtest.h>

using namespace shardproof;
using shardproof::testing::GraphBuilder;
using relation::Verdict;

namespace {

ir::Graph reference() {
  GraphBuilder b("ref.onnx");
  b.input("x", {4});
  b.node("Identity", {"x"}, {"y"}, "/Identity");
  b.output("y");
  return b.build();
}

ir::Attribute fmod(int64_t v) { return GraphBuilder::intAttr(v); }

// The rank graph: `cond` is built by `body` from the int64 scalar "k" and the
// constants "two", "mtwo" (-2), "three", "mthree" (-3); it must end in "cond".
ir::Graph rank(const std::function<void(GraphBuilder &)> &body) {
  GraphBuilder b("rank0.onnx");
  b.input("x", {4}).input("k", {});
  b.initializer("two", {}, {2}).initializer("mtwo", {}, {-2}).initializer("three", {}, {3});
  b.initializer("mthree", {}, {-3}).initializer("zero_i", {}, {0});
  b.scalar("zero", 0.0);
  body(b);
  b.node("Where", {"cond", "x", "zero"}, {"y"}, "/Where");
  b.output("y");
  ir::Graph g = b.build();
  g.values[*g.find("k")].dtype = ir::DType::Int64;
  for (auto &v : g.values)
    if (v.name != "x" && v.name != "y" && v.name != "zero" && v.name != "cond")
      v.dtype = ir::DType::Int64;
  g.values[*g.find("cond")].dtype = ir::DType::Bool;
  return g;
}

relation::Result check(const ir::Graph &r) {
  auto s = spec::parseSpec(R"(
shardproof: 1
reference: ref.onnx
implementation: {world_size: 1, ranks: "rank{r}.onnx"}
symbols: {s: {min: 0, max: 18}}
inputs:
  x: replicated
  k: {value: "s - 9"}
outputs:
  y: replicated
)",
                           "divmod.yaml");
  EXPECT_TRUE(static_cast<bool>(s)) << (s ? "" : shardproof::toString(s.takeError()));
  auto res = relation::verify(reference(), {r}, *s);
  EXPECT_TRUE(static_cast<bool>(res)) << (res ? "" : shardproof::toString(res.takeError()));
  return res ? *res : relation::Result{};
}

// s of the counterexample (k = s - 9).
int64_t counterexampleK(const relation::Result &r) {
  for (auto &f : r.failures)
    if (f.cex)
      for (auto &[name, v] : f.cex->sizes)
        if (name == "s")
          return v - 9;
  ADD_FAILURE() << "no counterexample with s";
  return 0;
}

// k == (k / d) * d + fmod(k, d): the identity of truncating division, for a
// positive and a negative divisor.
TEST(IntDivMod, TruncatingDivisionAndFmodRebuildTheDividendForEverySign) {
  for (const char *d : {"two", "mtwo", "three", "mthree"}) {
    auto r = check(rank([&](GraphBuilder &b) {
      b.node("Div", {"k", d}, {"q"}).node("Mul", {"q", d}, {"qd"});
      b.node("Mod", {"k", d}, {"m"}, "", {{"fmod", fmod(1)}}).node("Add", {"qd", "m"}, {"back"});
      b.node("Equal", {"back", "k"}, {"cond"});
    }));
    EXPECT_EQ(r.verdict, Verdict::Verified) << d << ": " << r.reason;
  }
}

// Python's % paired with a truncating Div does not rebuild k when k < 0 and
// d does not divide it: -1 // 2 is 0 in ONNX (not -1), -1 % 2 is 1.
TEST(IntDivMod, TruncatingDivisionWithPythonModIsRefutedAtANegativeOddDividend) {
  auto r = check(rank([&](GraphBuilder &b) {
    b.node("Div", {"k", "two"}, {"q"}).node("Mul", {"q", "two"}, {"qd"});
    b.node("Mod", {"k", "two"}, {"m"}).node("Add", {"qd", "m"}, {"back"});
    b.node("Equal", {"back", "k"}, {"cond"});
  }));
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  int64_t k = counterexampleK(r);
  EXPECT_LT(k, 0);
  EXPECT_NE(k % 2, 0);
}

// Mod (fmod=0) has the divisor's sign: k % -3 <= 0 and k % 3 >= 0 for every k.
TEST(IntDivMod, PythonModHasTheSignOfTheDivisor) {
  auto neg = check(rank([&](GraphBuilder &b) {
    b.node("Mod", {"k", "mthree"}, {"m"}).node("Greater", {"m", "zero_i"}, {"pos"}).node("Not", {"pos"}, {"cond"});
  }));
  EXPECT_EQ(neg.verdict, Verdict::Verified) << neg.reason;
  auto pos = check(rank([&](GraphBuilder &b) {
    b.node("Mod", {"k", "three"}, {"m"}).node("Less", {"m", "zero_i"}, {"negm"}).node("Not", {"negm"}, {"cond"});
  }));
  EXPECT_EQ(pos.verdict, Verdict::Verified) << pos.reason;
}

// fmod=1 has the dividend's sign: fmod(k, 3) >= 0 fails at a negative k that 3 does not divide.
TEST(IntDivMod, FmodHasTheSignOfTheDividend) {
  auto r = check(rank([&](GraphBuilder &b) {
    b.node("Mod", {"k", "three"}, {"m"}, "", {{"fmod", fmod(1)}});
    b.node("Less", {"m", "zero_i"}, {"negm"}).node("Not", {"negm"}, {"cond"});
  }));
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  int64_t k = counterexampleK(r);
  EXPECT_LT(k, 0);
  EXPECT_NE(k % 3, 0);
}

// Div truncates toward zero: |k / 3| * 3 <= |k| for every k (floor division
// would give |-1 // 3| * 3 = 3 > 1).
TEST(IntDivMod, DivisionRoundsTowardZeroNotDown) {
  auto r = check(rank([&](GraphBuilder &b) {
    b.node("Div", {"k", "three"}, {"q"}).node("Abs", {"q"}, {"aq"}).node("Mul", {"aq", "three"}, {"aq3"});
    b.node("Abs", {"k"}, {"ak"}).node("Greater", {"aq3", "ak"}, {"over"}).node("Not", {"over"}, {"cond"});
  }));
  EXPECT_EQ(r.verdict, Verdict::Verified) << r.reason;
}

// Division by a value that can be 0 is undefined: an obligation of the rank,
// REFUTED at k = 0 (s = 9).
TEST(IntDivMod, ADivisorThatCanBeZeroIsRefuted) {
  auto r = check(rank([&](GraphBuilder &b) {
    b.node("Div", {"three", "k"}, {"q"}).node("Equal", {"q", "q"}, {"cond"});
  }));
  ASSERT_EQ(r.verdict, Verdict::Refuted) << r.reason;
  EXPECT_EQ(counterexampleK(r), 0);
}

} // namespace
