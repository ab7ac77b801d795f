// Activations, PRelu, rounding and inference BatchNormalization: each index
// map is evaluated on numbers and compared with torch (float64) and with the
// ONNX operator definition, including negatives, 0 and large inputs;
// attributes we do not model are UNKNOWN, malformed ones input errors.
#include "shardproof/ir/OpaqueFns.h"
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


// Inputs: for each input, its elements in row-major order (shape given separately).
struct Data {
  std::vector<Shape> shapes;
  std::vector<std::vector<double>> values;
};

// A term over reads of inputs at constant indices, evaluated as the graph would.
double evalTerm(const Term &t, const Data &d) {
  switch (t->kind) {
  case TermKind::Const: return t->value;
  case TermKind::Read: {
    const Shape &s = d.shapes[t->cls];
    int64_t flat = 0;
    for (size_t k = 0; k < t->idx.size(); ++k)
      flat = flat * *s.dims[k].asInt() + *t->idx[k].simplify().asInt();
    return d.values[t->cls][flat];
  }
  case TermKind::Apply: break;
  default: ADD_FAILURE() << "unexpected term kind"; return NAN;
  }
  std::vector<double> a;
  for (auto &x : t->args)
    a.push_back(evalTerm(x, d));
  switch (t->fn) {
  case Fn::Add: { double s = 0; for (double x : a) s += x; return s; }
  case Fn::Mul: { double p = 1; for (double x : a) p *= x; return p; }
  case Fn::Recip: return 1 / a[0];
  case Fn::Exp: return std::exp(a[0]);
  case Fn::Log: return std::log(a[0]);
  case Fn::Sqrt: return std::sqrt(a[0]);
  case Fn::Relu: return a[0] > 0 ? a[0] : 0;
  case Fn::Max2: return *std::max_element(a.begin(), a.end());
  case Fn::Min2: return *std::min_element(a.begin(), a.end());
  case Fn::Opaque: {
    auto v = evalOpaque(t->name, a);
    EXPECT_TRUE(v.has_value()) << t->name << " has no numeric semantics";
    return v.value_or(NAN);
  }
  default: ADD_FAILURE() << "unexpected function " << fnName(t->fn); return NAN;
  }
}

// One op node over concrete shapes.
struct Op {
  Node node;
  std::vector<std::optional<Shape>> shapes;
  std::optional<OpResult> result;
  ErrorKind errorKind = ErrorKind::Internal;
  std::string error;

  Op(const std::string &type, std::vector<std::optional<Shape>> in, std::map<std::string, Attribute> attrs = {},
     size_t outputs = 1, int64_t opset = 17)
      : shapes(std::move(in)) {
    node = opNode(type, std::move(attrs), outputs);
    TakenError e;
    result = inferOp(inputs(opset), e);
    if (!result) {
      errorKind = e.kind;
      error = e.text;
    }
  }
  OpInputs inputs(int64_t opset = 17) const {
    OpInputs in{node, shapes, {}, {}, {}, 1, 17, {}, {}, {}};
    in.dtypes.assign(shapes.size(), DType::Float);
    in.values.resize(shapes.size());
    in.data.assign(shapes.size(), nullptr);
    in.opset = opset;
    return in;
  }
  Term element(const std::vector<int64_t> &at, ReadFn read = nullptr) const {
    if (!read)
      read = [](unsigned i, const IndexVec &idx, int) { return mkRead(i, idx); };
    IndexVec iv;
    for (auto v : at)
      iv.push_back(num(v));
    return lookupOp("", node.opType)->element(inputs(), *result, 0, iv, read, 0);
  }
  // The element of a one-input elementwise op at x.
  double at(double x) const {
    Data d{{shape({num(1)})}, {{x}}};
    return evalTerm(element({0}), d);
  }
};

const std::vector<double> kTorchPoints = {-20.0, -2.5, -1.0, -0.25, 0.0, 0.25, 1.0, 2.5, 4.0, 20.0};
// Many points, including 0, tiny, negative and large magnitudes.
const std::vector<double> kPoints = {-700, -100, -30, -10, -3, -1, -0.5, -1e-3, -1e-300, 0,
                                     1e-300, 1e-3, 0.5, 1, 2.9999, 3, 3.0001, 10, 30, 100, 700};

