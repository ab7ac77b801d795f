// Layer memoization (src/relation/NodeMemo.h) in isolation: a result stored for
// layer 0 is reused for layer 1 only when layer 1 is layer 0 with other class
// names, down to the definitions the computation consulted.
#include "NodeMemo.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace shardproof;
using namespace shardproof::relation;
using namespace shardproof::ir;

namespace {

Shape vec(int64_t n) {
  Shape s;
  s.dims.push_back(smt::Expr::intConst(n));
  return s;
}

Term at(ClassId c, const char *var = "i") { return mkRead(c, indexVars(var, 1)); }

// One layer: leaves w and x, a computed class scaled = x * k, and out =
// scaled + w (the class a cover would find for the reference term).
struct Layer {
  ClassId w, x, scaled, out;
};

ClassId addLeaf(ClassTable &t, const std::string &label, int64_t n) {
  ClassInfo ci;
  ci.label = label;
  ci.shape = vec(n);
  ci.rank = 0;
  return t.add(ci);
}

Layer addLayer(ClassTable &t, const std::string &tag, double k = 2, bool withOut = true) {
  auto leaf = [&](const std::string &name) { return addLeaf(t, name + tag, 4); };
  Layer l;
  l.w = leaf("w");
  l.x = leaf("x");
  bool created;
  ClassInfo s;
  s.kind = ClassInfo::Compute;
  s.shape = vec(4);
  s.rank = 0;
  s.label = "scaled" + tag;
  s.def = mkMul({at(l.x, "u"), mkConst(k)});
  l.scaled = t.intern(s, created);
  l.out = l.scaled;
  if (withOut) {
    ClassInfo o = s;
    o.label = "out" + tag;
    o.def = mkAdd({at(l.scaled, "u"), at(l.w, "u")});
    l.out = t.intern(o, created);
  }
  return l;
}

// The reference term of one layer: scaled + w, read at i!0.
MemoKey keyFor(const Layer &l) {
  MemoKey k;
  k.str("cover");
  k.term(mkAdd({at(l.scaled), at(l.w)}));
  return k;
}

// "Cover" layer 0 as the prover would: it consults `scaled` (its definition)
// and the class it matched, and the answer is a read of that class.
void storeLayer0(NodeMemo &memo, const ClassTable &t, const Layer &l0) {
  memo.store(keyFor(l0), {l0.scaled, l0.out}, {{at(l0.out)}, 1, ""});
}

} // namespace

TEST(NodeMemo, TheSameTermOneLayerUpIsReusedWithItsOwnClasses) {
  ClassTable t;
  Layer l0 = addLayer(t, "0"), l1 = addLayer(t, "1");
  NodeMemo memo;
  storeLayer0(memo, t, l0);
  auto hit = memo.lookup(keyFor(l1), t);
  ASSERT_TRUE(hit);
  Term reused = hit->second.apply(hit->first->terms[0]);
  // Layer 1's own class, never layer 0's.
  EXPECT_TRUE(sameTerm(reused, at(l1.out))) << str(reused, [&](ClassId c) { return t.label(c); });
  EXPECT_EQ(memo.hits(), 1u);
}

// Layer 1 scales by 3 where layer 0 scaled by 2: the reference terms have the
// same form, but the definition the cover relied on differs. Reusing would
// relate layer 1's tensor to a class that computes something else.
TEST(NodeMemo, AConsultedClassThatComputesSomethingElseIsAMiss) {
  ClassTable t;
  Layer l0 = addLayer(t, "0"), l1 = addLayer(t, "1", /*k=*/3);
  NodeMemo memo;
  storeLayer0(memo, t, l0);
  EXPECT_FALSE(memo.lookup(keyFor(l1), t));
}

// The rank side of layer 1 has no tensor computing scaled + w (a missing
// all-reduce, say): the class layer 0 matched has no counterpart.
TEST(NodeMemo, AMatchedClassWithoutACounterpartOneLayerUpIsAMiss) {
  ClassTable t;
  Layer l0 = addLayer(t, "0"), l1 = addLayer(t, "1", 2, /*withOut=*/false);
  NodeMemo memo;
  storeLayer0(memo, t, l0);
  EXPECT_FALSE(memo.lookup(keyFor(l1), t));
}

