// Index-map semantics of the op table: for each op, the output shape over
// symbolic dims, the element each output index reads, and the obligations the
// op puts on sizes. Inputs are rendered as in0, in1, ...; index variables as i!d.
#include "OpTestUtil.h"
#include "shardproof/ir/Ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;
using namespace shardproof::ir::testutil;

namespace {


// One op applied to inputs of the given shapes (and known integer values).
struct Apply {
  Node node;
  std::vector<std::optional<Shape>> shapes;
  std::vector<std::optional<IntTensor>> values;
  DType dtype;
  std::optional<OpResult> result;
  std::string error;

  Apply(const std::string &op, std::vector<std::optional<Shape>> in, std::map<std::string, Attribute> attrs = {},
        std::vector<std::optional<IntTensor>> vals = {}, size_t outputs = 1, DType dtype = DType::Float)
      : shapes(std::move(in)), values(std::move(vals)), dtype(dtype) {
    node = opNode(op, std::move(attrs), outputs);
    values.resize(shapes.size());
    TakenError e;
    result = inferOp(inputs(), e);
    error = e.text;
  }
  OpInputs inputs() const {
    OpInputs in{node, shapes, {}, values, {}, 1};
    in.dtypes.assign(shapes.size(), dtype);
    in.data.assign(shapes.size(), nullptr);
    return in;
  }
  std::string outShape(unsigned slot = 0) const { return result ? result->shapes[slot].str() : "error: " + error; }
  // Output element at the generic index (i!0, i!1, ...), simplified for reading.
  std::string element(unsigned slot = 0) const {
    if (!result)
      return "error: " + error;
    const OpDef *def = lookupOp("", node.opType);
    ReadFn read = [](unsigned input, const IndexVec &idx, int) {
      IndexVec s;
      for (auto &e : idx)
        s.push_back(e.simplify());
      return mkRead(input, s);
    };
    IndexVec iv = indexVars("i", static_cast<unsigned>(result->shapes[slot].rank()));
    Term t = def->element(inputs(), *result, slot, iv, read, 0);
    t = mapExprs(t, [](const Expr &e) { return e.simplify(); });
    return str(t, [](ClassId c) { return "in" + std::to_string(c); });
  }
  std::vector<std::string> obligations() const {
    std::vector<std::string> out;
    if (result)
      for (auto &o : result->obligations)
        if (!o.cond.simplify().asBool().value_or(false)) // drop the trivially true ones
          out.push_back(o.cond.simplify().str());
    return out;
  }
};

} // namespace

TEST(IndexMap, MatMulIsASumOverTheInnerDim) {
  Apply a("MatMul", {shape({sym("b"), sym("s"), num(8)}), shape({num(8), num(16)})});
  EXPECT_EQ(a.outShape(), "[b, s, 16]");
  EXPECT_EQ(a.element(), "sum(k!0 in [0, 8): (in0[i!0, i!1, k!0] * in1[k!0, i!2]))");
  EXPECT_TRUE(a.obligations().empty());
}

TEST(IndexMap, MatMulWithSymbolicInnerDimsObligesThemToAgree) {
  Apply a("MatMul", {shape({sym("s"), sym("h")}), shape({sym("g"), num(4)})});
  EXPECT_EQ(a.outShape(), "[s, 4]");
  ASSERT_EQ(a.obligations().size(), 1u);
  EXPECT_NE(a.obligations()[0].find("h"), std::string::npos);
  EXPECT_NE(a.obligations()[0].find("g"), std::string::npos);
}

TEST(IndexMap, GemmWithTransposedBReadsBColumnMajor) {
  Apply a("Gemm", {shape({sym("n"), num(8)}), shape({num(4), num(8)})}, {{"transB", intAttr(1)}});
  EXPECT_EQ(a.outShape(), "[n, 4]");
  EXPECT_EQ(a.element(), "sum(k!0 in [0, 8): (in0[i!0, k!0] * in1[i!1, k!0]))");
}