void expectNear(double got, double want, double x, const char *what) {
  EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want))) << what << " at x = " << x;
}

} // namespace

// --- activations against torch (float64) --------------------------------------

TEST(Activation, LeakyReluMatchesTorchWithItsSlope) {
  Op op("LeakyRelu", {shape({num(4)})}, {{"alpha", floatAttr(0.2)}});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {-4.0, -0.5, -0.2, -0.05, 0.0, 0.25, 1.0, 2.5, 4.0, 20.0};
  for (size_t k = 0; k < torch.size(); ++k)
    expectNear(op.at(kTorchPoints[k]), torch[k], kTorchPoints[k], "LeakyRelu(0.2)");
}

TEST(Activation, EluMatchesTorch) {
  Op op("Elu", {shape({num(4)})}, {{"alpha", floatAttr(0.7)}});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {-0.6999999985571924, -0.6425405009632708, -0.44248439117999033, -0.15483945185001657,
                               0.0, 0.25, 1.0, 2.5, 4.0, 20.0};
  for (size_t k = 0; k < torch.size(); ++k)
    expectNear(op.at(kTorchPoints[k]), torch[k], kTorchPoints[k], "Elu(0.7)");
}

TEST(Activation, CeluMatchesTorch) {
  Op op("Celu", {shape({num(4)})}, {{"alpha", floatAttr(0.5)}});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {-0.5, -0.49663102650045726, -0.43233235838169365, -0.1967346701436833, 0.0, 0.25,
                               1.0, 2.5, 4.0, 20.0};
  for (size_t k = 0; k < torch.size(); ++k)
    expectNear(op.at(kTorchPoints[k]), torch[k], kTorchPoints[k], "Celu(0.5)");
}

TEST(Activation, SeluWithoutAttributesUsesOnnxsConstants) {
  // torch exports F.selu as a bare Selu node: ONNX's default alpha and gamma.
  Op op("Selu", {shape({num(4)})});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {-1.758099337223664, -1.6137857588732423, -1.1113307378125625, -0.388890197478119,
                               0.0, 0.2626752468388701, 1.0507009873554805, 2.626752468388701, 4.202803949421922,
                               21.014019747109607};
  // torch's constants are the float64 ones, ONNX's their float32 roundings.
  for (size_t k = 0; k < torch.size(); ++k)
    EXPECT_NEAR(op.at(kTorchPoints[k]), torch[k], 1e-7 * std::max(1.0, std::fabs(torch[k]))) << kTorchPoints[k];
}

TEST(Activation, HardSigmoidAsTorchExportsItMatchesTorch) {
  Op op("HardSigmoid", {shape({num(4)})}, {{"alpha", floatAttr(1.0 / 6)}});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {0.0, 0.08333333333333333, 0.3333333333333333, 0.4583333333333333, 0.5,
                               0.5416666666666666, 0.6666666666666666, 0.9166666666666666, 1.0, 1.0};
  for (size_t k = 0; k < torch.size(); ++k)
    expectNear(op.at(kTorchPoints[k]), torch[k], kTorchPoints[k], "HardSigmoid(1/6)");
}

TEST(Activation, HardSwishMatchesTorch) {
  Op op("HardSwish", {shape({num(4)})});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {-0.0, -0.20833333333333334, -0.3333333333333333, -0.11458333333333333, 0.0,
                               0.13541666666666666, 0.6666666666666666, 2.2916666666666665, 4.0, 20.0};
  for (size_t k = 0; k < torch.size(); ++k)
    expectNear(op.at(kTorchPoints[k]), torch[k], kTorchPoints[k], "HardSwish");
}

