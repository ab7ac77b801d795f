// The collective rows' element maps across ranks: each rank's output shape and
// element, written as reads of every rank's input (rank q's input read at
// [..] is `x<q>[..]`), checked at concrete sizes against the element worked
// out by hand for 2 and 3 ranks, uneven AllGather pieces and AllToAll's
// exchange included; and the obligations a call puts on the ranks' shapes.
#include "OpTestUtil.h"
#include "shardproof/ir/Ops.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;
using namespace shardproof::ir::testutil;

namespace {

const CollectiveDef &row(const char *op) {
  const OpDef *d = lookupOp("shardproof", op);
  EXPECT_TRUE(d && d->collective) << op;
  static const CollectiveDef none{};
  return d && d->collective ? *d->collective : none;
}

Node call(const char *op, std::map<std::string, Attribute> attrs = {}) {
  Node n = opNode(op, std::move(attrs), 1);
  n.domain = "shardproof";
  return n;
}

Shape dims(std::vector<int64_t> v) {
  Shape s;
  for (auto d : v)
    s.dims.push_back(num(d));
  return s;
}

IndexVec at(std::vector<int64_t> v) {
  IndexVec i;
  for (auto x : v)
    i.push_back(num(x));
  return i;
}

// Rank q's input element at `idx`.
Term x(int q, std::vector<int64_t> idx) { return mkRead(static_cast<ClassId>(q), at(idx)); }

std::string show(const Term &t) {
  return t ? str(t, [](ClassId c) { return "x" + std::to_string(c); }) : "(null)";
}

// Element `idx` of rank r's output under `n`'s row, given every rank's input shape.
Term element(const Node &n, const std::vector<Shape> &ins, int r, std::vector<int64_t> idx) {
  RankReadFn read = [](int q, const IndexVec &i) { return mkRead(static_cast<ClassId>(q), i); };
  return row(n.opType.c_str()).element(n, ins, r, at(idx), read);
}

#define EXPECT_TERM(got, want) EXPECT_TRUE(sameTerm(got, want)) << show(got) << " != " << show(want)

} // namespace

TEST(CollectiveRows, AllReduceSumsEveryRanksElementOnEveryRank) {
  Node n = call("AllReduce");
  std::vector<Shape> ins(3, dims({2, 3}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_TERM(element(n, ins, r, {1, 2}), mkAdd({mkAdd({x(0, {1, 2}), x(1, {1, 2})}), x(2, {1, 2})}));
    EXPECT_EQ(row("AllReduce").shape(n, ins, r).str(), "[2, 3]");
  }
}

TEST(CollectiveRows, AllReduceMaxTakesTheMaxOfTheRanks) {
  Node n = call("AllReduce", {{"op", strAttr("max")}});
  std::vector<Shape> ins(2, dims({4}));
  EXPECT_TERM(element(n, ins, 1, {3}), mkApply(Fn::Max2, {x(0, {3}), x(1, {3})}));
}

TEST(CollectiveRows, AllGatherOfUnevenPiecesReadsEachRowFromItsRank) {
  // Rows 0-1 from rank 0, 2-4 from rank 1, 5 from rank 2 (a tensor_split of 6 rows).
  Node n = call("AllGather", {{"axis", intAttr(0)}});
  std::vector<Shape> ins = {dims({2, 4}), dims({3, 4}), dims({1, 4})};
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(row("AllGather").shape(n, ins, r).str(), "[6, 4]");
    EXPECT_TERM(element(n, ins, r, {0, 3}), x(0, {0, 3}));
    EXPECT_TERM(element(n, ins, r, {1, 1}), x(0, {1, 1}));
    EXPECT_TERM(element(n, ins, r, {2, 1}), x(1, {0, 1}));
    EXPECT_TERM(element(n, ins, r, {4, 0}), x(1, {2, 0}));
    EXPECT_TERM(element(n, ins, r, {5, 2}), x(2, {0, 2}));
  }
}

TEST(CollectiveRows, AllGatherOnANegativeAxisConcatenatesTheLastAxis) {
  Node n = call("AllGather", {{"axis", intAttr(-1)}});
  std::vector<Shape> ins(2, dims({2, 3}));
  EXPECT_EQ(row("AllGather").shape(n, ins, 0).str(), "[2, 6]");
  EXPECT_TERM(element(n, ins, 0, {1, 4}), x(1, {1, 1}));
  EXPECT_TERM(element(n, ins, 1, {0, 2}), x(0, {0, 2}));
}