TEST(IndexMap, GemmRejectsACThatDoesNotBroadcastOneWayToTheOutput) {
  // C [2, 4, 5] against a [4, 5] output read past the index it was given (a
  // crash); C [3, 5] with M = 1 would grow the output, which ONNX rejects.
  Apply deeper("Gemm", {shape({num(4), num(3)}), shape({num(3), num(5)}), shape({num(2), num(4), num(5)})});
  EXPECT_FALSE(deeper.result);
  EXPECT_NE(deeper.error.find("more dims"), std::string::npos) << deeper.error;
  Apply wider("Gemm", {shape({num(1), num(3)}), shape({num(3), num(5)}), shape({num(3), num(5)})});
  EXPECT_FALSE(wider.result);
  EXPECT_NE(wider.error.find("does not broadcast"), std::string::npos) << wider.error;
  Apply bias("Gemm", {shape({sym("m"), num(3)}), shape({num(3), num(5)}), shape({num(5)})});
  EXPECT_EQ(bias.outShape(), "[m, 5]");
  EXPECT_EQ(bias.element(), "(in2[i!1] + sum(k!0 in [0, 3): (in0[i!0, k!0] * in1[k!0, i!1])))");
}

TEST(IndexMap, BroadcastAddReadsTheBiasAtTheLastIndexOnly) {
  Apply a("Add", {shape({sym("b"), sym("s"), num(8)}), shape({num(8)})});
  EXPECT_EQ(a.outShape(), "[b, s, 8]");
  EXPECT_EQ(a.element(), "(in0[i!0, i!1, i!2] + in1[i!2])");
}

TEST(IndexMap, BroadcastOfTwoSymbolicDimsIsAnObligation) {
  Apply a("Mul", {shape({sym("s")}), shape({sym("t")})});
  ASSERT_EQ(a.obligations().size(), 1u) << a.outShape();
  EXPECT_NE(a.obligations()[0].find("s"), std::string::npos);
  EXPECT_NE(a.obligations()[0].find("t"), std::string::npos);
}

TEST(IndexMap, BroadcastOfUnequalConstantsIsAnError) {
  Apply a("Add", {shape({num(3)}), shape({num(4)})});
  EXPECT_FALSE(a.result.has_value());
  EXPECT_NE(a.error.find("/m/Add"), std::string::npos) << a.error;
}

TEST(IndexMap, TransposeSwapsTheIndices) {
  Apply a("Transpose", {shape({sym("s"), num(4), num(8)})}, {{"perm", intsAttr({2, 0, 1})}});
  EXPECT_EQ(a.outShape(), "[8, s, 4]");
  EXPECT_EQ(a.element(), "in0[i!1, i!2, i!0]");
}

TEST(IndexMap, SliceShiftsTheIndexByItsStart) {
  Apply a("Slice", {shape({sym("s"), num(16)}), shape({num(1)}), shape({num(1)}), shape({num(1)})}, {},
          {std::nullopt, ints({7}), ints({15}), ints({1})});
  EXPECT_EQ(a.outShape(), "[s, 8]");
  EXPECT_EQ(a.element(), "in0[i!0, 7 + i!1]");
}

TEST(IndexMap, SliceClampsEndsAndCountsNegativeStartsFromTheEnd) {
  // x[:, -3:] with the exporter's "to the end" sentinel.
  Apply a("Slice", {shape({sym("s"), num(16)}), shape({num(1)}), shape({num(1)}), shape({num(1)})}, {},
          {std::nullopt, ints({-3}), ints({INT64_MAX}), ints({1})});
  EXPECT_EQ(a.outShape(), "[s, 3]");
  EXPECT_EQ(a.element(), "in0[i!0, 13 + i!1]");
}

TEST(IndexMap, SliceOfASymbolicAxisIsClampedToTheDim) {
  // x[:4] on a dim of size s is min(4, s) long: empty tails are not assumed away.
  Apply a("Slice", {shape({sym("s")}), shape({num(1)}), shape({num(1)})}, {}, {std::nullopt, ints({0}), ints({4})});
  EXPECT_NE(a.outShape().find("s"), std::string::npos) << a.outShape();
  EXPECT_NE(a.outShape().find("4"), std::string::npos) << a.outShape();
}

TEST(IndexMap, SliceWithStepTwoReadsEveryOtherElement) {
  // x[:, 1::2] on 16 columns: 8 elements, column 1 + 2 i.
  Apply a("Slice", {shape({sym("s"), num(16)}), shape({num(1)}), shape({num(1)}), shape({num(1)}), shape({num(1)})},
          {}, {std::nullopt, ints({1}), ints({INT64_MAX}), ints({1}), ints({2})});
  EXPECT_EQ(a.outShape(), "[s, 8]");
  EXPECT_EQ(a.element(), "in0[i!0, 1 + 2*i!1]");
}

