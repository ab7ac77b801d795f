// Integer expressions and constraints: precedence, functions, and the
// mistakes users make when writing them.
#include "TestUtil.h"

#include <gmock/gmock.h>

using namespace shardproof;
using namespace shardproof::spec;
using namespace shardproof::spec::test;
using ::testing::HasSubstr;

namespace {

const SymbolTable kSyms{{"a", "b", "c", "seq", "batch", "d.model"}};

struct IntCase {
  const char *text;
  std::map<std::string, int64_t> env;
  int64_t expected;
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const IntCase &c, std::ostream *os) { *os << c.text; }

class IntExprEval : public ::testing::TestWithParam<IntCase> {};

TEST_P(IntExprEval, Evaluates) {
  const IntCase &c = GetParam();
  auto e = parseIntExpr(c.text, kSyms);
  ASSERT_TRUE(bool(e)) << c.text << ": " << errorOf(std::move(e));
  EXPECT_TRUE(e->isInt()) << c.text;
  auto v = evalWith(*e, c.env).asInt();
  ASSERT_TRUE(v.has_value()) << c.text << " did not fold: " << evalWith(*e, c.env).str();
  EXPECT_EQ(*v, c.expected) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Precedence, IntExprEval,
    ::testing::Values(
        IntCase{"1 + 2 * 3", {}, 7},                    // * binds tighter than +
        IntCase{"(1 + 2) * 3", {}, 9},                  // parentheses override
        IntCase{"10 - 4 - 3", {}, 3},                   // - is left associative
        IntCase{"100 // 10 // 5", {}, 2},               // // is left associative
        IntCase{"2 * 3 % 4", {}, 2},                    // * and % share a level
        IntCase{"-7 // 2", {}, -4},                     // unary minus first, then floor
        IntCase{"-(7 // 2)", {}, -3},                   // ... unless parenthesised
        IntCase{"7 % -3 + 0", {}, -2},                  // floor modulo follows the divisor
        IntCase{"2 * -3", {}, -6},                      // unary minus after an operator
        IntCase{"+4 - -4", {}, 8},                      // unary plus and double minus
        IntCase{"seq // 2 + 1", {{"seq", 10}}, 6},      // symbols
        IntCase{"a - b * c", {{"a", 10}, {"b", 2}, {"c", 3}}, 4},
        IntCase{"-(a - b)", {{"a", 3}, {"b", 5}}, 2},
        IntCase{"d.model * 2", {{"d.model", 64}}, 128}, // dotted dim_param names
        IntCase{"batch*seq", {{"batch", 3}, {"seq", 5}}, 15}));

INSTANTIATE_TEST_SUITE_P(
    Functions, IntExprEval,
    ::testing::Values(IntCase{"ceildiv(seq, 4)", {{"seq", 10}}, 3},
                      IntCase{"ceildiv(seq, 4)", {{"seq", 12}}, 3},
                      IntCase{"ceildiv(7, 2) * 2", {}, 8},
                      IntCase{"min(a, b) + max(a, b)", {{"a", 3}, {"b", 5}}, 8},
                      IntCase{"min(a, b)", {{"a", 3}, {"b", 5}}, 3},
                      IntCase{"max(a, b)", {{"a", 3}, {"b", 5}}, 5},
                      IntCase{"max(1, a, 3)", {{"a", 2}}, 3}, // min/max fold over >2 args
                      IntCase{"min(seq, 4) // 2", {{"seq", 100}}, 2}));

TEST(IntExpr, ConstantsFoldWithoutSymbols) {
  auto e = parseIntExpr("ceildiv(10, 4) + 3 * 2", kSyms);
  ASSERT_TRUE(bool(e)) << errorOf(std::move(e));
  EXPECT_EQ(e->asInt(), 9);
}

TEST(IntExpr, UnknownNamesAreSymbolsOnlyInPermissiveTables) {
  SymbolTable strict{{"seq"}};
  EXPECT_FALSE(strict.lookup("vocab").has_value());
  ASSERT_TRUE(strict.lookup("seq").has_value());
  EXPECT_EQ(strict.lookup("seq")->asVar(), "seq");
  SymbolTable any{{}, true};
  auto e = parseIntExpr("vocab // 2", any);
  ASSERT_TRUE(bool(e)) << errorOf(std::move(e));
  EXPECT_TRUE(e->mentions("vocab"));
}

struct ErrCase {
  const char *text;
  const char *message; // a substring of the rendered error
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const ErrCase &c, std::ostream *os) { *os << c.text; }

class IntExprError : public ::testing::TestWithParam<ErrCase> {};

TEST_P(IntExprError, IsRejected) {
  const ErrCase &c = GetParam();
  auto e = parseIntExpr(c.text, kSyms);
  EXPECT_THAT(errorOf(std::move(e)), HasSubstr(c.message)) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, IntExprError,
    ::testing::Values(
        ErrCase{"seq / 2", "'/' at column 5 is not supported; use '//' for floor division"},
        ErrCase{"(a + b))", "unexpected token ')' at column 8"},
        ErrCase{"sq + 1", "unknown symbol 'sq' at column 1; did you mean 'seq'"},
        ErrCase{"bacth", "did you mean 'batch'"},
        ErrCase{"a +", "unexpected end of expression at column 4"},
        ErrCase{"", "empty integer expression"},
        ErrCase{"(a + b", "expected ')' at column 7"},
        ErrCase{"a b", "unexpected identifier 'b' at column 3"},
        ErrCase{"ceildiv(a)", "ceildiv() at column 1 takes exactly 2 arguments, got 1"},
        ErrCase{"min(a)", "takes at least 2 arguments"},
        ErrCase{"floor(a, 2)", "unknown function 'floor'"},
        ErrCase{"mx(a, 2)", "did you mean 'max'"},
        ErrCase{"a // 0", "division by zero at column 3"},
        ErrCase{"a % (2 - 2)", "division by zero"},
        ErrCase{"a == b", "expected an integer expression at column 1, found a condition"},
        ErrCase{"3a", "malformed number '3a' at column 1 (missing '*'?)"},
        ErrCase{"99999999999999999999", "is too large"},
        ErrCase{"a $ b", "unexpected character '$' at column 3"},
        ErrCase{"a + and", "unexpected identifier 'and'"}));

TEST(IntExpr, ErrorLocationIsOffsetIntoTheFile) {
  // The text starts at column 10 of line 3, so ')' at offset 4 is column 14.
  auto e = parseIntExpr("a + )", kSyms, SrcLoc{"s.yaml", 3, 10});
  EXPECT_EQ(errorOf(std::move(e)), "s.yaml:3:14: error: unexpected token ')' at column 5");
}

struct CondCase {
  const char *text;
  std::map<std::string, int64_t> env;
  bool expected;
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const CondCase &c, std::ostream *os) { *os << c.text; }

class ConstraintEval : public ::testing::TestWithParam<CondCase> {};

TEST_P(ConstraintEval, Evaluates) {
  const CondCase &c = GetParam();
  auto e = parseConstraint(c.text, kSyms);
  ASSERT_TRUE(bool(e)) << c.text << ": " << errorOf(std::move(e));
  EXPECT_TRUE(e->isBool()) << c.text;
  auto v = evalWith(*e, c.env).asBool();
  ASSERT_TRUE(v.has_value()) << c.text;
  EXPECT_EQ(*v, c.expected) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Logic, ConstraintEval,
    ::testing::Values(
        CondCase{"seq % 2 == 0", {{"seq", 4}}, true},
        CondCase{"seq % 2 == 0", {{"seq", 5}}, false},
        CondCase{"a != b", {{"a", 1}, {"b", 1}}, false},
        CondCase{"a < b and b < c", {{"a", 1}, {"b", 2}, {"c", 3}}, true},
        CondCase{"a < b && b < c", {{"a", 1}, {"b", 3}, {"c", 3}}, false},
        // `and` binds tighter than `or`: true or (false and false)
        CondCase{"a == 1 or a == 2 and b == 3", {{"a", 1}, {"b", 0}}, true},
        CondCase{"(a == 1 or a == 2) and b == 3", {{"a", 1}, {"b", 0}}, false},
        CondCase{"not a == b", {{"a", 1}, {"b", 2}}, true},
        CondCase{"!(a >= b) || a > 3", {{"a", 2}, {"b", 2}}, false},
        CondCase{"1 <= a <= 8", {{"a", 9}}, false}, // chained comparison
        CondCase{"1 <= a <= 8", {{"a", 8}}, true},
        // parentheses around arithmetic inside a condition
        CondCase{"(a + 1) * 2 == b", {{"a", 1}, {"b", 4}}, true},
        CondCase{"ceildiv(seq, 2) * 2 >= seq", {{"seq", 7}}, true}));

class ConstraintError : public ::testing::TestWithParam<ErrCase> {};

TEST_P(ConstraintError, IsRejected) {
  const ErrCase &c = GetParam();
  auto e = parseConstraint(c.text, kSyms);
  EXPECT_THAT(errorOf(std::move(e)), HasSubstr(c.message)) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, ConstraintError,
    ::testing::Values(
        ErrCase{"seq + 1", "expected a condition"},
        ErrCase{"a == 1 and b", "expected a condition (a comparison such as 'seq % 2 == 0') at "
                                "column 12"},
        ErrCase{"(a < b) + 1", "expected an integer expression at column 1"},
        ErrCase{"a =", "unexpected token '='"},
        ErrCase{"a = 1", "unexpected token '=' at column 3"},
        ErrCase{"a ==", "unexpected end of expression"},
        ErrCase{"seq % 2 == 0)", "unexpected token ')' at column 13"},
        ErrCase{"sek > 0", "unknown symbol 'sek'"},
        ErrCase{"", "empty condition"}));

} // namespace

// A fuzzer-style input: 100000 '(' used to recurse once per level until the
// stack overflowed. Deep nesting is a located user error, and 200 levels still parse.
TEST(IntExpr, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep(100000, '(');
  EXPECT_THAT(errorOf(parseIntExpr(deep + "a", kSyms)), HasSubstr("nested more than 200 levels deep at column 201"));
  EXPECT_THAT(errorOf(parseIntExpr(std::string(100000, '-') + "a", kSyms)), HasSubstr("nested more than 200"));
  std::string calls;
  for (int i = 0; i < 5000; ++i)
    calls += "min(1, ";
  EXPECT_THAT(errorOf(parseIntExpr(calls + "a", kSyms)), HasSubstr("nested more than 200"));
  EXPECT_THAT(errorOf(parseConstraint(std::string(100000, '!') + "a == 1", kSyms)), HasSubstr("nested more than 200"));
  std::string ok = std::string(200, '(') + "a" + std::string(200, ')');
  EXPECT_TRUE(bool(parseIntExpr(ok, kSyms)));
}
