// How many inputs each op takes. A malformed graph (a Sub with one input, a
// Slice whose data input is left empty) must be an input error naming the
// node, never a read past the op's inputs: the check fuzzer found a one-input
// Sub reading input 1's shape from beyond the vector, a crash on the CLI too.
#include "OpTestUtil.h"
#include "shardproof/ir/Ops.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::ir;
using namespace shardproof::ir::testutil;

namespace {

// A node of `def`'s op with `count` inputs, those in `omitted` (a bit mask)
// left empty; the present ones are all of `s` (and integer `values` if set).
struct Inputs {
  Node node;
  std::vector<std::optional<Shape>> shapes;
  std::vector<std::optional<IntTensor>> values;
  std::vector<DType> dtypes;

  Inputs(const OpDef &def, unsigned count, unsigned omitted, const Shape &s, std::optional<IntTensor> v,
         DType dtype, size_t outputs) {
    node = opNode(def.type, {}, outputs);
    node.domain = def.domain;
    for (unsigned i = 0; i < count; ++i) {
      bool empty = (omitted >> i) & 1;
      node.inputs.push_back(empty ? -1 : static_cast<int>(i));
      shapes.push_back(empty ? std::nullopt : std::optional<Shape>(s));
      values.push_back(empty ? std::nullopt : v);
      dtypes.push_back(empty ? DType::Other : dtype);
    }
  }
  OpInputs get() const {
    OpInputs in{node, shapes, dtypes, values, {}, 2};
    in.data.assign(shapes.size(), nullptr);
    in.indexValue = [](const Term &) { return std::optional<smt::Expr>(); };
    in.inputValue = [](unsigned, const IndexVec &) { return std::optional<smt::Expr>(); };
    in.nonNegative = [](const smt::Expr &) { return false; };
    return in;
  }
};

TEST(OpArity, ASubWithOneInputIsAnInputErrorNamingTheNode) {
  const OpDef *sub = lookupOp("", "Sub");
  ASSERT_NE(sub, nullptr);
  Inputs one(*sub, 1, 0, shape({sym("b"), num(4)}), std::nullopt, DType::Float, 1);
  auto r = inferNode(*sub, one.get());
  ASSERT_FALSE(r);
  TakenError e = takeError(r.takeError());
  EXPECT_EQ(e.kind, ErrorKind::User);
  EXPECT_EQ(e.message, "node '/m/Sub' (Sub) has 1 input; Sub takes 2");
}

TEST(OpArity, ARequiredInputLeftEmptyIsAnInputError) {
  const OpDef *slice = lookupOp("", "Slice");
  ASSERT_NE(slice, nullptr);
  Inputs in(*slice, 3, /*omitted=*/1, shape({num(4)}), ints({0}), DType::Int64, 1);
  auto r = inferNode(*slice, in.get());
  ASSERT_FALSE(r);
  EXPECT_EQ(takeError(r.takeError()).message, "node '/m/Slice' (Slice): input 0 of Slice is required but left empty");
}

TEST(OpArity, VariadicOpsTakeAnyCountFromTheirMinimum) {
  const OpDef *concat = lookupOp("", "Concat");
  ASSERT_NE(concat, nullptr);
  EXPECT_EQ(concat->inputs.max, Arity::kAnyCount);
  Inputs none(*concat, 0, 0, shape({num(2)}), std::nullopt, DType::Float, 1);
  auto r = inferNode(*concat, none.get());
  ASSERT_FALSE(r);
  EXPECT_EQ(takeError(r.takeError()).message, "node '/m/Concat' (Concat) has 0 inputs; Concat takes at least 1");
}

TEST(OpArity, FastGeluWithABiasIsUnsupportedNotDropped) {
  const OpDef *g = lookupOp("com.microsoft", "FastGelu");
  ASSERT_NE(g, nullptr);
  Inputs in(*g, 2, 0, shape({num(4)}), std::nullopt, DType::Float, 1);
  auto r = inferNode(*g, in.get());
  ASSERT_FALSE(r);
  EXPECT_EQ(takeError(r.takeError()).kind, ErrorKind::Unsupported);
}

// Every op of the table, at every input count from 0 to one past its maximum
// (capped) and every choice of empty inputs: either an error, or an element
// map that reads only inputs the node has. Run under ASan in CI, a read past
// OpInputs' vectors in infer itself is caught too.
TEST(OpArity, EveryOpReadsOnlyTheInputsItIsGiven) {
  struct Kind {
    Shape s;
    std::optional<IntTensor> v;
    DType dtype;
  };
  const Kind kinds[] = {{shape({num(2), num(3)}), std::nullopt, DType::Float},
                        {shape({num(1)}), ints({1}), DType::Int64},
                        {shape({}), IntTensor{{}, {num(1)}}, DType::Int64}};
  for (const OpDef *def : allOps()) {
    unsigned top = std::min<unsigned>(def->inputs.max, 5) + 1;
    for (unsigned count = 0; count <= top; ++count)
      for (unsigned omitted = 0; omitted < (1u << count); ++omitted)
        for (const Kind &k : kinds)
          for (size_t outputs : {1, 2}) {
            Inputs built(*def, count, omitted, k.s, k.v, k.dtype, outputs);
            OpInputs in = built.get();
            SCOPED_TRACE(std::string(def->domain) + "::" + def->type + " with " + std::to_string(count) +
                         " inputs, empty mask " + std::to_string(omitted));
            auto r = inferNode(*def, in);
            bool fits = count >= def->inputs.min && count <= def->inputs.max &&
                        (omitted & ((1u << def->inputs.min) - 1)) == 0;
            if (!fits) {
              EXPECT_FALSE(r) << "an input count out of range or an empty required input passed";
              if (!r)
                EXPECT_EQ(takeError(r.takeError()).kind, ErrorKind::User);
              continue;
            }
            if (!r) {
              consumeError(r.takeError());
              continue;
            }
            if (!def->element)
              continue;
            ReadFn read = [&](unsigned i, const IndexVec &idx, int) {
              EXPECT_TRUE(in.has(i)) << "element map read input " << i;
              return mkRead(i, idx);
            };
            for (unsigned slot = 0; slot < r->shapes.size(); ++slot) {
              IndexVec iv = indexVars("i", static_cast<unsigned>(r->shapes[slot].rank()));
              (void)def->element(in, *r, slot, iv, read, 0);
            }
          }
  }
}

} // namespace