TEST(IndexMap, SliceWithStepMinusOneReversesTheWholeAxis) {
  // x.flip(1) as torch exports it: start -1, end -INT64_MAX, step -1.
  Apply a("Slice", {shape({sym("s"), num(16)}), shape({num(1)}), shape({num(1)}), shape({num(1)}), shape({num(1)})},
          {}, {std::nullopt, ints({-1}), ints({-INT64_MAX}), ints({1}), ints({-1})});
  EXPECT_EQ(a.outShape(), "[s, 16]");
  EXPECT_EQ(a.element(), "in0[i!0, 15 - i!1]");
}

TEST(IndexMap, AReverseSliceStartBeforeTheAxisClampsToItsFirstElement) {
  // ONNX: with a negative step the start clamps to [0, dim - 1] (the end to
  // [-1, dim - 1]); a start of -100 on 16 elements is element 0, so slicing
  // down to the end keeps exactly that element.
  Apply a("Slice", {shape({num(16)}), shape({num(1)}), shape({num(1)}), shape({num(1)}), shape({num(1)})}, {},
          {std::nullopt, ints({-100}), ints({-INT64_MAX}), ints({0}), ints({-1})});
  EXPECT_EQ(a.outShape(), "[1]");
  EXPECT_EQ(a.element(), "in0[-i!0]");
}

TEST(IndexMap, PadWidensEachAxisByItsPads) {
  // F.pad(x, (1, 2)) on [s, 4]: pads are all befores, then all afters.
  Apply a("Pad", {shape({sym("s"), num(4)}), shape({num(4)})}, {}, {std::nullopt, ints({0, 1, 0, 2})});
  EXPECT_EQ(a.outShape(), "[s, 7]");
  EXPECT_NE(a.element().find("in0[i!0, -1 + i!1]"), std::string::npos) << a.element();
}

TEST(IndexMap, PadInReflectModeObligesTheInputToBeWiderThanThePad) {
  // Reflecting 2 rows needs at least 3: at s = 2 ONNX has nothing to reflect.
  Apply a("Pad", {shape({sym("s")}), shape({num(2)})}, {{"mode", strAttr("reflect")}}, {std::nullopt, ints({2, 0})});
  EXPECT_EQ(a.outShape(), "[2 + s]");
  // After the size obligation, the width condition (the pads are known non-negative).
  ASSERT_EQ(a.obligations().size(), 2u);
  EXPECT_NE(a.obligations()[1].find("3 <= s"), std::string::npos) << a.obligations()[1];
}

TEST(IndexMap, ConcatSelectsTheInputByTheAxisIndex) {
  Apply a("Concat", {shape({sym("s"), sym("a")}), shape({sym("s"), sym("b")})}, {{"axis", intAttr(1)}});
  EXPECT_EQ(a.outShape(), "[s, a + b]");
  EXPECT_EQ(a.element(), "(a > i!1 ? in0[i!0, i!1] : in1[i!0, i!1 - a])");
}

TEST(IndexMap, ConcatWithMismatchedOtherDimsIsAnObligation) {
  Apply a("Concat", {shape({sym("s"), num(2)}), shape({sym("t"), num(3)})}, {{"axis", intAttr(1)}});
  ASSERT_EQ(a.obligations().size(), 1u);
}

TEST(IndexMap, SplitReadsItsPartAtAnOffset) {
  Apply a("Split", {shape({sym("s"), num(12)}), shape({num(3)})}, {{"axis", intAttr(1)}},
          {std::nullopt, ints({4, 4, 4})}, 3);
  EXPECT_EQ(a.outShape(2), "[s, 4]");
  EXPECT_EQ(a.element(2), "in0[i!0, 8 + i!1]");
}

TEST(IndexMap, ReshapeSplittingTheLastDimUsesDivModOnlyThere) {
  // [b, s, 8] -> [b, s, 2, 4]: heads split; batch and seq indices pass through.
  Apply a("Reshape", {shape({sym("b"), sym("s"), num(8)}), shape({num(4)})}, {},
          {std::nullopt, ints({0, 0, 2, 4})});
  EXPECT_EQ(a.outShape(), "[b, s, 2, 4]");
  EXPECT_EQ(a.element(), "in0[i!0, i!1, 4*i!2 + i!3]");
}