TEST(Activation, SoftplusMatchesTorch) {
  Op op("Softplus", {shape({num(4)})});
  ASSERT_TRUE(op.result) << op.error;
  std::vector<double> torch = {2.061153620314381e-09, 0.07888973429254963, 0.31326168751822286, 0.5759394198788436,
                               0.6931471805599453, 0.8259394198788436, 1.3132616875182228, 2.5788897342925496,
                               4.0181499279178094, 20.000000002061153};
  for (size_t k = 0; k < torch.size(); ++k)
    expectNear(op.at(kTorchPoints[k]), torch[k], kTorchPoints[k], "Softplus");
}

// --- activations against the ONNX definitions, many points --------------------

TEST(Activation, EveryIdentityIsTheOnnxDefinitionAtManyPoints) {
  struct Case {
    const char *op;
    std::map<std::string, Attribute> attrs;
    std::function<double(double)> onnx;
  };
  const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
  std::vector<Case> cases = {
      {"LeakyRelu", {}, [](double x) { return x >= 0 ? x : 0.01 * x; }},
      {"LeakyRelu", {{"alpha", floatAttr(-0.3)}}, [](double x) { return x >= 0 ? x : -0.3 * x; }},
      {"Elu", {}, [](double x) { return x >= 0 ? x : std::exp(x) - 1; }},
      {"Elu", {{"alpha", floatAttr(2.5)}}, [](double x) { return x >= 0 ? x : 2.5 * (std::exp(x) - 1); }},
      {"Celu", {}, [](double x) { return std::max(0.0, x) + std::min(0.0, std::exp(x) - 1); }},
      {"Celu", {{"alpha", floatAttr(3.0)}},
       [](double x) { return std::max(0.0, x) + std::min(0.0, 3.0 * (std::exp(x / 3.0) - 1)); }},
      {"Selu", {}, [&](double x) { return x > 0 ? sg * x : sg * (sa * std::exp(x) - sa); }},
      {"Selu", {{"alpha", floatAttr(2.0)}, {"gamma", floatAttr(0.5)}},
       [](double x) { return x > 0 ? 0.5 * x : 0.5 * (2.0 * std::exp(x) - 2.0); }},
      {"HardSigmoid", {}, [](double x) { return std::max(0.0, std::min(1.0, 0.2 * x + 0.5)); }},
      {"HardSigmoid", {{"alpha", floatAttr(0.1)}, {"beta", floatAttr(0.25)}},
       [](double x) { return std::max(0.0, std::min(1.0, 0.1 * x + 0.25)); }},
      {"HardSwish", {}, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }},
      // A stable form, so the check does not repeat the term's own formula.
      {"Softplus", {}, [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }},
  };
  for (auto &c : cases) {
    Op op(c.op, {shape({num(1)})}, c.attrs);
    ASSERT_TRUE(op.result) << c.op << ": " << op.error;
    for (double x : kPoints) {
      double got = op.at(x), want = c.onnx(x);
      // Softplus's log(exp(x) + 1) loses exp(x) below 1e-16 next to 1 (an
      // absolute error under 1e-16); everything else agrees to rounding.
      EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want))) << c.op << " at x = " << x;
    }
  }
}

TEST(Activation, SoftplusTermOverflowsOnlyPastExpsRange) {
  // Documented limit: the term is log(exp(x) + 1) evaluated in double, finite
  // up to x ~ 709 (onnxruntime's float32 kernel saturates to x long before).
  Op op("Softplus", {shape({num(1)})});
  ASSERT_TRUE(op.result);
  EXPECT_NEAR(op.at(709), 709, 1e-9);
  EXPECT_TRUE(std::isinf(op.at(710)));
  EXPECT_EQ(op.at(-800), 0.0);
}

TEST(Activation, EluOfAVeryNegativeInputIsMinusAlphaNotNan) {
  // exp only ever sees min(x, 0): no inf - inf at either end.
  Op op("Elu", {shape({num(1)})}, {{"alpha", floatAttr(0.5)}});
  ASSERT_TRUE(op.result);
  EXPECT_EQ(op.at(-1e308), -0.5);
  EXPECT_EQ(op.at(1e308), 1e308);
  Op celu("Celu", {shape({num(1)})}, {{"alpha", floatAttr(0.5)}});
  ASSERT_TRUE(celu.result);
  EXPECT_EQ(celu.at(1e308), 1e308);
}

