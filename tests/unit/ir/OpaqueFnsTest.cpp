// A named function means one thing everywhere: its numbers (replay) and its
// integer expression (index values the solver reasons about) come from one
// home, ir/OpaqueFns, and agree at every point tried. A sign rule that differs
// between the two (Python's % against C's fmod) would let the prover and the
// replay disagree about the same mask.
#include "shardproof/ir/OpaqueFns.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;

namespace {

std::optional<double> symbolicAt(const std::string &name, const std::vector<int64_t> &xs) {
  std::vector<Expr> args;
  for (auto x : xs)
    args.push_back(Expr::intConst(x));
  auto e = integerOpaque(name, args, !xs.empty() && xs[0] >= 0);
  if (!e || !e->isValid())
    return std::nullopt;
  auto v = e->simplify().asInt();
  if (!v)
    return std::nullopt;
  return static_cast<double>(*v);
}

} // namespace

TEST(OpaqueFns, IntegerAndNumericSemanticsAgree) {
  unsigned compared = 0;
  for (const char *name : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Div", "Mod",
                           "FMod"})
    for (int64_t a = -7; a <= 7; ++a)
      for (int64_t b = -4; b <= 4; ++b) {
        bool divides = std::string(name) == "Div" || std::string(name) == "Mod" || std::string(name) == "FMod";
        if (divides && b == 0)
          continue; // the node's obligation: a divisor is never 0
        auto num = evalOpaque(name, {static_cast<double>(a), static_cast<double>(b)});
        auto sym = symbolicAt(name, {a, b});
        ASSERT_TRUE(num && sym) << name << "(" << a << ", " << b << ")";
        EXPECT_EQ(*num, *sym) << name << "(" << a << ", " << b << ")";
        ++compared;
      }
  for (int64_t a = -3; a <= 3; ++a) {
    EXPECT_EQ(evalOpaque("Not", {double(a)}), symbolicAt("Not", {a}));
    EXPECT_EQ(evalOpaque("Cast:bool", {double(a)}), symbolicAt("Cast:bool", {a}));
    EXPECT_EQ(evalOpaque("Where", {double(a), 5.0, -5.0}), symbolicAt("Where", {a, 5, -5}));
  }
  EXPECT_GT(compared, 1000u);
  // Python's % (the divisor's sign) and C's fmod (the dividend's):
  EXPECT_EQ(symbolicAt("Mod", {-7, 2}), std::optional<double>(1));
  EXPECT_EQ(symbolicAt("FMod", {-7, 2}), std::optional<double>(-1));
  EXPECT_EQ(symbolicAt("Div", {-7, 2}), std::optional<double>(-3));
  // Not integer arithmetic: no expression (the index value stays unknown).
  EXPECT_FALSE(symbolicAt("Floor", {3}).has_value());
  EXPECT_FALSE(symbolicAt("Gelu", {3}).has_value());
}
