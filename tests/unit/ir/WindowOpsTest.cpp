// Conv, the pools and nearest Resize: every element of each index map,
// evaluated numerically, against the numbers torch 1.13 computes for the same
// inputs (inputs are the formula below, outputs computed once with
// F.conv1d/conv2d/avg_pool2d/max_pool2d/interpolate and pasted here), plus the
// symbolic shapes, the obligations and the attribute values that are refused.
#include "OpTestUtil.h"
#include "shardproof/ir/Ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;
using namespace shardproof::ir::testutil;

namespace {



// A dense float tensor; value(i) = (((7 i + 3 salt) mod 11) - 5) / 2 for flat
// index i, the formula the torch reference used.
struct Tensor {
  std::vector<int64_t> dims;
  std::vector<double> v;
};
Tensor val(std::vector<int64_t> dims, int salt) {
  Tensor t{dims, {}};
  int64_t n = 1;
  for (auto d : dims)
    n *= d;
  for (int64_t i = 0; i < n; ++i)
    t.v.push_back(static_cast<double>(((i * 7 + salt * 3) % 11) - 5) * 0.5);
  return t;
}

Shape shapeOf(const Tensor &t) {
  Shape s;
  for (auto d : t.dims)
    s.dims.push_back(num(d));
  return s;
}

using Attrs = std::map<std::string, Attribute>;

// One op over inputs of the given shapes; `data` gives constant inputs (Resize scales).
struct Op {
  Node node;
  std::vector<std::optional<Shape>> shapes;
  std::vector<std::optional<IntTensor>> values;
  std::vector<std::shared_ptr<const TensorData>> data;
  std::optional<OpResult> result;
  std::string error;