TEST(Activation, ShapeIsTheInputsAndNoObligation) {
  Op op("HardSwish", {shape({Expr::intVar("b"), Expr::intVar("s"), num(8)})});
  ASSERT_TRUE(op.result);
  EXPECT_EQ(op.result->shapes[0].str(), "[b, s, 8]");
  EXPECT_TRUE(op.result->obligations.empty());
}

TEST(Activation, CeluWithANonPositiveAlphaIsUnknown) {
  for (double alpha : {0.0, -1.0}) {
    Op op("Celu", {shape({num(4)})}, {{"alpha", floatAttr(alpha)}});
    EXPECT_FALSE(op.result);
    EXPECT_EQ(op.errorKind, ErrorKind::Unsupported) << op.error;
    EXPECT_NE(op.error.find("/m/Celu"), std::string::npos) << op.error;
  }
}

TEST(Activation, AnIntegerAlphaIsAnInputError) {
  for (const char *type : {"LeakyRelu", "Elu", "Celu", "Selu", "HardSigmoid"}) {
    Op op(type, {shape({num(4)})}, {{"alpha", intAttr(1)}});
    EXPECT_FALSE(op.result) << type;
    EXPECT_EQ(op.errorKind, ErrorKind::User) << type << ": " << op.error;
  }
  Op op("Selu", {shape({num(4)})}, {{"gamma", intAttr(1)}});
  EXPECT_EQ(op.errorKind, ErrorKind::User) << op.error;
}

TEST(Activation, AnInfiniteAttributeIsUnknown) {
  Op op("LeakyRelu", {shape({num(4)})}, {{"alpha", floatAttr(INFINITY)}});
  EXPECT_EQ(op.errorKind, ErrorKind::Unsupported) << op.error;
}

TEST(Activation, TwoInputsAreAnInputError) {
  Op op("Softplus", {shape({num(4)}), shape({num(4)})});
  EXPECT_EQ(op.errorKind, ErrorKind::User) << op.error;
}

// --- PRelu: the slope is an input, broadcast to X one way ----------------------

namespace {
// x[2, 3, 2] at torch's points, and F.prelu(x, w) in float64 for a weight as
// nn.PReLU(3) exports it ([3, 1]: one slope per channel, dim 1) and as
// nn.PReLU(1) exports it ([1, 1]).
const std::vector<double> kPReluX = {-20.0, -2.5, -1.0, -0.25, 0.0, 0.25, 1.0, 2.5, 4.0, 20.0, -3.0, 0.5};

void expectPReluMatches(const Op &op, const Shape &slopeShape, std::vector<double> slope,
                        const std::vector<double> &torch) {
  Data d{{shape({num(2), num(3), num(2)}), slopeShape}, {kPReluX, std::move(slope)}};
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t w = 0; w < 2; ++w) {
        size_t k = (n * 3 + c) * 2 + w;
        expectNear(evalTerm(op.element({n, c, w}), d), torch[k], kPReluX[k], "PRelu");
      }
}
} // namespace

TEST(Activation, PReluPerChannelSlopeAsNnPReluExportsItMatchesTorch) {
  Shape slope = shape({num(3), num(1)});
  Op op("PRelu", {shape({num(2), num(3), num(2)}), slope});
  ASSERT_TRUE(op.result) << op.error;
  EXPECT_EQ(op.result->shapes[0].str(), "[2, 3, 2]");
  EXPECT_TRUE(op.result->obligations.empty());
  // A negative slope flips the sign, a slope of 2 doubles: channel c reads slope[c].
  expectPReluMatches(op, slope, {0.25, -0.5, 2.0},
                     {-5.0, -0.625, 0.5, 0.125, 0.0, 0.25, 1.0, 2.5, 4.0, 20.0, -6.0, 0.5});
}