TEST(CollectiveRows, ReduceScatterGivesRankRChunkROfTheSum) {
  Node n = call("ReduceScatter", {{"axis", intAttr(0)}});
  std::vector<Shape> ins(2, dims({4, 3}));
  EXPECT_EQ(row("ReduceScatter").shape(n, ins, 1).str(), "[2, 3]");
  EXPECT_TERM(element(n, ins, 0, {1, 2}), mkAdd({x(0, {1, 2}), x(1, {1, 2})}));
  EXPECT_TERM(element(n, ins, 1, {1, 2}), mkAdd({x(0, {3, 2}), x(1, {3, 2})}));
  // Three ranks: rank 2's row 0 is row 4 of a 6-row input.
  std::vector<Shape> three(3, dims({6, 3}));
  EXPECT_TERM(element(n, three, 2, {0, 1}), mkAdd({mkAdd({x(0, {4, 1}), x(1, {4, 1})}), x(2, {4, 1})}));
}

TEST(CollectiveRows, ReduceScatterAsksForEqualShapesThenADivisibleAxis) {
  Node n = call("ReduceScatter", {{"axis", intAttr(0)}});
  std::vector<RankObligation> obl;
  row("ReduceScatter").obligations(n, {dims({5, 3}), dims({5, 3})}, obl);
  ASSERT_EQ(obl.size(), 3u);
  EXPECT_EQ(obl[0].rank, 1);
  const std::string rs = "'/m/ReduceScatter' (shardproof::ReduceScatter)";
  EXPECT_EQ(obl[0].obligation.what, "ranks pass equal shapes to " + rs + " (dim 0)");
  EXPECT_EQ(obl[1].obligation.what, "ranks pass equal shapes to " + rs + " (dim 1)");
  EXPECT_EQ(obl[2].rank, 0);
  EXPECT_EQ(obl[2].obligation.what, "world_size 2 divides axis 0 of the input to " + rs);
  EXPECT_EQ(obl[2].obligation.cond.simplify().asBool(), false); // 5 rows do not split in 2
}

namespace {

// An AllToAll of `world` ranks passing `in` each, split on `split`, concatenated on `cat`.
struct Exchange {
  Node n;
  std::vector<Shape> ins;
  Exchange(int64_t split, int64_t cat, int world, std::vector<int64_t> in)
      : n(call("AllToAll", {{"split_axis", intAttr(split)}, {"concat_axis", intAttr(cat)}})), ins(world, dims(in)) {}
  std::string shape(int r) const { return row("AllToAll").shape(n, ins, r).str(); }
  Term at(int r, std::vector<int64_t> idx) const { return element(n, ins, r, idx); }
};

} // namespace

TEST(CollectiveRows, AllToAllSendsChunkROfEveryRankToRankR) {
  // Three ranks, [2, 6] each, split on axis 1 (chunks of 2), concatenated on
  // axis 0: rank r's [6, 2] output stacks chunk r of ranks 0, 1, 2.
  Exchange a(1, 0, 3, {2, 6});
  EXPECT_EQ(a.shape(0), "[6, 2]");
  EXPECT_TERM(a.at(0, {5, 0}), x(2, {1, 0}));
  EXPECT_TERM(a.at(2, {3, 1}), x(1, {1, 5}));
  EXPECT_TERM(a.at(1, {0, 0}), x(0, {0, 2}));
  // Split and concat on axis 0 with 2 ranks: rank 1 gets rows 2-3 of each rank.
  Exchange b(0, 0, 2, {4, 3});
  EXPECT_EQ(b.shape(1), "[4, 3]");
  EXPECT_TERM(b.at(1, {0, 0}), x(0, {2, 0}));
  EXPECT_TERM(b.at(1, {3, 2}), x(1, {3, 2}));
  EXPECT_TERM(b.at(0, {2, 1}), x(1, {0, 1}));
}

TEST(CollectiveRows, RowsSayWhatTheyReadAndWhetherTheyReduce) {
  EXPECT_TRUE(row("AllReduce").readsOp);
  EXPECT_TRUE(row("AllReduce").reduces);
  EXPECT_TRUE(row("ReduceScatter").reduces);
  EXPECT_FALSE(row("AllGather").reduces);
  EXPECT_FALSE(row("AllToAll").reduces);
  ASSERT_EQ(row("AllToAll").axes.size(), 2u);
  EXPECT_STREQ(row("AllToAll").axes[0], "split_axis");
  EXPECT_EQ(collectiveCall(call("AllReduce")), "AllReduce:sum");
  EXPECT_EQ(collectiveCall(call("AllToAll", {{"split_axis", intAttr(1)}, {"concat_axis", intAttr(0)}})),
            "AllToAll split_axis=1 concat_axis=0");
}