// Terms of another form (a different index) never share a key.
TEST(NodeMemo, ADifferentIndexIsADifferentKey) {
  ClassTable t;
  Layer l0 = addLayer(t, "0"), l1 = addLayer(t, "1");
  NodeMemo memo;
  storeLayer0(memo, t, l0);
  MemoKey k;
  k.str("cover");
  IndexVec shifted{indexVar("i", 0) + smt::Expr::intConst(1)};
  k.term(mkAdd({mkRead(l1.scaled, shifted), at(l1.w)}));
  EXPECT_FALSE(memo.lookup(k, t));
}

// An index that reads tensor data names a class inside the expression (an
// uninterpreted function "val:<label>"): renaming classes cannot rename it, so
// such a result is never stored.
TEST(NodeMemo, AResultWhoseIndicesNameAClassIsNotStored) {
  ClassTable t;
  Layer l0 = addLayer(t, "0");
  NodeMemo memo;
  IndexVec byData{smt::Expr::app("val:x0", {indexVar("i", 0)})};
  memo.store(keyFor(l0), {l0.scaled}, {{mkRead(l0.w, byData)}, 0, ""});
  EXPECT_EQ(memo.stored(), 0u);
}

// A computation that created a class knows it without a recorded access.
TEST(NodeMemo, ARecordingThatCreatedAClassIsNotReusable) {
  ClassTable t;
  ClassTable::Recording rec(t);
  addLayer(t, "0");
  EXPECT_FALSE(rec.reusable());
}

TEST(NodeMemo, ARecordingListsTheClassesConsultedOnce) {
  ClassTable t;
  Layer l0 = addLayer(t, "0");
  ClassTable::Recording rec(t);
  (void)t[l0.out];
  (void)t[l0.x];
  (void)t[l0.out];
  EXPECT_TRUE(rec.reusable());
  EXPECT_EQ(rec.consulted(), (std::vector<ClassId>{l0.x, l0.out}));
}

// A numeric probe reads class definitions it does not prove anything with:
// suspended, its reads are not the computation's, and the recording goes on
// after it as before.
TEST(NodeMemo, ReadsWhileARecordingIsSuspendedAreNotConsulted) {
  ClassTable t;
  Layer l0 = addLayer(t, "0");
  ClassTable::Recording rec(t);
  (void)t[l0.out];
  {
    ClassTable::Unrecorded off(t);
    (void)t[l0.x];
    (void)t[l0.w];
  }
  (void)t[l0.scaled];
  EXPECT_TRUE(rec.reusable());
  EXPECT_EQ(rec.consulted(), (std::vector<ClassId>{l0.scaled, l0.out}));
}

// A class created while suspended could reach the result unrecorded.
TEST(NodeMemo, AClassCreatedWhileARecordingIsSuspendedStillPoisonsIt) {
  ClassTable t;
  ClassTable::Recording rec(t);
  {
    ClassTable::Unrecorded off(t);
    addLayer(t, "0");
  }
  EXPECT_FALSE(rec.reusable());
}

namespace {

// Two pieces of one sum at different offsets, created in the order given: the
// sum's operands are sorted by class id, so the two layers list them in
// opposite orders.
struct Pieces {
  ClassId near, far;
};

Pieces addPieces(ClassTable &t, const std::string &tag, bool farFirst) {
  auto leaf = [&](const std::string &name) { return addLeaf(t, name + tag, 8); };
  Pieces p;
  if (farFirst) {
    p.far = leaf("far");
    p.near = leaf("near");
  } else {
    p.near = leaf("near");
    p.far = leaf("far");
  }
  return p;
}

Term sumOf(const Pieces &p) {
  IndexVec shifted{indexVar("i", 0) + smt::Expr::intConst(4)};
  return mkAdd({at(p.near), mkRead(p.far, shifted)});
}

} // namespace

