// Relation expressions: expansion of NAME@*, keyword validation, canonical
// rendering, and the mistakes users make writing them.
#include "TestUtil.h"

#include <gmock/gmock.h>

using namespace shardproof;
using namespace shardproof::spec;
using namespace shardproof::spec::test;
using ::testing::HasSubstr;

namespace {

const SymbolTable kSyms{{"vocab", "b", "s", "d"}};

TEST(Relation, StarExpandsToOneTensorPerRank) {
  auto r = parseRelation("concat(h@*, axis=1)", 3, kSyms);
  ASSERT_TRUE(bool(r)) << errorOf(std::move(r));
  EXPECT_EQ(r->kind, RelExpr::Kind::Call);
  EXPECT_EQ(r->fn, "concat");
  ASSERT_EQ(r->args.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r->args[i].kind, RelExpr::Kind::Tensor);
    EXPECT_EQ(r->args[i].name, "h");
    EXPECT_EQ(r->args[i].rank, i);
  }
  ASSERT_NE(r->kwarg("axis"), nullptr);
  EXPECT_EQ(r->kwarg("axis")->values.at(0).asInt(), 1);
  EXPECT_FALSE(r->kwarg("axis")->isList);
  EXPECT_EQ(r->str(), "concat(h@0, h@1, h@2, axis=1)");
}

TEST(Relation, NestedSliceOfConcat) {
  auto r = parseRelation("slice(concat(z@0, z@1, axis=0), axis=0, start=0, end=vocab)", 2, kSyms);
  ASSERT_TRUE(bool(r)) << errorOf(std::move(r));
  EXPECT_EQ(r->fn, "slice");
  ASSERT_EQ(r->args.size(), 1u);
  const RelExpr &inner = r->args[0];
  EXPECT_EQ(inner.fn, "concat");
  ASSERT_EQ(inner.args.size(), 2u);
  EXPECT_EQ(inner.args[1].name, "z");
  EXPECT_EQ(inner.args[1].rank, 1);
  ASSERT_NE(r->kwarg("end"), nullptr);
  EXPECT_EQ(r->kwarg("end")->values.at(0).asVar(), "vocab");
  EXPECT_EQ(r->kwarg("start")->values.at(0).asInt(), 0);
  EXPECT_EQ(r->str(), "slice(concat(z@0, z@1, axis=0), axis=0, start=0, end=vocab)");
}

struct StrCase {
  const char *text;
  int worldSize;
  const char *canonical;
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const StrCase &c, std::ostream *os) { *os << c.text; }

class RelationRender : public ::testing::TestWithParam<StrCase> {};

TEST_P(RelationRender, Canonical) {
  const StrCase &c = GetParam();
  auto r = parseRelation(c.text, c.worldSize, kSyms);
  ASSERT_TRUE(bool(r)) << c.text << ": " << errorOf(std::move(r));
  EXPECT_EQ(r->str(), c.canonical);
  // The canonical form parses back to itself.
  auto again = parseRelation(r->str(), c.worldSize, kSyms);
  ASSERT_TRUE(bool(again)) << errorOf(std::move(again));
  EXPECT_EQ(again->str(), c.canonical);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, RelationRender,
    ::testing::Values(
        StrCase{"sum(p@*)", 4, "sum(p@0, p@1, p@2, p@3)"},
        // data-parallel loss: the average of the ranks' losses
        StrCase{"mean(loss@*)", 2, "mean(loss@0, loss@1)"},
        StrCase{"mean( g@0 )", 3, "mean(g@0)"},
        StrCase{"h@*", 1, "h@0"}, // a lone NAME@* is fine with one rank
        StrCase{"h@1", 2, "h@1"},
        StrCase{"  sum( p@0 ,p@1 ) ", 2, "sum(p@0, p@1)"},
        // keyword order is canonicalised
        StrCase{"slice(x@0, end=vocab, start=1, axis=-1)", 1, "slice(x@0, axis=-1, start=1, end=vocab)"},
        StrCase{"pad(x@0, axis=1, before=0, after=2)", 1, "pad(x@0, axis=1, before=0, after=2)"},
        StrCase{"transpose(x@0, perm=[1, 0])", 1, "transpose(x@0, perm=[1, 0])"},
        StrCase{"reshape(concat(x@*, axis=0), shape=[2, d])", 2,
                "reshape(concat(x@0, x@1, axis=0), shape=[2, d])"},
        StrCase{"concat(a@*, b@0, axis=0)", 2, "concat(a@0, a@1, b@0, axis=0)"},
        StrCase{"sum('onnx::W'@0, \"onnx::W\"@1)", 2, "sum('onnx::W'@0, 'onnx::W'@1)"},
        StrCase{"concat(h.0@*, axis=2)", 2, "concat(h.0@0, h.0@1, axis=2)"},
        // A negation as a later operand of a sum stays one: printed
        // `s + 0 - vocab` it parsed back as `(s + 0) - vocab` and rendered
        // differently the second time (a fuzz finding).
        StrCase{"slice(x@0, axis=0, start=s + -vocab, end=s)", 1,
                "slice(x@0, axis=0, start=s + -vocab, end=s)"},
        // -1*s and -s are read as different trees but print alike, as -s.
        StrCase{"slice(x@0, axis=0, start=-1*s, end=-s)", 1, "slice(x@0, axis=0, start=-s, end=-s)"},
        // A later factor keeps the parentheses that change the value or the tree.
        StrCase{"slice(x@0, axis=0, start=2*(s // 2), end=2*(2*s))", 1,
                "slice(x@0, axis=0, start=2*(s // 2), end=2*(2*s))"},
        StrCase{"slice(x@0, axis=0, start=min(s, vocab, 3), end=max(s, 1))", 1,
                "slice(x@0, axis=0, start=min(min(s, vocab), 3), end=max(s, 1))"},
        StrCase{"sum(\"it's\"@0)", 1, "sum(\"it's\"@0)"}));