TEST(Activation, PReluOneSharedSlopeMatchesTorch) {
  Shape slope = shape({num(1), num(1)});
  Op op("PRelu", {shape({num(2), num(3), num(2)}), slope});
  ASSERT_TRUE(op.result) << op.error;
  expectPReluMatches(op, slope, {0.3},
                     {-6.0, -0.75, -0.3, -0.075, 0.0, 0.25, 1.0, 2.5, 4.0, 20.0, -0.8999999999999999, 0.5});
}

TEST(Activation, PReluIsTheOnnxDefinitionAtManyPointsAndSlopes) {
  Op op("PRelu", {shape({num(1)}), shape({})});
  ASSERT_TRUE(op.result) << op.error;
  for (double slope : {0.0, 0.25, -0.3, 1.0, 7.5})
    for (double x : kPoints) {
      Data d{{shape({num(1)}), shape({})}, {{x}, {slope}}};
      double want = x >= 0 ? x : slope * x;
      expectNear(evalTerm(op.element({0}), d), want, x, "PRelu");
    }
}

TEST(Activation, PReluASymbolicChannelCountObligesTheSlopeToMatchIt) {
  Expr b = Expr::intVar("b"), c = Expr::intVar("c"), k = Expr::intVar("k");
  Op op("PRelu", {shape({b, c, num(4)}), shape({k, num(1)})});
  ASSERT_TRUE(op.result) << op.error;
  EXPECT_EQ(op.result->shapes[0].str(), "[b, c, 4]");
  ASSERT_EQ(op.result->obligations.size(), 1u);
  EXPECT_NE(op.result->obligations[0].what.find("slope"), std::string::npos);
  EXPECT_EQ(op.result->obligations[0].cond.simplify().str(), (k == c).simplify().str());
  // The same symbol on both sides needs nothing.
  Op same("PRelu", {shape({b, c, num(4)}), shape({c, num(1)})});
  ASSERT_TRUE(same.result) << same.error;
  EXPECT_TRUE(same.result->obligations.empty());
}

TEST(Activation, PReluASlopeThatDoesNotBroadcastToXIsAnInputError) {
  // Four slopes for three channels; a slope wider than X's unit dim (ONNX's
  // broadcast here is one way: X is never expanded); more dims than X.
  Op wrong("PRelu", {shape({num(2), num(3), num(2)}), shape({num(4), num(1)})});
  EXPECT_EQ(wrong.errorKind, ErrorKind::User) << wrong.error;
  EXPECT_NE(wrong.error.find("/m/PRelu"), std::string::npos) << wrong.error;
  Op wider("PRelu", {shape({num(2), num(1)}), shape({num(3)})});
  EXPECT_EQ(wider.errorKind, ErrorKind::User) << wider.error;
  Op deeper("PRelu", {shape({num(3)}), shape({num(1), num(3)})});
  EXPECT_EQ(deeper.errorKind, ErrorKind::User) << deeper.error;
  Op oneInput("PRelu", {shape({num(3)})});
  EXPECT_EQ(oneInput.errorKind, ErrorKind::User) << oneInput.error;
}

TEST(Activation, PReluBeforeOpset7IsUnknown) {
  Op op("PRelu", {shape({num(2), num(3)}), shape({num(3)})}, {}, 1, 6);
  EXPECT_EQ(op.errorKind, ErrorKind::Unsupported) << op.error;
}

// --- rounding -----------------------------------------------------------------

TEST(Rounding, RoundIsHalfToEvenAsOnnxNotHalfAwayFromZero) {
  Op op("Round", {shape({num(1)})});
  ASSERT_TRUE(op.result);
  // torch.round (float64): [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4999, -2.6]
  std::vector<std::pair<double, double>> cases = {{-2.5, -2}, {-1.5, -2}, {-0.5, -0.0}, {0.5, 0},  {1.5, 2},
                                                  {2.5, 2},   {3.5, 4},   {2.4999, 2},  {-2.6, -3}, {0, 0},
                                                  {1e300, 1e300}, {4503599627370497.0, 4503599627370497.0}};
  for (auto [x, want] : cases)
    EXPECT_EQ(op.at(x), want) << "Round(" << x << ")";
  EXPECT_TRUE(std::isnan(op.at(NAN)));
  EXPECT_EQ(op.at(INFINITY), INFINITY);
}