TEST(IndexMap, ReshapeMapsEachGroupOfAxesWithEqualProductsOnItsOwn) {
  // [b, s, 8, 4] -> [b*s, 32] (an attention output flattened for a weight
  // gradient): row k is (k div s, k mod s), column i is (i div 4, i mod 4);
  // nothing reads (32*k + i) div (32*s).
  Apply a("Reshape", {shape({sym("b"), sym("s"), num(8), num(4)}), shape({num(2)})}, {},
          {std::nullopt, ints({-1, 32})});
  EXPECT_EQ(a.element(), "in0[i!0 // s, i!0 % s, i!1 // 4, i!1 % 4]");
  // An axis of 1 on either side is read at 0 or not read.
  Apply drop("Reshape", {shape({sym("b"), num(1), sym("s")}), shape({num(2)})}, {}, {std::nullopt, ints({0, -1})});
  EXPECT_EQ(drop.element(), "in0[i!0, 0, i!1]");
  Apply add("Reshape", {shape({sym("b"), sym("s")}), shape({num(3)})}, {}, {std::nullopt, ints({0, 1, -1})});
  EXPECT_EQ(add.element(), "in0[i!0, i!2]");
  Apply lead("Reshape", {shape({num(1), sym("b"), num(4)}), shape({num(2)})}, {}, {std::nullopt, ints({-1, 4})});
  EXPECT_EQ(lead.element(), "in0[0, i!0, i!1]");
  Apply lead1("Reshape", {shape({sym("b"), num(4)}), shape({num(3)})}, {}, {std::nullopt, ints({1, -1, 4})});
  EXPECT_EQ(lead1.element(), "in0[i!1, i!2]");
  // No common cut: [2, 3] -> [3, 2] goes through the flat index.
  Apply swap("Reshape", {shape({num(2), num(3)}), shape({num(2)})}, {}, {std::nullopt, ints({3, 2})});
  EXPECT_EQ(swap.element(), "in0[(2*i!0 + i!1) // 3, (-i!0 + i!1) % 3]");
}

TEST(IndexMap, ReshapeWithMinusOneObligesTheCountToDivide) {
  Apply a("Reshape", {shape({sym("n")}), shape({num(2)})}, {}, {std::nullopt, ints({-1, 4})});
  ASSERT_EQ(a.obligations().size(), 1u) << a.outShape();
  EXPECT_NE(a.obligations()[0].find("n"), std::string::npos);
}

TEST(IndexMap, ErfIsAnUninterpretedFunctionOfTheSameElement) {
  Apply a("Erf", {shape({sym("s"), num(8)})});
  EXPECT_EQ(a.element(), "erf(in0[i!0, i!1])");
}

// In-graph rotary tables: cos/sin of the angle element by element.
TEST(IndexMap, CosAndSinAreUninterpretedFunctionsOfTheSameElement) {
  EXPECT_EQ(Apply("Cos", {shape({sym("s"), num(8)})}).element(), "cos(in0[i!0, i!1])");
  EXPECT_EQ(Apply("Sin", {shape({sym("s"), num(8)})}).element(), "sin(in0[i!0, i!1])");
}

TEST(IndexMap, SubIsAddOfANegation) {
  Apply a("Sub", {shape({num(4)}), shape({num(4)})});
  std::string e = a.element();
  EXPECT_NE(e.find("in0[i!0]"), std::string::npos) << e;
  EXPECT_NE(e.find("-1"), std::string::npos) << e;
}

IntTensor scalar(Expr v) {
  IntTensor t;
  t.vals.push_back(v);
  return t;
}

// torch.arange(seq_len) with seq_len a value the spec binds to `n`.
TEST(IndexMap, RangeHasASymbolicLengthAndIndexValuedElements) {
  Apply a("Range", {shape({}), shape({}), shape({})}, {}, {scalar(num(0)), scalar(sym("n")), scalar(num(1))}, 1,
          DType::Int64);
  // Without knowing n >= 0 the length is clamped at 0.
  EXPECT_NE(a.outShape().find("n"), std::string::npos) << a.outShape();
  EXPECT_NE(a.outShape().find("0"), std::string::npos) << a.outShape();
  EXPECT_EQ(a.element(), "sum(k!0 in [0, i!0): 1)");
}