// The weight gradient of each layer sums the ranks' pieces over the sequence;
// the order of the operands follows the class ids, which the next layer
// allocates in another order. The key reads operands by their form, so the
// second layer reuses the first's result, with each piece renamed to its own
// counterpart (near to near, never near to far).
TEST(NodeMemo, ASumWhoseOperandsTheNextLayerListsInAnotherOrderIsReused) {
  ClassTable t;
  Pieces p0 = addPieces(t, "0", /*farFirst=*/false), p1 = addPieces(t, "1", /*farFirst=*/true);
  Term s0 = sumOf(p0), s1 = sumOf(p1);
  ASSERT_EQ(s0->args[0]->cls, p0.near); // the two layers' operand orders differ
  ASSERT_EQ(s1->args[0]->cls, p1.far);
  NodeMemo memo;
  MemoKey k0, k1;
  k0.term(s0);
  k1.term(s1);
  memo.store(std::move(k0), {}, {{at(p0.near)}, 0, ""});
  auto hit = memo.lookup(k1, t);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(sameTerm(hit->second.apply(hit->first->terms[0]), at(p1.near)));
}

// Reordering operands by form never merges two sums that differ: the far piece
// read at another offset is another key.
TEST(NodeMemo, ASumWithAnOperandAtAnotherOffsetIsAMiss) {
  ClassTable t;
  Pieces p0 = addPieces(t, "0", false), p1 = addPieces(t, "1", true);
  NodeMemo memo;
  MemoKey k0, k1;
  k0.term(sumOf(p0));
  IndexVec other{indexVar("i", 0) + smt::Expr::intConst(3)};
  k1.term(mkAdd({at(p1.near), mkRead(p1.far, other)}));
  memo.store(std::move(k0), {}, {{at(p0.near)}, 0, ""});
  EXPECT_FALSE(memo.lookup(k1, t));
}

// Forty entries of the same form that never match again (a first layer on
// each of many ranks, whose input is the embedding rather than a residual
// add), then the layer the next one repeats. The full bucket used to refuse
// the newest entry, so every later layer on 8 ranks missed; it now drops
// the oldest.
TEST(NodeMemo, AFullBucketMakesRoomForTheNewestLayer) {
  ClassTable t;
  NodeMemo memo;
  for (int k = 3; k < 43; ++k)
    storeLayer0(memo, t, addLayer(t, "first" + std::to_string(k), k));
  Layer l0 = addLayer(t, "0"), l1 = addLayer(t, "1");
  storeLayer0(memo, t, l0);
  auto hit = memo.lookup(keyFor(l1), t);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(sameTerm(hit->second.apply(hit->first->terms[0]), at(l1.out)));
}

// A backward MatMul's input gradient: the sum over 8 ranks of each rank's
// weight shard times its gradient shard. Layer 1's shards were made in
// another order than layer 0's, so the sum (its operands sorted by class id)
// lists the ranks in another order; the cover consulted each shard's rank.
// Ordering equal-form operands by rank gives both layers one key and maps
// rank r to rank r; before, the key bound rank 0 to rank 3 and missed.
TEST(NodeMemo, ASumOverRankShardsListedInAnotherClassOrderIsReused) {
  ClassTable t;
  auto shards = [&](const std::string &tag, std::vector<int> order) {
    std::vector<ClassId> byRank(order.size());
    for (int r : order) {
      ClassInfo ci;
      ci.label = "w" + tag + "@" + std::to_string(r);
      ci.shape = vec(4);
      ci.rank = r;
      byRank[r] = t.add(ci);
    }
    return byRank;
  };
  std::vector<ClassId> l0 = shards("0", {0, 1, 2, 3}), l1 = shards("1", {3, 2, 1, 0});
  auto key = [&](const std::vector<ClassId> &w) {
    std::vector<Term> reads;
    for (ClassId c : w)
      reads.push_back(at(c));
    MemoKey k(&t);
    k.str("cover");
    k.term(mkAdd(reads));
    return k;
  };
  NodeMemo memo;
  std::vector<ClassId> consulted = l0;
  std::sort(consulted.begin(), consulted.end());
  memo.store(key(l0), consulted, {{at(l0[0])}, 1, ""});
  auto hit = memo.lookup(key(l1), t);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(sameTerm(hit->second.apply(hit->first->terms[0]), at(l1[0])));
}