TEST(Rounding, FloorCeilAndSignOfNegativesZeroAndPositives) {
  Op floor("Floor", {shape({num(1)})}), ceil("Ceil", {shape({num(1)})}), sign("Sign", {shape({num(1)})});
  ASSERT_TRUE(floor.result && ceil.result && sign.result);
  EXPECT_EQ(floor.at(-2.5), -3);
  EXPECT_EQ(floor.at(2.5), 2);
  EXPECT_EQ(floor.at(-0.0), 0);
  EXPECT_EQ(ceil.at(-2.5), -2);
  EXPECT_EQ(ceil.at(2.1), 3);
  EXPECT_EQ(ceil.at(7), 7);
  EXPECT_EQ(sign.at(-3), -1);
  EXPECT_EQ(sign.at(0), 0);
  EXPECT_EQ(sign.at(2.5), 1);
  EXPECT_EQ(sign.at(-1e-300), -1);
}

TEST(Rounding, TheElementIsTheNamedFunctionAndFoldsOnNumbers) {
  Op op("Round", {shape({Expr::intVar("s")})});
  ASSERT_TRUE(op.result);
  Term t = op.element({0});
  ASSERT_EQ(t->kind, TermKind::Apply);
  EXPECT_EQ(t->fn, Fn::Opaque);
  EXPECT_EQ(t->name, "Round");
  Term folded = op.element({0}, [](unsigned, const IndexVec &, int) { return mkConst(2.5); });
  ASSERT_EQ(folded->kind, TermKind::Const);
  EXPECT_EQ(folded->value, 2.0);
}

TEST(OpaqueFns, ExistingNamesKeepTheirNumbers) {
  auto ev = [](const char *name, std::vector<double> a) { return evalOpaque(name, a).value_or(-12345.0); };
  EXPECT_EQ(ev("Div", {-7, 2}), -3.0);
  EXPECT_EQ(ev("Mod", {-7, 2}), 1.0);
  EXPECT_EQ(ev("Mod", {7, -2}), -1.0);
  EXPECT_EQ(ev("FMod", {-7, 2}), -1.0);
  EXPECT_EQ(ev("FMod", {-7.5, 2}), -1.5);
  EXPECT_TRUE(std::isnan(ev("Div", {1, 0})));
  EXPECT_EQ(ev("Where", {0, 3, 4}), 4.0);
  EXPECT_EQ(ev("Less", {1, 2}), 1.0);
  EXPECT_EQ(ev("Cast:bool", {-0.5}), 1.0);
  EXPECT_EQ(ev("Not", {0}), 1.0);
  EXPECT_FALSE(evalOpaque("Gelu", {1.0}).has_value());
  EXPECT_FALSE(evalOpaque("Floor", {1.0, 2.0}).has_value()); // wrong arity
}

// --- BatchNormalization --------------------------------------------------------

TEST(BatchNorm, InferenceMatchesTorchPerChannel) {
  // x[2, 3, 2]; mean, var, weight, bias as F.batch_norm(x, mean, var, w, b, eps=1e-3).
  Op op("BatchNormalization",
        {shape({num(2), num(3), num(2)}), shape({num(3)}), shape({num(3)}), shape({num(3)}), shape({num(3)})},
        {{"epsilon", floatAttr(1e-3)}, {"momentum", floatAttr(0.9)}, {"training_mode", intAttr(0)}});
  ASSERT_TRUE(op.result) << op.error;
  EXPECT_EQ(op.result->shapes[0].str(), "[2, 3, 2]");
  EXPECT_TRUE(op.result->obligations.empty());
  Data d;
  d.shapes = {shape({num(2), num(3), num(2)}), shape({num(3)}), shape({num(3)}), shape({num(3)}), shape({num(3)})};
  d.values = {{-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75},
              {2.0, -1.0, 0.5},   // scale
              {0.1, 0.2, -0.3},   // B
              {0.5, -1.0, 2.0},   // input_mean
              {1.0, 4.0, 0.25}};  // input_var
  std::vector<double> torch = {-2.8985011240633196, -2.398750936719433, -0.04996875585815452, -0.1749531337872318,
                               -2.296011960139498,  -2.046510465122061, 0.09999999999999998,  0.5997501873438866,
                               -0.7998750234326182, -0.9248594013616954, -0.7990029900348745, -0.5495014950174373};
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t w = 0; w < 2; ++w) {
        double want = torch[(n * 3 + c) * 2 + w];
        EXPECT_NEAR(evalTerm(op.element({n, c, w}), d), want, 1e-12) << n << "," << c << "," << w;
      }
}

