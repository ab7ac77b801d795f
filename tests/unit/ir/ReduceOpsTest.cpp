// Reductions, normalizations and scans: each index map is evaluated on small
// concrete inputs and compared with the numbers torch 1.13 computes (quoted
// in the tests), ties and empty ranges included; attributes we do not model
// are rejected as unsupported, malformed ones as the user's error.
#include "OpTestUtil.h"
#include "shardproof/ir/Ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;
using namespace shardproof::ir::testutil;

namespace {


// A concrete input: its dims and row-major data.
struct Tensor {
  std::vector<int64_t> dims;
  std::vector<double> data;
  Shape shape() const {
    Shape s;
    for (auto d : dims)
      s.dims.push_back(num(d));
    return s;
  }
};


// Evaluates a term over concrete inputs: what Eval does for a replay, kept
// independent here (opaque comparisons and Where by name).
struct Evaluator {
  const std::vector<Tensor> &inputs;
  std::map<std::string, int64_t> env;

  int64_t index(const Expr &e) {
    auto v = e.eval([&](const std::string &n) -> std::optional<int64_t> {
      auto it = env.find(n);
      return it == env.end() ? std::nullopt : std::optional<int64_t>(it->second);
    });
    EXPECT_TRUE(v.has_value()) << e.str();
    return v.value_or(0);
  }
  double eval(const Term &t) {
    switch (t->kind) {
    case TermKind::Const: return t->value;
    case TermKind::Read: {
      const Tensor &x = inputs[t->cls];
      int64_t flat = 0;
      for (size_t d = 0; d < t->idx.size(); ++d) {
        int64_t i = index(t->idx[d]);
        EXPECT_TRUE(i >= 0 && i < x.dims[d]) << "read out of bounds: " << t->idx[d].str() << " = " << i;
        flat = flat * x.dims[d] + i;
      }
      return x.data.at(flat);
    }
    case TermKind::Select: return index(t->cond) ? eval(t->args[0]) : eval(t->args[1]);
    case TermKind::Sum: {
      std::string k = "k!" + std::to_string(t->level);
      double s = reduceIdentity(t->red);
      for (int64_t v = index(t->lo), hi = index(t->hi); v < hi; ++v) {
        env[k] = v;
        double x = eval(t->args[0]);
        s = t->red == Fn::Add ? s + x : t->red == Fn::Mul ? s * x : t->red == Fn::Max2 ? std::max(s, x) : std::min(s, x);
      }
      env.erase(k);
      return s;
    }
    case TermKind::Apply: break;
    }
    std::vector<double> a;
    for (auto &x : t->args)
      a.push_back(eval(x));
    switch (t->fn) {
    case Fn::Add: { double s = 0; for (double x : a) s += x; return s; }
    case Fn::Mul: { double p = 1; for (double x : a) p *= x; return p; }
    case Fn::Recip: return 1 / a[0];
    case Fn::Exp: return std::exp(a[0]);
    case Fn::Log: return std::log(a[0]);
    case Fn::Sqrt: return std::sqrt(a[0]);
    case Fn::Abs: return std::fabs(a[0]);
    case Fn::Max2: return *std::max_element(a.begin(), a.end());
    case Fn::Min2: return *std::min_element(a.begin(), a.end());
    case Fn::Opaque: {
      const std::string &n = t->name;
      if (n == "Where") return a[0] != 0 ? a[1] : a[2];
      if (n == "Equal") return a[0] == a[1];
      if (n == "Greater") return a[0] > a[1];
      if (n == "GreaterOrEqual") return a[0] >= a[1];
      if (n == "Less") return a[0] < a[1];
      if (n == "LessOrEqual") return a[0] <= a[1];
      break;
    }
    default: break;
    }
    ADD_FAILURE() << "no numeric value for " << fnName(t->fn) << " " << t->name;
    return NAN;
  }
};

// One op on concrete inputs; `values` are the known integer inputs (axis, K).
struct OpRun {
  Node node;
  std::vector<Tensor> xs;
  std::vector<std::optional<Shape>> shapes;
  std::vector<std::optional<IntTensor>> values;
  std::optional<OpResult> result;
  TakenError error;