TEST(Relation, ListKwargsKeepEveryValue) {
  auto r = parseRelation("reshape(x@0, shape=[b * s, d])", 1, kSyms);
  ASSERT_TRUE(bool(r)) << errorOf(std::move(r));
  const auto *shape = r->kwarg("shape");
  ASSERT_NE(shape, nullptr);
  EXPECT_TRUE(shape->isList);
  ASSERT_EQ(shape->values.size(), 2u);
  EXPECT_EQ(evalWith(shape->values[0], {{"b", 2}, {"s", 3}}).asInt(), 6);
  EXPECT_EQ(shape->values[1].asVar(), "d");
}

TEST(Relation, LocationsPointIntoTheText) {
  auto r = parseRelation("sum(p@0, q@1)", 2, kSyms, SrcLoc{"s.yaml", 4, 10});
  ASSERT_TRUE(bool(r)) << errorOf(std::move(r));
  EXPECT_EQ(r->loc.col, 10);
  EXPECT_EQ(r->args[1].loc.line, 4);
  EXPECT_EQ(r->args[1].loc.col, 19);
}

struct ErrCase {
  const char *text;
  int worldSize;
  const char *message;
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const ErrCase &c, std::ostream *os) { *os << c.text; }

class RelationError : public ::testing::TestWithParam<ErrCase> {};

TEST_P(RelationError, IsRejected) {
  const ErrCase &c = GetParam();
  auto r = parseRelation(c.text, c.worldSize, kSyms);
  EXPECT_THAT(errorOf(std::move(r)), HasSubstr(c.message)) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, RelationError,
    ::testing::Values(
        ErrCase{"concat(h@0, h@5, axis=0)", 4, "rank 5 out of range for world_size 4"},
        ErrCase{"h@2", 2, "rank 2 out of range for world_size 2"},
        ErrCase{"slice(x@0, axis=0, start=0)", 1, "slice() needs keyword argument 'end'"},
        ErrCase{"concat(h@*)", 2, "concat() needs keyword argument 'axis'"},
        ErrCase{"transpose(x@0)", 1, "needs keyword argument 'perm'"},
        ErrCase{"concat(h@*, axs=1)", 2, "unknown keyword argument 'axs' for concat() at column 13; "
                                         "did you mean 'axis'?"},
        ErrCase{"sum(p@*, axis=0)", 2, "unknown keyword argument 'axis' for sum() at column 10 (it "
                                       "takes none)"},
        ErrCase{"mean(loss@*, axis=0)", 2, "unknown keyword argument 'axis' for mean() at column 14 (it "
                                           "takes none)"},
        ErrCase{"mean()", 2, "mean() needs at least one tensor argument"},
        ErrCase{"mean(loss@2)", 2, "rank 2 out of range for world_size 2"},
        ErrCase{"mean", 2, "expected '@' after 'mean' at column 5"},
        ErrCase{"concatenate(h@*, axis=0)", 2, "unknown relation function 'concatenate' at column "
                                               "1; did you mean 'concat'?"},
        ErrCase{"gather(h@*)", 2, "unknown relation function 'gather'"},
        ErrCase{"h@*", 2, "'h@*' at column 1 stands for 2 tensors; use it inside a call"},
        ErrCase{"slice(h@*, axis=0, start=0, end=1)", 2,
                "slice() takes exactly one tensor argument, got 2"},
        ErrCase{"concat(axis=0)", 2, "concat() needs at least one tensor argument"},
        ErrCase{"concat(h@*, axis=d)", 2, "'axis' at column 18 must be an integer constant, got 'd'"},
        ErrCase{"transpose(x@0, perm=[d, 0])", 1, "must be an integer constant"},
        ErrCase{"transpose(x@0, perm=1)", 1, "'perm' at column 16 takes a list such as [1, 0]"},
        ErrCase{"concat(h@*, axis=[0])", 2, "takes a single integer expression, not a list"},
        ErrCase{"concat(h@0, axis=0, axis=1)", 2, "keyword argument 'axis' given twice"},
        ErrCase{"h", 1, "expected '@' after 'h' at column 2"},
        ErrCase{"h@", 1, "expected a rank number or '*' after '@' at column 3"},
        ErrCase{"h@-1", 1, "expected a rank number or '*' after '@'"},
        ErrCase{"concat(h@0 h@1, axis=0)", 2, "expected ')' or ',' at column 12"},
        ErrCase{"sum(p@0, p@1", 2, "expected ')' or ',' at column 13, found end of expression"},
        ErrCase{"sum(p@0) + 1", 2, "unexpected token '+' at column 10"},
        ErrCase{"sum(p@0,)", 2, "expected a relation"},
        ErrCase{"slice(x@0, axis=0, start=0, end=vocab / 2)", 1, "use '//'"},
        ErrCase{"", 1, "empty relation expression"}));

} // namespace

TEST(Relation, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep;
  for (int i = 0; i < 20000; ++i)
    deep += "sum(";
  EXPECT_THAT(errorOf(parseRelation(deep + "h@0", 2, kSyms)), HasSubstr("nested more than 200 levels deep"));
}