TEST(IndexMap, RangeWithAStepCountsItsElementsAndKnowsTheirValues) {
  Apply a("Range", {shape({}), shape({}), shape({})}, {}, {scalar(num(1)), scalar(num(7)), scalar(num(2))}, 1,
          DType::Int64);
  EXPECT_EQ(a.outShape(), "[3]");
  ASSERT_TRUE(a.result && !a.result->values.empty() && a.result->values[0]);
  ASSERT_EQ(a.result->values[0]->size(), 3u);
  EXPECT_EQ(a.result->values[0]->vals[2].asInt(), 5);
  // Positions from an offset: element i counts [0, 1 + 2i), so a range
  // starting at E and the reference's range from 0 read i and i + E alike.
  EXPECT_EQ(a.element(), "sum(k!0 in [0, 1 + 2*i!0): 1)");
}

TEST(IndexMap, RangeWithASymbolicStepIsNotGuessed) {
  Apply a("Range", {shape({}), shape({}), shape({})}, {}, {scalar(num(0)), scalar(num(8)), scalar(sym("d"))}, 1,
          DType::Int64);
  EXPECT_FALSE(a.result.has_value());
  EXPECT_NE(a.error.find("delta must be a constant"), std::string::npos) << a.error;
}

TEST(IndexMap, ClipIsMinOfMaxWithTheOptionalBounds) {
  Apply both("Clip", {shape({sym("s"), num(4)}), shape({}), shape({})});
  EXPECT_EQ(both.outShape(), "[s, 4]");
  // min and max are order-free (operands sorted), so this is min(hi, max(x, lo)).
  EXPECT_EQ(both.element(), "min(in2[], max(in0[i!0, i!1], in1[]))");
  Apply lowOnly("Clip", {shape({sym("s")}), shape({}), std::nullopt});
  EXPECT_EQ(lowOnly.element(), "max(in0[i!0], in1[])");
}

TEST(ShapeValues, ClipFoldsIntegerValues) {
  Apply a("Clip", {shape({num(2)}), shape({}), std::nullopt}, {}, {ints({-3, 5}), scalar(num(0)), std::nullopt}, 1,
          DType::Int64);
  ASSERT_TRUE(a.result.has_value()) << a.error;
  auto v = foldIntValues(a.inputs(), *a.result, 0);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->vals[0].asInt(), 0);
  EXPECT_EQ(v->vals[1].asInt(), 5);
}

TEST(IndexMap, ReduceMaxIsAMaxBinderOverTheReducedAxis) {
  Apply a("ReduceMax", {shape({sym("s"), sym("v")})}, {{"axes", intsAttr({1})}, {"keepdims", intAttr(0)}});
  EXPECT_EQ(a.outShape(), "[s]");
  EXPECT_EQ(a.element(), "max(k!0 in [0, v): in0[i!0, k!0])");
  Apply m("ReduceMin", {shape({num(4), num(3)})}, {{"axes", intsAttr({0})}});
  EXPECT_EQ(m.outShape(), "[1, 3]");
  EXPECT_EQ(m.element(), "min(k!0 in [0, 4): in0[k!0, i!1])");
}

TEST(IndexMap, LogSoftmaxSubtractsTheRowMaxAsOnnxDefinesIt) {
  Apply a("LogSoftmax", {shape({sym("s"), num(4)})}, {{"axis", intAttr(-1)}});
  std::string e = a.element();
  EXPECT_NE(e.find("max(k!0 in [0, 4): in0[i!0, k!0])"), std::string::npos) << e;
  EXPECT_NE(e.find("log(sum(k!0 in [0, 4): exp("), std::string::npos) << e;
  EXPECT_NE(e.find("max(k!1 in [0, 4): in0[i!0, k!1])"), std::string::npos) << "the max inside the exp-sum: " << e;
}

