// Constant masks read as index conditions: each pattern the recogniser knows
// (a prefix or suffix of an axis, triangular, banded, block diagonal, block
// causal, rectangles), the condition checked against every element, and
// constants that match no pattern left alone.
#include "shardproof/ir/ConstantMask.h"
#include "shardproof/ir/Term.h"

#include <gtest/gtest.h>

#include <functional>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;

namespace {

// A constant of `dims` whose element at (row-major) coordinates c is f(c).
std::vector<double> fill(const std::vector<int64_t> &dims, const std::function<double(const std::vector<int64_t> &)> &f) {
  int64_t n = 1;
  for (auto d : dims)
    n *= d;
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> c(dims.size());
    for (size_t d = dims.size(), rest = i; d-- > 0; rest /= dims[d])
      c[d] = static_cast<int64_t>(rest % dims[d]);
    out.push_back(f(c));
  }
  return out;
}

// The recognised condition gives every element of the content.
void expectExact(const std::vector<int64_t> &dims, const std::vector<double> &data, const ConstantCondition &cc) {
  for (size_t i = 0; i < data.size(); ++i) {
    std::vector<int64_t> c(dims.size());
    for (size_t d = dims.size(), rest = i; d-- > 0; rest /= dims[d])
      c[d] = static_cast<int64_t>(rest % dims[d]);
    auto v = cc.cond.eval([&](const std::string &name) -> std::optional<int64_t> {
      return c.at(std::stoul(name.substr(2)));
    });
    ASSERT_TRUE(v) << cc.cond.str();
    EXPECT_EQ(*v ? cc.onTrue : cc.onFalse, data[i]) << "element " << i << " of " << cc.cond.str();
  }
}

std::optional<ConstantCondition> recognise(const std::vector<int64_t> &dims, const std::vector<double> &data) {
  auto cc = recogniseConstantCondition(dims, data);
  if (cc)
    expectExact(dims, data, *cc);
  return cc;
}

TEST(ConstantMask, PaddingColumnsAreASuffixOfTheAxis) {
  // torch.arange(3) >= 1, folded: the last rank's two padding columns.
  auto cc = recognise({3}, {0, 1, 1});
  ASSERT_TRUE(cc);
  EXPECT_EQ(cc->cond.str(), Expr(indexVar("u", 0) >= Expr::intConst(1)).simplify().str());
  EXPECT_EQ(cc->onTrue, 1);
  EXPECT_EQ(cc->onFalse, 0);
}

TEST(ConstantMask, APrefixBroadcastOverOtherAxes) {
  // [1, 4, 6]: the first four columns of every row; only u!2 is mentioned.
  std::vector<int64_t> dims{1, 4, 6};
  auto cc = recognise(dims, fill(dims, [](auto &c) { return c[2] < 4 ? 1.0 : 0.0; }));
  ASSERT_TRUE(cc);
  EXPECT_FALSE(cc->cond.mentions("u!1"));
  EXPECT_TRUE(cc->cond.mentions("u!2"));
}

TEST(ConstantMask, AllFalseIsTheConstantItself) {
  auto cc = recognise({3}, {0, 0, 0});
  ASSERT_TRUE(cc);
  EXPECT_EQ(cc->onTrue, 0);
  EXPECT_EQ(cc->onFalse, 0);
}

TEST(ConstantMask, CausalBufferIsTriangular) {
  // torch.tril(torch.ones(5, 5)).view(1, 1, 5, 5), a registered buffer.
  std::vector<int64_t> dims{1, 1, 5, 5};
  auto cc = recognise(dims, fill(dims, [](auto &c) { return c[3] <= c[2] ? 1.0 : 0.0; }));
  ASSERT_TRUE(cc);
  EXPECT_FALSE(cc->cond.str().find("ite") != std::string::npos) << cc->cond.str();
}

TEST(ConstantMask, SlidingWindowIsABand) {
  std::vector<int64_t> dims{6, 6};
  auto cc = recognise(dims, fill(dims, [](auto &c) { return c[1] <= c[0] && c[0] - c[1] < 3 ? 1.0 : 0.0; }));
  ASSERT_TRUE(cc);
}

TEST(ConstantMask, BlockDiagonalOfUnevenDocuments) {
  // Documents of lengths 1, 3 and 2 packed in one sequence.
  std::vector<int64_t> dims{6, 6};
  auto doc = [](int64_t t) { return t < 1 ? 0 : t < 4 ? 1 : 2; };
  auto cc = recognise(dims, fill(dims, [&](auto &c) { return doc(c[0]) == doc(c[1]) ? 1.0 : 0.0; }));
  ASSERT_TRUE(cc);
}

TEST(ConstantMask, BlockCausal) {
  std::vector<int64_t> dims{8, 8};
  auto cc = recognise(dims, fill(dims, [](auto &c) { return c[1] / 2 <= c[0] / 2 ? 1.0 : 0.0; }));
  ASSERT_TRUE(cc);
}

TEST(ConstantMask, IntegerMaskWithTwoNonzeroValues) {
  // An int64 constant of 2s and 7s: 7 where the column is >= 2.
  auto cc = recognise({4}, {2, 2, 7, 7});
  ASSERT_TRUE(cc);
  EXPECT_EQ(cc->onFalse, 2);
  EXPECT_EQ(cc->onTrue, 7);
}

TEST(ConstantMask, ContentMatchingNoPatternIsLeftAlone) {
  std::vector<int64_t> dims{4, 4};
  // A checkerboard: constant diagonals, but not one run of them; 8 cells each way.
  EXPECT_FALSE(recogniseConstantCondition(dims, fill(dims, [](auto &c) { return (c[0] + c[1]) % 2 ? 1.0 : 0.0; })));
  // Five runs of each value along one axis (four of one value would be four intervals).
  EXPECT_FALSE(recogniseConstantCondition({10}, {1, 0, 1, 0, 1, 0, 1, 0, 1, 0}));
  EXPECT_TRUE(recognise({9}, {1, 0, 1, 0, 1, 0, 1, 0, 1}));
  // Three distinct values, non-integers, three axes the content depends on.
  EXPECT_FALSE(recogniseConstantCondition({3}, {0, 1, 2}));
  EXPECT_FALSE(recogniseConstantCondition({2}, {0, 0.5}));
  std::vector<int64_t> cube{2, 2, 2};
  EXPECT_FALSE(recogniseConstantCondition(cube, fill(cube, [](auto &c) { return c[0] && c[1] && c[2] ? 1.0 : 0.0; })));
}

TEST(ConstantMask, LargerThanTheLimitIsLeftAlone) {
  std::vector<int64_t> dims{8, 8};
  auto data = fill(dims, [](auto &c) { return c[1] <= c[0] ? 1.0 : 0.0; });
  EXPECT_FALSE(recogniseConstantCondition(dims, data, 32));
  EXPECT_TRUE(recogniseConstantCondition(dims, data, 64));
}

} // namespace