  OpRun(const std::string &op, std::vector<Tensor> in, std::map<std::string, Attribute> attrs = {},
      std::vector<std::optional<IntTensor>> vals = {}, size_t outputs = 1)
      : xs(std::move(in)), values(std::move(vals)) {
    node = opNode(op, std::move(attrs), outputs);
    for (auto &x : xs)
      shapes.push_back(x.shape());
    values.resize(shapes.size());
    result = inferOp(inputs(), error);
  }
  OpInputs inputs() const {
    OpInputs in{node, shapes, {}, values, {}, 1};
    in.dtypes.assign(shapes.size(), DType::Float);
    in.data.assign(shapes.size(), nullptr);
    return in;
  }
  Term term(unsigned slot = 0) const {
    ReadFn read = [](unsigned input, const IndexVec &idx, int) { return mkRead(input, idx); };
    IndexVec iv = indexVars("i", static_cast<unsigned>(result->shapes[slot].rank()));
    return lookupOp("", node.opType)->element(inputs(), *result, slot, iv, read, 0);
  }
  // Every output element, row-major.
  std::vector<double> elements(unsigned slot = 0) const {
    EXPECT_TRUE(result.has_value()) << error.text;
    if (!result)
      return {};
    Term t = term(slot);
    std::vector<int64_t> dims;
    int64_t count = 1;
    for (auto &d : result->shapes[slot].dims) {
      dims.push_back(*d.asInt());
      count *= dims.back();
    }
    std::vector<double> out;
    for (int64_t f = 0; f < count; ++f) {
      Evaluator e{xs, {}};
      for (size_t d = dims.size(), rest = f; d-- > 0; rest /= dims[d])
        e.env["i!" + std::to_string(d)] = static_cast<int64_t>(rest % dims[d]);
      out.push_back(e.eval(t));
    }
    return out;
  }
};

void expectNear(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

const Tensor x23{{2, 3}, {1.5, -2.0, 0.5, 3.0, 0.25, -1.0}};
std::map<std::string, Attribute> lastAxis(int64_t keep = 0) { return {{"axes", intsAttr({-1})}, {"keepdims", intAttr(keep)}}; }

} // namespace

TEST(Reductions, ProdMultipliesTheRowAndIsNotASum) {
  OpRun r("ReduceProd", {x23}, lastAxis());
  EXPECT_EQ(str(r.term(), [](ClassId c) { return "in" + std::to_string(c); }), "prod(k!0 in [0, 3): in0[i!0, k!0])");
  expectNear(r.elements(), {-1.5, -0.75}); // torch: x.prod(1)
}

TEST(Reductions, ProdOfAnEmptyAxisIsOneAndOfAConstantIsItsPower) {
  OpRun r("ReduceProd", {Tensor{{2, 0}, {}}}, lastAxis());
  expectNear(r.elements(), {1, 1});
  EXPECT_EQ(mkReduce(Fn::Mul, 0, num(0), num(3), mkConst(2))->value, 8); // not 2, as for a max
  EXPECT_EQ(mkReduce(Fn::Max2, 0, num(0), num(3), mkConst(2))->value, 2);
}

TEST(Reductions, ProdOfShapeValuesIsTheElementCount) {
  // x.std(-1): ReduceProd(Gather(Shape(x), [-1])) is the row length, symbolic.
  Node n;
  n.name = "/ReduceProd";
  n.opType = "ReduceProd";
  n.attrs = {{"keepdims", intAttr(0)}};
  n.outputs = {0};
  IntTensor dims;
  dims.dims = {2};
  dims.vals = {num(4), Expr::intVar("seq")};
  OpInputs in{n, {Shape{{num(2)}}}, {DType::Int64}, {dims}, {nullptr}, 1};
  auto r = lookupOp("", "ReduceProd")->infer(in);
  ASSERT_TRUE(static_cast<bool>(r));
  auto v = foldIntValues(in, *r, 0);
  ASSERT_TRUE(v.has_value());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ(v->vals[0].same((num(4) * Expr::intVar("seq")).simplify()), true) << v->vals[0].str();
}

TEST(Reductions, NormsAndLogSumExpMatchTorch) {
  expectNear(OpRun("ReduceL1", {x23}, lastAxis()).elements(), {4.0, 4.25});
  expectNear(OpRun("ReduceL2", {x23}, lastAxis()).elements(), {2.5495097637176514, 3.1721444129943848});
  expectNear(OpRun("ReduceSumSquare", {x23}, lastAxis()).elements(), {6.5, 10.0625});
  expectNear(OpRun("ReduceLogSumExp", {x23}, lastAxis()).elements(), {1.8350975513458252, 3.079036235809326});
  OpRun keep("ReduceL2", {x23}, lastAxis(1));
  EXPECT_EQ(keep.result->shapes[0].str(), "[2, 1]");
}

TEST(InstanceNorm, NormalizesEachChannelOverItsSpatialAxes) {
  Tensor x{{1, 2, 4}, {1.0, 2.0, 4.0, -1.0, 0.5, 0.5, 2.0, 3.0}};
  OpRun r("InstanceNormalization", {x, Tensor{{2}, {2.0, 0.5}}, Tensor{{2}, {1.0, -1.0}}},
        {{"epsilon", [] { Attribute a; a.kind = Attribute::Kind::Float; a.f = 1e-5; return a; }()}});
  // torch: F.instance_norm(x, weight=[2, .5], bias=[1, -1], eps=1e-5)
  expectNear(r.elements(), {0.4453006386756897, 1.554699420928955, 3.7734968662261963, -1.7734968662261963,
                           -1.4714024066925049, -1.4714024066925049, -0.7642987370491028, -0.2928963005542755});
}

TEST(InstanceNorm, ARankTwoInputHasNoSpatialAxisAndIsUnsupported) {
  OpRun r("InstanceNormalization", {x23, Tensor{{3}, {1, 1, 1}}, Tensor{{3}, {0, 0, 0}}});
  EXPECT_FALSE(r.result.has_value());
  EXPECT_EQ(r.error.kind, ErrorKind::Unsupported) << r.error.text;
}

TEST(InstanceNorm, AScaleOfAnotherLengthThanTheChannelsIsAnObligation) {
  Node n;
  n.name = "/in";
  n.opType = "InstanceNormalization";
  n.outputs = {0};
  Expr c = Expr::intVar("c"), w = Expr::intVar("w");
  OpInputs in{n, {Shape{{num(1), c, num(4)}}, Shape{{w}}, Shape{{c}}}, {DType::Float, DType::Float, DType::Float},
              {std::nullopt, std::nullopt, std::nullopt}, {nullptr, nullptr, nullptr}, 1};
  auto r = lookupOp("", "InstanceNormalization")->infer(in);
  ASSERT_TRUE(static_cast<bool>(r));
  ASSERT_EQ(r->obligations.size(), 1u);
  EXPECT_NE(r->obligations[0].what.find("scale"), std::string::npos);
}

TEST(CumSum, InclusiveExclusiveAndReversedMatchTorch) {
  auto axis = [] { return std::vector<std::optional<IntTensor>>{std::nullopt, ints({1})}; };
  Tensor a{{1}, {1}};
  // torch: x.cumsum(1)
  expectNear(OpRun("CumSum", {x23, a}, {}, axis()).elements(), {1.5, -0.5, 0.0, 3.0, 3.25, 2.25});
  // exclusive: the first element sums an empty range (0)
  expectNear(OpRun("CumSum", {x23, a}, {{"exclusive", intAttr(1)}}, axis()).elements(), {0, 1.5, -0.5, 0, 3.0, 3.25});
  // torch: x.flip(1).cumsum(1).flip(1)
  expectNear(OpRun("CumSum", {x23, a}, {{"reverse", intAttr(1)}}, axis()).elements(), {0.0, -1.5, 0.5, 2.25, -0.75, -1.0});
  expectNear(OpRun("CumSum", {x23, a}, {{"reverse", intAttr(1)}, {"exclusive", intAttr(1)}}, axis()).elements(),
             {-1.5, 0.5, 0, -0.75, -1.0, 0});
  // axis -2 (the first) as a negative constant
  expectNear(OpRun("CumSum", {x23, a}, {}, {std::nullopt, ints({-2})}).elements(), {1.5, -2.0, 0.5, 4.5, -1.75, -0.5});
}

TEST(CumSum, AnAxisThatIsDataOrAModeOtherThanZeroOrOneIsUnsupported) {
  Tensor a{{1}, {1}};
  OpRun data("CumSum", {x23, a});
  EXPECT_EQ(data.error.kind, ErrorKind::Unsupported) << data.error.text;
  OpRun mode("CumSum", {x23, a}, {{"exclusive", intAttr(2)}}, {std::nullopt, ints({1})});
  EXPECT_EQ(mode.error.kind, ErrorKind::Unsupported) << mode.error.text;
  EXPECT_NE(mode.error.text.find("/m/CumSum"), std::string::npos);
}

TEST(ArgMax, TiesGoToTheFirstIndexOrWithSelectLastIndexToTheLast) {
  Tensor x{{2, 4}, {1, 3, 3, 0, 2, 0, 5, 0}};
  std::map<std::string, Attribute> last = {{"axis", intAttr(-1)}, {"keepdims", intAttr(0)}};
  expectNear(OpRun("ArgMax", {x}, last).elements(), {1, 2}); // torch: x.argmax(-1)
  expectNear(OpRun("ArgMin", {x}, last).elements(), {3, 1}); // ONNX: the first of the tied minima
  last["select_last_index"] = intAttr(1);
  expectNear(OpRun("ArgMax", {x}, last).elements(), {2, 2});
  expectNear(OpRun("ArgMin", {x}, last).elements(), {3, 3});
  OpRun keep("ArgMax", {x}, {{"axis", intAttr(0)}});
  EXPECT_EQ(keep.result->shapes[0].str(), "[1, 4]");
  EXPECT_EQ(keep.result->dtypes[0], DType::Int64);
  expectNear(keep.elements(), {1, 0, 1, 0});
}

TEST(ArgMax, AnUnmodelledKeepdimsOrSelectLastIndexIsUnsupported) {
  Tensor x{{2, 4}, {1, 3, 3, 0, 2, 0, 5, 0}};
  EXPECT_EQ(OpRun("ArgMax", {x}, {{"keepdims", intAttr(2)}}).error.kind, ErrorKind::Unsupported);
  EXPECT_EQ(OpRun("ArgMin", {x}, {{"select_last_index", intAttr(-1)}}).error.kind, ErrorKind::Unsupported);
}

TEST(TopK, LargestAndSmallestInOrderWithTiesToTheLowerIndex) {
  Tensor x{{1, 5}, {1, 3, 3, 0, 2}};
  Tensor k{{1}, {3}};
  OpRun big("TopK", {x, k}, {}, {std::nullopt, ints({3})}, 2);
  EXPECT_EQ(big.result->shapes[0].str(), "[1, 3]");
  expectNear(big.elements(0), {3, 3, 2});
  expectNear(big.elements(1), {1, 2, 4});
  OpRun small("TopK", {x, k}, {{"largest", intAttr(0)}}, {std::nullopt, ints({2})}, 2);
  expectNear(small.elements(0), {0, 1});
  expectNear(small.elements(1), {3, 0});
}

TEST(TopK, UnsortedOutputHasNoExactOrderAndIsUnsupported) {
  Tensor x{{1, 5}, {1, 3, 3, 0, 2}};
  OpRun r("TopK", {x, Tensor{{1}, {2}}}, {{"sorted", intAttr(0)}}, {std::nullopt, ints({2})}, 2);
  EXPECT_EQ(r.error.kind, ErrorKind::Unsupported) << r.error.text;
  OpRun tooMany("TopK", {x, Tensor{{1}, {2}}}, {}, {std::nullopt, ints({6})}, 2);
  ASSERT_TRUE(tooMany.result.has_value());
  ASSERT_EQ(tooMany.result->obligations.size(), 1u);
  EXPECT_EQ(tooMany.result->obligations[0].cond.simplify().asBool(), false); // K = 6 > 5
}

// A rank's offset `totals[:, :1].sum(1)` is a reduction over one element: it
// must be that element, or it is never matched with the reference's x[:, 0]
// (cumsum_sp2 was UNKNOWN). The inner binder moves up a level.
TEST(Reductions, AReductionOverOneElementIsThatElement) {
  Expr s = Expr::intVar("s"), n = Expr::intVar("n");
  for (Fn op : {Fn::Add, Fn::Mul, Fn::Max2, Fn::Min2}) {
    Term inner = mkSum(1, Expr::intConst(0), n, mkRead(0, {boundVar(0), boundVar(1)}));
    Term one = mkReduce(op, 0, s, s + Expr::intConst(1), inner);
    Term expected = mkSum(0, Expr::intConst(0), n, mkRead(0, {s, boundVar(0)}));
    EXPECT_TRUE(sameTerm(one, expected)) << str(one, [](ClassId) { return std::string("x"); });
  }
  // Two elements stay a reduction.
  Term two = mkSum(0, s, s + Expr::intConst(2), mkRead(0, {boundVar(0)}));
  EXPECT_EQ(two->kind, TermKind::Sum);
}

// Under autograd torch's matmul folds [s, b, h] into [s*b, h] rows, and the
// backward sums a bias gradient over those rows: that flat sum must be the
// sum over s and b, or it never matches a rank summing axes 0 and 1 (the
// mlp training step's grad:down.bias was UNKNOWN).
TEST(Reductions, ASumOverFlattenedRowsIsTheSumOverBothAxes) {
  Expr s = Expr::intVar("s"), b = Expr::intVar("b"), zero = Expr::intConst(0), i = indexVar("i", 0);
  for (Fn op : {Fn::Add, Fn::Max2}) {
    Term flat = mkReduce(op, 0, zero, s * b, mkRead(0, {floorDiv(boundVar(0), b), mod(boundVar(0), b), i}));
    Term nested = mkReduce(op, 0, zero, s, mkReduce(op, 1, zero, b, mkRead(0, {boundVar(0), boundVar(1), i})));
    EXPECT_TRUE(sameTerm(flat, nested)) << str(flat, [](ClassId) { return std::string("x"); });
  }
  // A body that reads the flat index itself stays one sum over s*b.
  Term plain = mkSum(0, zero, s * b, mkRead(0, {boundVar(0)}));
  ASSERT_EQ(plain->kind, TermKind::Sum);
  EXPECT_EQ(plain->args[0]->kind, TermKind::Read);
  // An inner sum keeps its own binder, one level deeper.
  Term deep = mkSum(0, zero, s * b, mkSum(1, zero, i + 1, mkRead(0, {floorDiv(boundVar(0), b), boundVar(1)})));
  Term want = mkSum(0, zero, s, mkSum(1, zero, b, mkSum(2, zero, i + 1, mkRead(0, {boundVar(0), boundVar(2)}))));
  EXPECT_TRUE(sameTerm(deep, want)) << str(deep, [](ClassId) { return std::string("x"); });
}

// Broken invariants of the term language end the run with exit 4 and the
// reason (SP_CHECK), never a term that replays garbage.
TEST(TermInvariants, AWrongOperandCountOrBinderLevelIsAnInternalError) {
  Term x = mkRead(0, {indexVar("i", 0)});
  EXPECT_EXIT(mkApply(Fn::Exp, {x, x}), ::testing::ExitedWithCode(4), "function exp applied to 2 operands");
  EXPECT_EXIT(mkApply(Fn::Pow, {x}), ::testing::ExitedWithCode(4), "applied to 1 operands");
  EXPECT_EXIT(mkReduce(Fn::Add, -1, Expr::intConst(0), Expr::intVar("n"), x), ::testing::ExitedWithCode(4),
              "a reduction bound at level -1");
  EXPECT_EXIT(mkReduce(Fn::Exp, 0, Expr::intConst(0), Expr::intVar("n"), x), ::testing::ExitedWithCode(4),
              "a reduction by exp");
}