TEST(Terms, MaxIsFlatOrderFreeAndIdempotent) {
  Term a = mkRead(0, {num(0)}), b = mkRead(1, {num(0)}), c = mkRead(2, {num(0)});
  Term left = mkApply(Fn::Max2, {mkApply(Fn::Max2, {a, b}), c});
  Term right = mkApply(Fn::Max2, {c, mkApply(Fn::Max2, {b, a})});
  EXPECT_TRUE(sameTerm(left, right));
  EXPECT_TRUE(sameTerm(mkApply(Fn::Max2, {a, a}), a));
  EXPECT_TRUE(sameTerm(mkApply(Fn::Max2, {a, mkConst(-INFINITY)}), a)) << "-inf is max's identity";
  EXPECT_FALSE(sameTerm(mkApply(Fn::Max2, {a, b}), mkApply(Fn::Min2, {a, b})));
}

TEST(Terms, AnEmptyMaxIsMinusInfinityNotZero) {
  Term body = mkRead(0, {boundVar(0)});
  EXPECT_EQ(mkReduce(Fn::Max2, 0, num(3), num(3), body)->value, -INFINITY);
  EXPECT_EQ(mkReduce(Fn::Add, 0, num(3), num(3), body)->value, 0);
  // A max and a sum over the same range are different terms.
  EXPECT_FALSE(sameTerm(mkReduce(Fn::Max2, 0, num(0), sym("n"), body), mkSum(0, num(0), sym("n"), body)));
}

TEST(Terms, NegatedDifferenceDistributesToTheSwappedDifference) {
  Term x = mkRead(0, {num(0)}), y = mkRead(1, {num(0)});
  EXPECT_TRUE(sameTerm(distributeConstants(mkNeg(mkSub(x, y))), mkSub(y, x)));
}

TEST(OpTable, UnknownOpsAreNotGuessed) {
  EXPECT_EQ(lookupOp("", "Mystery"), nullptr);
  EXPECT_EQ(lookupOp("shardproof", "Mystery"), nullptr);
  EXPECT_NE(lookupOp("ai.onnx", "MatMul"), nullptr);
  EXPECT_NE(lookupOp("com.microsoft", "AllReduce"), nullptr);
  EXPECT_EQ(lookupOp("com.microsoft", "MatMul"), nullptr) << "domains are not interchangeable";
}

// Integer Div is ONNX's truncating division, a named function of its operands
// (IndexValue.cpp follows it on data); float Div stays real division.
TEST(IndexMap, IntegerDivIsTruncatingDivisionAndFloatDivIsReal) {
  Apply i("Div", {shape({num(4)}), shape({})}, {}, {}, 1, DType::Int64);
  EXPECT_EQ(i.element(), "Div(in0[i!0], in1[])");
  Apply f("Div", {shape({num(4)}), shape({})});
  EXPECT_EQ(f.element(), "(in0[i!0] * recip(in1[]))");
}

TEST(IndexMap, ModIsPythonsModOrWithFmodCsFmod) {
  Apply py("Mod", {shape({num(4)}), shape({})}, {}, {}, 1, DType::Int64);
  EXPECT_EQ(py.element(), "Mod(in0[i!0], in1[])");
  Apply c("Mod", {shape({num(4)}), shape({})}, {{"fmod", intAttr(1)}}, {}, 1, DType::Int64);
  EXPECT_EQ(c.element(), "FMod(in0[i!0], in1[])");
  Apply f("Mod", {shape({num(4)}), shape({})}, {{"fmod", intAttr(1)}});
  EXPECT_EQ(f.element(), "FMod(in0[i!0], in1[])"); // C fmod on floats too
}

TEST(IndexMap, ModAttributesOutsideOnnxAreErrors) {
  Apply floatPy("Mod", {shape({num(4)}), shape({})}); // fmod=0 is for integers
  EXPECT_NE(floatPy.error.find("Mod with fmod=0 is for integer tensors"), std::string::npos) << floatPy.error;
  Apply two("Mod", {shape({num(4)}), shape({})}, {{"fmod", intAttr(2)}}, {}, 1, DType::Int64);
  EXPECT_NE(two.error.find("fmod must be 0 or 1, not 2"), std::string::npos) << two.error;
}