  Op(const std::string &op, std::vector<std::optional<Shape>> in, Attrs attrs = {}, size_t outputs = 1,
     std::vector<std::shared_ptr<const TensorData>> consts = {}, std::vector<std::optional<IntTensor>> vals = {})
      : shapes(std::move(in)), values(std::move(vals)), data(std::move(consts)) {
    node = opNode(op, std::move(attrs), outputs);
    values.resize(shapes.size());
    data.resize(shapes.size());
    TakenError e;
    result = inferOp(inputs(), e);
    error = e.text;
  }
  OpInputs inputs() const {
    OpInputs in{node, shapes, {}, values, data, 1, 17, {}, {}, {}};
    in.dtypes.assign(shapes.size(), DType::Float);
    return in;
  }
  std::string outShape() const { return result ? result->shapes[0].str() : "error: " + error; }
  Term element(const IndexVec &iv) const {
    ReadFn read = [](unsigned input, const IndexVec &idx, int) { return mkRead(input, idx); };
    return lookupOp("", node.opType)->element(inputs(), *result, 0, iv, read, 0);
  }
  std::vector<std::string> obligations() const {
    std::vector<std::string> out;
    if (result)
      for (auto &o : result->obligations)
        if (!o.cond.simplify().asBool().value_or(false))
          out.push_back(o.cond.simplify().str());
    return out;
  }
};

// Numeric value of a term: reads index the input tensors (a read outside an
// input is a failure: the padding must have been selected away), sums and
// max binders loop over their ranges, selects evaluate their index condition.
double evalTerm(const Term &t, std::map<std::string, int64_t> &env, const std::vector<Tensor> &ins) {
  Expr::Env lookup = [&](const std::string &n) -> std::optional<int64_t> {
    auto it = env.find(n);
    return it == env.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  auto intOf = [&](const Expr &e) {
    auto v = e.eval(lookup);
    EXPECT_TRUE(v.has_value()) << e.str();
    return v.value_or(0);
  };
  switch (t->kind) {
  case TermKind::Const:
    return t->value;
  case TermKind::Read: {
    const Tensor &x = ins.at(t->cls);
    int64_t flat = 0;
    for (size_t d = 0; d < x.dims.size(); ++d) {
      int64_t i = intOf(t->idx[d]);
      if (i < 0 || i >= x.dims[d]) {
        ADD_FAILURE() << "read of input " << t->cls << " out of bounds at axis " << d << ": " << i;
        return NAN;
      }
      flat = flat * x.dims[d] + i;
    }
    return x.v[flat];
  }
  case TermKind::Select:
    return evalTerm(intOf(t->cond) ? t->args[0] : t->args[1], env, ins);
  case TermKind::Sum: {
    std::string k = "k!" + std::to_string(t->level);
    double acc = reduceIdentity(t->red);
    for (int64_t i = intOf(t->lo), hi = intOf(t->hi); i < hi; ++i) {
      env[k] = i;
      double x = evalTerm(t->args[0], env, ins);
      acc = t->red == Fn::Add ? acc + x : t->red == Fn::Max2 ? std::max(acc, x) : std::min(acc, x);
    }
    env.erase(k);
    return acc;
  }
  case TermKind::Apply: {
    std::vector<double> a;
    for (auto &x : t->args)
      a.push_back(evalTerm(x, env, ins));
    switch (t->fn) {
    case Fn::Add: {
      double s = 0;
      for (double x : a)
        s += x;
      return s;
    }
    case Fn::Mul: {
      double p = 1;
      for (double x : a)
        p *= x;
      return p;
    }
    case Fn::Recip:
      return 1.0 / a[0];
    case Fn::Max2:
      return *std::max_element(a.begin(), a.end());
    default:
      ADD_FAILURE() << "unexpected function " << fnName(t->fn);
      return NAN;
    }
  }
  }
  return NAN;
}

// Every element of output 0 (a concrete shape), row-major.
std::vector<double> evaluate(const Op &op, const std::vector<Tensor> &ins) {
  std::vector<double> out;
  if (!op.result) {
    ADD_FAILURE() << op.error;
    return out;
  }
  const Shape &s = op.result->shapes[0];
  std::vector<int64_t> dims;
  for (auto &d : s.dims)
    dims.push_back(d.simplify().asInt().value_or(-1));
  IndexVec iv = indexVars("i", static_cast<unsigned>(dims.size()));
  Term t = op.element(iv);
  std::vector<int64_t> at(dims.size(), 0);
  std::function<void(size_t)> walk = [&](size_t d) {
    if (d == dims.size()) {
      std::map<std::string, int64_t> env;
      for (size_t j = 0; j < dims.size(); ++j)
        env["i!" + std::to_string(j)] = at[j];
      out.push_back(evalTerm(t, env, ins));
      return;
    }
    for (at[d] = 0; at[d] < dims[d]; ++at[d])
      walk(d + 1);
  };
  walk(0);
  return out;
}

void expectValues(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

std::vector<std::optional<Shape>> shapesOf(const std::vector<Tensor> &ts) {
  std::vector<std::optional<Shape>> out;
  for (auto &t : ts)
    out.push_back(shapeOf(t));
  return out;
}


} // namespace

// --- Conv ---------------------------------------------------------------------

// F.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2): the second
// group reads input channels 2..3, taps are two apart, and the taps in the
// padding read 0 (no read out of bounds).
TEST(WindowOps, Conv1dWithGroupsStrideDilationAndPaddingMatchesTorch) {
  std::vector<Tensor> in = {val({1, 4, 7}, 0), val({4, 2, 3}, 1), val({4}, 2)};
  Op op("Conv", shapesOf(in),
        {{"group", intAttr(2)}, {"strides", intsAttr({2})}, {"pads", intsAttr({2, 2})},
         {"dilations", intsAttr({2})}, {"kernel_shape", intsAttr({3})}});
  EXPECT_EQ(op.outShape(), "[1, 4, 4]");
  expectValues(evaluate(op, in), {-6.25, 3.75, -3.5, 6.75, -6.25, 5.75, -5.0, 5.75, 3.5, 1.5, 1.0, 7.75, 5.5, 9.25,
                                  -11.25, 3.25});
}

// F.conv2d(x, w, padding=1): same-size output, borders read zeros.
TEST(WindowOps, Conv2dSamePaddedMatchesTorch) {
  std::vector<Tensor> in = {val({1, 2, 5, 5}, 3), val({3, 2, 3, 3}, 4)};
  Op op("Conv", shapesOf(in), {{"pads", intsAttr({1, 1, 1, 1})}});
  EXPECT_EQ(op.outShape(), "[1, 3, 5, 5]");
  expectValues(evaluate(op, in),
               {-1.5,  -0.25, -0.25, -0.25, 6.25,  0.0,   13.0,   -12.5, 6.0,   -12.25, -0.75, 12.0,  -8.0,
                2.25,  -2.75, -12.5, 0.0,   13.0,  -12.5, 4.0,    2.5,   -13.75, 18.25, -2.0,  1.25,  9.75,
                -12.0, 2.25,  2.75,  -9.0,  14.0,  -11.0, -2.75,  5.5,   -2.25, 10.25,  8.25,  -8.25, 5.5,
                1.5,   -4.5,  16.5,  -11.0, -2.75, 5.25,  -8.75,  15.0,  -4.75, -2.5,   2.0,   -6.5,  -1.75,
                4.75,  -16.25, 11.5, 0.5,   -7.5,  4.25,  2.25,   -0.5,  7.5,   1.75,   -11.25, 6.0,  -16.25,
                3.5,   0.0,   -7.5,  4.25,  1.0,   -6.25, -3.0,   8.0,   -5.75, 2.75});
}

// ONNX pads [1, 0, 0, 2]: one row on top, two columns on the right (torch:
// F.pad(x, (0, 2, 1, 0)) then an unpadded conv). Begin and end pads are
// distinct per axis.
TEST(WindowOps, Conv2dWithAsymmetricPadsMatchesTorch) {
  std::vector<Tensor> in = {val({1, 2, 5, 5}, 3), val({3, 2, 3, 3}, 4)};
  Op op("Conv", shapesOf(in), {{"pads", intsAttr({1, 0, 0, 2})}});
  EXPECT_EQ(op.outShape(), "[1, 3, 4, 5]");
  expectValues(evaluate(op, in),
               {-0.25, -0.25, -0.25, 6.25,  1.0,   13.0,  -12.5, 6.0,  -12.25, 2.5,  12.0,  -8.0,  2.25,   -2.75, 5.0,
                0.0,   13.0,  -12.5, 4.0,   -11.75, -12.0, 2.25, 2.75, -9.0,   1.25, -11.0, -2.75, 5.5,    -2.25, -2.0,
                8.25,  -8.25, 5.5,   1.5,   -6.5,  16.5,  -11.0, -2.75, 5.25,  2.75, -1.75, 4.75,  -16.25, 11.5,  -1.25,
                -7.5,  4.25,  2.25,  -0.5,  4.5,   1.75,  -11.25, 6.0, -16.25, 9.5,  0.0,   -7.5,  4.25,   1.0,   0.75});
}

// Over a symbolic sequence the output length is the floor formula, and a
// window that does not fit is an obligation, not an assumption.
TEST(WindowOps, ConvOverASymbolicSequenceHasTheFloorLengthAndAnObligation) {
  Shape x, w;
  x.dims = {sym("b"), num(8), sym("seq")};
  w.dims = {num(8), num(8), num(3)};
  Op same("Conv", {x, w}, {{"pads", intsAttr({1, 1})}});
  EXPECT_EQ(same.outShape(), "[b, 8, seq]");
  Op strided("Conv", {x, w}, {{"strides", intsAttr({2})}});
  EXPECT_NE(strided.outShape().find("seq"), std::string::npos) << strided.outShape();
  ASSERT_EQ(strided.obligations().size(), 1u);
  EXPECT_NE(strided.obligations()[0].find("seq"), std::string::npos) << strided.obligations()[0];
  // Unpadded taps need no select: the term is a plain sum of products.
  Term t = strided.element(indexVars("i", 3));
  EXPECT_EQ(t->kind, TermKind::Sum);
}

TEST(WindowOps, ConvChannelsMustBeGroupTimesTheKernelsInputs) {
  Shape x, w;
  x.dims = {num(1), sym("c"), num(9)};
  w.dims = {num(6), num(2), num(3)};
  Op op("Conv", {x, w}, {{"group", intAttr(3)}});
  ASSERT_TRUE(op.result.has_value()) << op.error;
  ASSERT_EQ(op.obligations().size(), 1u);
  EXPECT_NE(op.obligations()[0].find("c"), std::string::npos) << op.obligations()[0];
  Shape w5;
  w5.dims = {num(5), num(2), num(3)};
  Op odd("Conv", {x, w5}, {{"group", intAttr(3)}});
  // 5 output channels in 3 groups: an obligation that fails at every size.
  ASSERT_TRUE(odd.result.has_value()) << odd.error;
  std::vector<std::string> obl = odd.obligations();
  EXPECT_NE(std::find(obl.begin(), obl.end(), "false"), obl.end());
}

TEST(WindowOps, ConvRefusesAutoPadAndAKernelShapeThatDisagreesWithW) {
  std::vector<Tensor> in = {val({1, 2, 5, 5}, 3), val({3, 2, 3, 3}, 4)};
  Op autoPad("Conv", shapesOf(in), {{"auto_pad", strAttr("SAME_UPPER")}});
  EXPECT_FALSE(autoPad.result.has_value());
  EXPECT_NE(autoPad.error.find("/m/Conv"), std::string::npos) << autoPad.error;
  EXPECT_NE(autoPad.error.find("auto_pad"), std::string::npos) << autoPad.error;
  Op notset("Conv", shapesOf(in), {{"auto_pad", strAttr("NOTSET")}});
  EXPECT_TRUE(notset.result.has_value()) << notset.error;
  Op kernel("Conv", shapesOf(in), {{"kernel_shape", intsAttr({2, 2})}});
  EXPECT_FALSE(kernel.result.has_value());
  EXPECT_NE(kernel.error.find("kernel_shape"), std::string::npos) << kernel.error;
  Op pads("Conv", shapesOf(in), {{"pads", intsAttr({1, 1})}});
  EXPECT_FALSE(pads.result.has_value()) << "two pads for two spatial axes";
  Shape symK;
  symK.dims = {num(3), num(2), sym("k"), num(3)};
  Op symbolicKernel("Conv", {shapeOf(in[0]), symK});
  EXPECT_FALSE(symbolicKernel.result.has_value());
}

// --- AveragePool / MaxPool ------------------------------------------------------

// F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False): corner
// windows hold 4 real taps and divide by 4, not 9.
TEST(WindowOps, AveragePoolWithoutPadCountDividesByTheTapsInside) {
  std::vector<Tensor> in = {val({1, 1, 5, 5}, 5)};
  Op op("AveragePool", shapesOf(in),
        {{"kernel_shape", intsAttr({3, 3})}, {"strides", intsAttr({2, 2})}, {"pads", intsAttr({1, 1, 1, 1})}});
  EXPECT_EQ(op.outShape(), "[1, 1, 3, 3]");
  expectValues(evaluate(op, in), {-1.0, -0.333333, -0.125, 0.5, -0.055556, 0.0, 0.625, -0.083333, 0.125});
}

TEST(WindowOps, AveragePoolWithPadCountDividesByTheKernel) {
  std::vector<Tensor> in = {val({1, 1, 5, 5}, 5)};
  Op op("AveragePool", shapesOf(in),
        {{"kernel_shape", intsAttr({3, 3})},
         {"strides", intsAttr({2, 2})},
         {"pads", intsAttr({1, 1, 1, 1})},
         {"count_include_pad", intAttr(1)}});
  expectValues(evaluate(op, in),
               {-0.444444, -0.222222, -0.055556, 0.333333, -0.055556, 0.0, 0.277778, -0.055556, 0.055556});
}

// ceil_mode: 5 rows in windows of 2 make 3 outputs; the last window holds one row.
TEST(WindowOps, AveragePoolCeilModeAveragesTheOverhangingWindowOverItsTaps) {
  std::vector<Tensor> in = {val({1, 1, 5, 5}, 5)};
  Op op("AveragePool", shapesOf(in),
        {{"kernel_shape", intsAttr({2, 2})}, {"strides", intsAttr({2, 2})}, {"ceil_mode", intAttr(1)}});
  EXPECT_EQ(op.outShape(), "[1, 1, 3, 3]");
  expectValues(evaluate(op, in), {-1.0, 0.5, 0.25, 1.0, -0.25, -0.5, -0.25, -1.5, 1.0});
}

TEST(WindowOps, MaxPoolPaddedCeilModeMatchesTorch) {
  std::vector<Tensor> in = {val({1, 1, 5, 5}, 5)};
  Op op("MaxPool", shapesOf(in),
        {{"kernel_shape", intsAttr({3, 3})},
         {"strides", intsAttr({2, 2})},
         {"pads", intsAttr({1, 1, 1, 1})},
         {"ceil_mode", intAttr(1)}});
  EXPECT_EQ(op.outShape(), "[1, 1, 3, 3]");
  expectValues(evaluate(op, in), {0.5, 2.0, 2.5, 2.5, 2.0, 2.0, 2.5, 2.0, 2.0});
}

TEST(WindowOps, MaxPoolDilatedAndCeilModeMatchTorch) {
  std::vector<Tensor> in = {val({1, 1, 5, 5}, 5)};
  Op dilated("MaxPool", shapesOf(in), {{"kernel_shape", intsAttr({2, 2})}, {"dilations", intsAttr({2, 2})}});
  EXPECT_EQ(dilated.outShape(), "[1, 1, 3, 3]");
  expectValues(evaluate(dilated, in), {1.5, 1.0, 2.5, 2.5, 2.0, 2.0, 1.5, 1.5, 1.0});
  Op ceil("MaxPool", shapesOf(in),
          {{"kernel_shape", intsAttr({2, 2})}, {"strides", intsAttr({2, 2})}, {"ceil_mode", intAttr(1)}});
  expectValues(evaluate(ceil, in), {0.5, 2.0, 2.5, 2.5, 2.0, 0.0, 1.5, -0.5, 1.0});
}

TEST(WindowOps, PoolsRefuseWhatTheyDoNotModel) {
  Shape x;
  x.dims = {num(1), num(1), num(8), num(8)};
  Attrs k2 = {{"kernel_shape", intsAttr({2, 2})}};
  Op indices("MaxPool", {x}, k2, 2);
  EXPECT_FALSE(indices.result.has_value());
  EXPECT_NE(indices.error.find("Indices"), std::string::npos) << indices.error;
  Attrs same = k2;
  same["auto_pad"] = strAttr("SAME_LOWER");
  Op autoPad("AveragePool", {x}, same);
  EXPECT_NE(autoPad.error.find("auto_pad"), std::string::npos) << autoPad.error;
  // torch and onnxruntime disagree on the divisor of an overhanging window.
  Attrs both = k2;
  both["ceil_mode"] = intAttr(1);
  both["count_include_pad"] = intAttr(1);
  Op cip("AveragePool", {x}, both);
  EXPECT_FALSE(cip.result.has_value());
  // ... and on whether a last window starting in the trailing pad exists.
  Attrs wide = {{"kernel_shape", intsAttr({2, 2})}, {"strides", intsAttr({3, 3})}, {"ceil_mode", intAttr(1)}};
  Op stride("MaxPool", {x}, wide);
  EXPECT_FALSE(stride.result.has_value());
  // Kernel 2, dilation 3 and pads (1, 2) over one element: the only window's
  // taps at -1 and 2 both fall in the padding.
  Shape one;
  one.dims = {num(1), num(1), num(1)};
  Op allPadding("MaxPool", {one},
                {{"kernel_shape", intsAttr({2})}, {"dilations", intsAttr({3})}, {"pads", intsAttr({1, 2})}});
  EXPECT_FALSE(allPadding.result.has_value());
  EXPECT_NE(allPadding.error.find("dilations"), std::string::npos) << allPadding.error;
  Op noKernel("MaxPool", {x});
  EXPECT_FALSE(noKernel.result.has_value());
  Attrs dil = k2;
  dil["dilations"] = intsAttr({2, 2});
  Op avgDilated("AveragePool", {x}, dil);
  EXPECT_FALSE(avgDilated.result.has_value());
}

// --- Global pools ----------------------------------------------------------------

TEST(WindowOps, GlobalPoolsReduceEverySpatialPosition) {
  std::vector<Tensor> in = {val({1, 2, 3, 3}, 6)};
  Op avg("GlobalAveragePool", shapesOf(in));
  EXPECT_EQ(avg.outShape(), "[1, 2, 1, 1]");
  expectValues(evaluate(avg, in), {0.333333, 0.055556});
  Op mx("GlobalMaxPool", shapesOf(in));
  expectValues(evaluate(mx, in), {2.5, 2.5});
  Shape x;
  x.dims = {sym("b"), num(4), sym("h"), sym("w")};
  Op symbolic("GlobalAveragePool", {x});
  EXPECT_EQ(symbolic.outShape(), "[b, 4, 1, 1]");
}

// --- Resize ------------------------------------------------------------------------

Attrs torchNearest() {
  return {{"mode", strAttr("nearest")},
          {"coordinate_transformation_mode", strAttr("asymmetric")},
          {"nearest_mode", strAttr("floor")},
          {"cubic_coeff_a", Attribute{}}};
}

// F.interpolate(x, scale_factor=2): scales [1, 1, 2, 2] as a constant.
TEST(WindowOps, ResizeNearestRepeatsEachElementScaleTimes) {
  std::vector<Tensor> in = {val({1, 1, 2, 3}, 7)};
  Shape one;
  one.dims = {num(4)};
  Op op("Resize", {shapeOf(in[0]), std::nullopt, one}, torchNearest(), 1, {nullptr, nullptr, floats({1, 1, 2, 2})});
  EXPECT_EQ(op.outShape(), "[1, 1, 4, 6]");
  expectValues(evaluate(op, in), {2.5, 2.5, 0.5, 0.5, -1.5, -1.5, 2.5, 2.5, 0.5, 0.5, -1.5, -1.5,
                                  2.0, 2.0, 0.0, 0.0, -2.0, -2.0, 2.0, 2.0, 0.0, 0.0, -2.0, -2.0});
  Op three("Resize", {shapeOf(in[0]), std::nullopt, one}, torchNearest(), 1,
           {nullptr, nullptr, floats({1, 1, 3, 1})});
  expectValues(evaluate(three, in),
               {2.5, 0.5, -1.5, 2.5, 0.5, -1.5, 2.5, 0.5, -1.5, 2.0, 0.0, -2.0, 2.0, 0.0, -2.0, 2.0, 0.0, -2.0});
  // sizes instead of scales: an integer multiple of each axis.
  IntTensor sizes;
  sizes.dims = {4};
  sizes.vals = {num(1), num(1), num(4), num(6)};
  Op bySize("Resize", {shapeOf(in[0]), std::nullopt, std::nullopt, one}, torchNearest(), 1, {}, {{}, {}, {}, sizes});
  EXPECT_EQ(bySize.outShape(), "[1, 1, 4, 6]");
  expectValues(evaluate(bySize, in), evaluate(op, in));
}

TEST(WindowOps, ResizeOverASymbolicAxisScalesIt) {
  Shape x, one;
  x.dims = {sym("b"), num(3), sym("h"), sym("w")};
  one.dims = {num(4)};
  Op op("Resize", {x, std::nullopt, one}, torchNearest(), 1, {nullptr, nullptr, floats({1, 1, 2, 2})});
  EXPECT_EQ(op.outShape(), "[b, 3, 2*h, 2*w]");
}

TEST(WindowOps, ResizeRefusesOtherModesAndFractionalScales) {
  Shape x, one;
  x.dims = {num(1), num(1), num(4), num(4)};
  one.dims = {num(4)};
  auto run = [&](Attrs a, std::vector<double> scales) {
    Op op("Resize", {x, std::nullopt, one}, std::move(a), 1, {nullptr, nullptr, floats(std::move(scales))});
    EXPECT_FALSE(op.result.has_value());
    EXPECT_NE(op.error.find("/m/Resize"), std::string::npos) << op.error;
    return op.error;
  };
  Attrs linear = torchNearest();
  linear["mode"] = strAttr("linear");
  EXPECT_NE(run(linear, {1, 1, 2, 2}).find("linear"), std::string::npos);
  Attrs halfPixel = torchNearest();
  halfPixel.erase("coordinate_transformation_mode"); // the default is half_pixel
  EXPECT_NE(run(halfPixel, {1, 1, 2, 2}).find("half_pixel"), std::string::npos);
  Attrs rounding = torchNearest();
  rounding.erase("nearest_mode"); // the default is round_prefer_floor
  EXPECT_NE(run(rounding, {1, 1, 2, 2}).find("round_prefer_floor"), std::string::npos);
  run(torchNearest(), {1, 1, 1.5, 1.5});
  run(torchNearest(), {1, 1, 0.5, 0.5});
  // Scales that are not a constant are not a silent 1.
  Op unknown("Resize", {x, std::nullopt, one}, torchNearest());
  EXPECT_FALSE(unknown.result.has_value());
}