TEST(BatchNorm, ASymbolicChannelCountObligesThePerChannelInputsToMatch) {
  Expr c = Expr::intVar("c"), k = Expr::intVar("k");
  Op op("BatchNormalization",
        {shape({Expr::intVar("b"), c, num(8)}), shape({k}), shape({c}), shape({c}), shape({c})});
  ASSERT_TRUE(op.result) << op.error;
  ASSERT_EQ(op.result->obligations.size(), 1u);
  EXPECT_NE(op.result->obligations[0].what.find("scale"), std::string::npos);
  EXPECT_EQ(op.result->obligations[0].cond.simplify().str(), (k == c).simplify().str());
}

TEST(BatchNorm, PerChannelLengthDifferentFromTheChannelsIsAnInputError) {
  Op op("BatchNormalization",
        {shape({num(2), num(3), num(8)}), shape({num(3)}), shape({num(3)}), shape({num(4)}), shape({num(3)})});
  EXPECT_EQ(op.errorKind, ErrorKind::User) << op.error;
  EXPECT_NE(op.error.find("input_mean"), std::string::npos) << op.error;
}

TEST(BatchNorm, TrainingModeAndRunningStatOutputsAreUnknown) {
  auto shapes = [] {
    return std::vector<std::optional<Shape>>{shape({num(2), num(3)}), shape({num(3)}), shape({num(3)}),
                                             shape({num(3)}), shape({num(3)})};
  };
  Op training("BatchNormalization", shapes(), {{"training_mode", intAttr(1)}});
  EXPECT_EQ(training.errorKind, ErrorKind::Unsupported) << training.error;
  EXPECT_NE(training.error.find("/m/BatchNormalization"), std::string::npos);
  Op stats("BatchNormalization", shapes(), {}, 3);
  EXPECT_EQ(stats.errorKind, ErrorKind::Unsupported) << stats.error;
  Op old("BatchNormalization", shapes(), {}, 1, 7);
  EXPECT_EQ(old.errorKind, ErrorKind::Unsupported) << old.error;
  Op bad("BatchNormalization", shapes(), {{"training_mode", intAttr(2)}});
  EXPECT_EQ(bad.errorKind, ErrorKind::User) << bad.error;
  Op eps("BatchNormalization", shapes(), {{"epsilon", intAttr(0)}});
  EXPECT_EQ(eps.errorKind, ErrorKind::User) << eps.error;
}

TEST(BatchNorm, MalformedInputsAreInputErrors) {
  Op rank1("BatchNormalization", {shape({num(3)}), shape({num(3)}), shape({num(3)}), shape({num(3)}), shape({num(3)})});
  EXPECT_EQ(rank1.errorKind, ErrorKind::User) << rank1.error;
  Op four("BatchNormalization", {shape({num(2), num(3)}), shape({num(3)}), shape({num(3)}), shape({num(3)})});
  EXPECT_EQ(four.errorKind, ErrorKind::User) << four.error;
  Op missing("BatchNormalization",
             {shape({num(2), num(3)}), shape({num(3)}), std::nullopt, shape({num(3)}), shape({num(3)})});
  EXPECT_EQ(missing.errorKind, ErrorKind::User) << missing.error;
  Op twoD("BatchNormalization",
          {shape({num(2), num(3)}), shape({num(3), num(1)}), shape({num(3)}), shape({num(3)}), shape({num(3)})});
  EXPECT_EQ(twoD.errorKind, ErrorKind::User) << twoD.error;
}