// Shape arithmetic: -7 // 2 is -3 in ONNX (not Python's -4); -7 % 2 is 1
// (Python's sign), with fmod=1 -1; a divisor that may be 0 is an obligation.
TEST(ShapeValues, IntegerDivAndModFoldWithOnnxSigns) {
  auto fold = [](const char *op, std::map<std::string, Attribute> attrs, IntTensor a, IntTensor b) {
    Apply x(op, {shape({num(static_cast<int64_t>(a.size()))}), shape({})}, attrs, {a, b}, 1, DType::Int64);
    EXPECT_TRUE(x.result.has_value()) << x.error;
    return x.result ? foldIntValues(x.inputs(), *x.result, 0) : std::nullopt;
  };
  auto q = fold("Div", {}, ints({-7, 7}), scalar(num(2)));
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->vals[0].asInt(), -3);
  EXPECT_EQ(q->vals[1].asInt(), 3);
  auto m = fold("Mod", {}, ints({-7, 7}), scalar(num(-2)));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->vals[0].asInt(), -1);
  EXPECT_EQ(m->vals[1].asInt(), -1);
  auto f = fold("Mod", {{"fmod", intAttr(1)}}, ints({-7, 7}), scalar(num(-2)));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->vals[0].asInt(), -1);
  EXPECT_EQ(f->vals[1].asInt(), 1);
  Apply byN("Div", {shape({}), shape({})}, {}, {scalar(num(6)), scalar(sym("n"))}, 1, DType::Int64);
  EXPECT_EQ(byN.obligations(), std::vector<std::string>{"n != 0"});
}

// Packed sequences: the mask seg(q) == seg(k), seg(t) = #{c in offsets : c <= t},
// becomes nested Selects whose every condition is one comparison (what a sum
// over k splits on), and each leaf is right.
TEST(Terms, ASequenceIdMaskBecomesSelectsOnSingleComparisons) {
  Expr q = sym("q"), k = sym("k"), c1 = sym("c1"), c2 = sym("c2");
  auto seg = [&](const Expr &t) { return ite(c1 <= t, num(1), num(0)) + ite(c2 <= t, num(1), num(0)); };
  Term t = mkMaskSelect(seg(q) == seg(k), mkConst(1), mkConst(0));
  std::function<void(const Term &)> walk = [&](const Term &x) {
    if (x->kind != TermKind::Select)
      return;
    Expr cnd = x->cond.asNot() ? *x->cond.asNot() : x->cond;
    EXPECT_TRUE(cnd.asCmp().has_value()) << x->cond.str();
    walk(x->args[0]);
    walk(x->args[1]);
  };
  walk(t);
  // Evaluate the tree at a few points (offsets 2 and 5) against the definition.
  auto at = [&](int64_t qv, int64_t kv) {
    Term x = t;
    Expr::Env env = [&](const std::string &n) -> std::optional<int64_t> {
      return n == "q" ? qv : n == "k" ? kv : n == "c1" ? 2 : 5;
    };
    while (x->kind == TermKind::Select)
      x = x->cond.eval(env).value_or(0) ? x->args[0] : x->args[1];
    return x->value;
  };
  auto segOf = [](int64_t v) { return (v >= 2) + (v >= 5); };
  for (int64_t qv = 0; qv < 7; ++qv)
    for (int64_t kv = 0; kv < 7; ++kv)
      EXPECT_EQ(at(qv, kv), segOf(qv) == segOf(kv) ? 1 : 0) << qv << ", " << kv;
}

namespace {
struct PickState : OpState {
  int64_t axis = 0;
};
struct OtherState : OpState {};
} // namespace

TEST(OpState, SliceStateListsItsSymbolicStartForTheNodeMemo) {
  // x[off:] on the last axis: the start is an expression the memo must check
  // (a start read from data would name a class).
  IntTensor start;
  start.dims = {1};
  start.vals = {sym("off")};
  Apply a("Slice", {shape({sym("s"), num(16)}), shape({num(1)}), shape({num(1)}), shape({num(1)})}, {},
          {std::nullopt, start, ints({INT64_MAX}), ints({1})});
  ASSERT_TRUE(a.result && a.result->state);
  std::string walked;
  a.result->state->forEachExpr([&](const Expr &e) { walked += e.str() + ";"; });
  EXPECT_NE(walked.find("off"), std::string::npos) << walked;
}

TEST(OpState, AStateReadAsAnotherTypeIsAnInternalError) {
  OpResult r;
  r.makeState<PickState>().axis = 2;
  EXPECT_EQ(r.stateAs<PickState>().axis, 2);
  EXPECT_EQ(r.stateIf<OtherState>(), nullptr);
  EXPECT_EXIT(r.stateAs<OtherState>(), ::testing::ExitedWithCode(4), "op state of an unexpected type");
}

// A memo hit renames the stored element map's classes. The parts that read
// no renamed class (the mask's index arithmetic, another layer's class) are
// kept as they are, not rebuilt node by node; the renamed part is rebuilt
// and compares equal to the term built directly.
TEST(TermRename, PartsReadingNoRenamedClassAreKeptAsTheyAre) {
  IndexVec i = indexVars("i", 1);
  Term kept = mkApply(Fn::Exp, {mkRead(7, i)});
  Term mask = mkSelect(i[0] >= Expr::intConst(3), mkConst(-INFINITY), mkConst(0));
  Term t = mkAdd({mkMul({mkRead(1, i), kept}), mask});
  Term renamed = renameClasses(t, [](ClassId c) { return c == 1 ? ClassId(2) : c; });
  EXPECT_TRUE(sameTerm(renamed, mkAdd({mkMul({mkRead(2, i), kept}), mask})));
  bool keptShared = false, maskShared = false;
  std::function<void(const Term &)> visit = [&](const Term &x) {
    keptShared |= x == kept;
    maskShared |= x == mask;
    for (auto &a : x->args)
      visit(a);
  };
  visit(renamed);
  EXPECT_TRUE(keptShared);
  EXPECT_TRUE(maskShared);
  EXPECT_EQ(renameClasses(t, [](ClassId c) { return c; }), t); // nothing renamed: the term itself
}

// A renamed node is copied with its renamed children, not rebuilt through
// the smart constructors: it must be the very term those would build (same
// hash, so memo keys and class lookups find it), and where a renaming makes
// two classes one, the folds the constructors would apply still happen.
TEST(TermRename, ACopiedNodeIsTheTermBuiltDirectlyAndMergedBranchesStillFold) {
  IndexVec i = indexVars("i", 2);
  auto build = [&](ClassId a, ClassId b) {
    Term sum = mkSum(0, Expr::intConst(0), Expr::intVar("n"), mkApply(Fn::Exp, {mkRead(a, {i[0], boundVar(0)})}));
    Term sel = mkSelect(i[1] < Expr::intVar("h"), mkRead(a, i), mkRead(b, i));
    return mkApply(Fn::Tanh, {mkDiv(sel, sum)});
  };
  Term t = build(1, 3);
  Term renamed = renameClasses(t, [](ClassId c) { return c == 1 ? ClassId(2) : c; });
  Term direct = build(2, 3);
  EXPECT_TRUE(sameTerm(renamed, direct));
  EXPECT_EQ(renamed->hash, direct->hash);
  EXPECT_EQ(renamed->skeleton, direct->skeleton);
  // 1 and 3 both become 3: the Select's branches are one read, as mkSelect makes it.
  Term merged = renameClasses(t, [](ClassId c) { return c == 1 ? ClassId(3) : c; });
  Term mergedDirect = build(3, 3);
  EXPECT_TRUE(sameTerm(merged, mergedDirect));
  EXPECT_EQ(merged->hash, mergedDirect->hash);
}

// An Add or Mul whose renamed operands keep their order is copied; one whose
// renaming swaps two reads' order (a weight's image numbered below the
// activation's) must come out sorted as mkAdd / mkMul sort, or the copy and
// the directly built term would be two classes for one value.
TEST(TermRename, ARenamedSumOrProductIsSortedAsItsConstructorSortsIt) {
  IndexVec i = indexVars("i", 1);
  auto build = [&](ClassId a, ClassId b) {
    return mkAdd({mkMul({mkRead(a, i), mkRead(b, i), mkConst(2)}), mkRead(b, i), mkConst(1)});
  };
  Term t = build(1, 3);
  for (std::pair<ClassId, ClassId> images : {std::pair<ClassId, ClassId>{2, 4}, {5, 4}, {4, 4}}) {
    ClassId to1 = images.first, to3 = images.second; // named, not bound: clang's lambdas cannot capture a binding
    Term renamed = renameClasses(t, [&](ClassId c) { return c == 1 ? to1 : c == 3 ? to3 : c; });
    Term direct = build(to1, to3);
    EXPECT_TRUE(sameTerm(renamed, direct)) << to1 << " " << to3;
    EXPECT_EQ(renamed->hash, direct->hash) << to1 << " " << to3;
  }
}
