// Flatten, Tile, OneHot and Einsum: output shapes over symbolic dims, the
// obligations they put on sizes, the errors for what they do not model, and the
// numbers their index maps compute, evaluated element by element against
// hand-computed (numpy/torch) results at concrete sizes.
#include "OpTestUtil.h"
#include "shardproof/ir/Ops.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

using namespace shardproof;
using namespace shardproof::ir;
using smt::Expr;
using namespace shardproof::ir::testutil;

namespace {

Shape concrete(std::vector<int64_t> dims) {
  Shape s;
  for (auto d : dims)
    s.dims.push_back(num(d));
  return s;
}

// A dense row-major tensor of numbers (an operand or an expected result).
struct Dense {
  std::vector<int64_t> dims;
  std::vector<double> v;
  double at(const std::vector<int64_t> &i) const {
    int64_t flat = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      EXPECT_TRUE(i[d] >= 0 && i[d] < dims[d]) << "read outside the input at dim " << d << ": " << i[d];
      if (i[d] < 0 || i[d] >= dims[d])
        return NAN;
      flat = flat * dims[d] + i[d];
    }
    return v[flat];
  }
};

// Numeric value of an element term: reads of input c come from `ins[c]`,
// sums run over their bound variable, selects take the branch their condition
// picks; `apps` gives uninterpreted integer functions (data indices) a value.
double evalTerm(const Term &t, std::map<std::string, int64_t> &env, const std::vector<Dense> &ins,
                const Expr::AppEnv &apps) {
  Expr::Env e = [&](const std::string &n) -> std::optional<int64_t> {
    auto it = env.find(n);
    return it == env.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  auto ev = [&](const Expr &x) {
    auto v = x.eval(e, apps);
    EXPECT_TRUE(v.has_value()) << x.str();
    return v.value_or(0);
  };
  switch (t->kind) {
  case TermKind::Const:
    return t->value;
  case TermKind::Read: {
    std::vector<int64_t> i;
    for (auto &x : t->idx)
      i.push_back(ev(x));
    return ins.at(t->cls).at(i);
  }
  case TermKind::Select:
    return evalTerm(ev(t->cond) ? t->args[0] : t->args[1], env, ins, apps);
  case TermKind::Sum: {
    EXPECT_EQ(t->red, Fn::Add);
    double s = 0;
    std::string k = "k!" + std::to_string(t->level);
    for (int64_t v = ev(t->lo), hi = ev(t->hi); v < hi; ++v) {
      env[k] = v;
      s += evalTerm(t->args[0], env, ins, apps);
    }
    env.erase(k);
    return s;
  }
  case TermKind::Apply: {
    EXPECT_TRUE(t->fn == Fn::Add || t->fn == Fn::Mul) << fnName(t->fn);
    double acc = t->fn == Fn::Mul ? 1 : 0;
    for (auto &a : t->args)
      acc = t->fn == Fn::Mul ? acc * evalTerm(a, env, ins, apps) : acc + evalTerm(a, env, ins, apps);
    return acc;
  }
  }
  return NAN;
}

// One op applied to inputs of the given shapes, known integer values and constant data.
struct Apply {
  Node node;
  std::vector<std::optional<Shape>> shapes;
  std::vector<std::optional<IntTensor>> values;
  std::vector<std::shared_ptr<const TensorData>> data;
  // Input 0's elements as integers (data indices): val:in0(i...) when set.
  bool dataIndices = false;
  std::optional<OpResult> result;
  std::optional<TakenError> error;

  Apply(const std::string &op, std::vector<std::optional<Shape>> in, std::map<std::string, Attribute> attrs = {},
        std::vector<std::optional<IntTensor>> vals = {}, std::vector<std::shared_ptr<const TensorData>> consts = {},
        bool indices = false, size_t outputs = 1)
      : shapes(std::move(in)), values(std::move(vals)), data(std::move(consts)), dataIndices(indices) {
    node = opNode(op, std::move(attrs), outputs);
    values.resize(shapes.size());
    data.resize(shapes.size());
    TakenError e;
    result = inferOp(inputs(), e);
    if (!result)
      error = e;
  }
  OpInputs inputs() const {
    OpInputs in{node, shapes, {}, values, data, 1, 17, {}, {}, {}};
    in.dtypes.assign(shapes.size(), DType::Float);
    if (dataIndices) {
      in.dtypes[0] = DType::Int64;
      auto value = [](const IndexVec &idx) { return Expr::app("val:in0", {idx.begin(), idx.end()}); };
      in.inputValue = [value](unsigned i, const IndexVec &idx) -> std::optional<Expr> {
        return i == 0 ? std::optional<Expr>(value(idx)) : std::nullopt;
      };
      in.indexValue = [value](const Term &t) -> std::optional<Expr> {
        return t->kind == TermKind::Read && t->cls == 0 ? std::optional<Expr>(value(t->idx)) : std::nullopt;
      };
    }
    return in;
  }
  std::string outShape() const { return result ? result->shapes[0].str() : "error: " + error->text; }
  bool isUserError() const { return error && error->kind == ErrorKind::User; }
  bool isUnsupported() const { return error && error->kind == ErrorKind::Unsupported; }
  Term element(const IndexVec &iv) const {
    ReadFn read = [](unsigned input, const IndexVec &idx, int) { return mkRead(input, idx); };
    return lookupOp("", node.opType)->element(inputs(), *result, 0, iv, read, 0);
  }
  std::string elementStr() const {
    if (!result)
      return "error: " + error->text;
    Term t = element(indexVars("i", static_cast<unsigned>(result->shapes[0].rank())));
    t = mapExprs(t, [](const Expr &e) { return e.simplify(); });
    return str(t, [](ClassId c) { return "in" + std::to_string(c); });
  }
  std::vector<std::string> obligations() const {
    std::vector<std::string> out;
    if (result)
      for (auto &o : result->obligations)
        if (!o.cond.simplify().asBool().value_or(false))
          out.push_back(o.cond.simplify().str());
    return out;
  }
  // Every output element's number (the output shape must be concrete).
  Dense evaluate(const std::vector<Dense> &ins, const Expr::AppEnv &apps = nullptr) const {
    Dense out;
    for (auto &d : result->shapes[0].dims)
      out.dims.push_back(*d.asInt());
    int64_t count = 1;
    for (auto d : out.dims)
      count *= d;
    IndexVec iv = indexVars("i", static_cast<unsigned>(out.dims.size()));
    Term t = element(iv);
    for (int64_t k = 0; k < count; ++k) {
      std::map<std::string, int64_t> env;
      for (size_t d = out.dims.size(), rem = k; d-- > 0; rem /= out.dims[d])
        env["i!" + std::to_string(d)] = static_cast<int64_t>(rem % out.dims[d]);
      out.v.push_back(evalTerm(t, env, ins, apps));
    }
    return out;
  }
};

Dense iota(std::vector<int64_t> dims) {
  Dense x{dims, {}};
  int64_t n = 1;
  for (auto d : dims)
    n *= d;
  for (int64_t k = 0; k < n; ++k)
    x.v.push_back(static_cast<double>(k));
  return x;
}


} // namespace

// --- Flatten -------------------------------------------------------------------

TEST(Flatten, KeepsTheLeadingDimsAndMultipliesTheRest) {
  Shape x = shape({sym("b"), sym("s"), num(8)});
  EXPECT_EQ(Apply("Flatten", {x}, {{"axis", intAttr(1)}}).outShape(), "[b, 8*s]");
  EXPECT_EQ(Apply("Flatten", {x}, {{"axis", intAttr(-1)}}).outShape(), "[b*s, 8]");
  EXPECT_EQ(Apply("Flatten", {x}).outShape(), "[b, 8*s]"); // default axis 1
  EXPECT_EQ(Apply("Flatten", {x}, {{"axis", intAttr(0)}}).outShape(), "[1, 8*b*s]");
  // axis == rank is allowed (unlike most axes): [prod, 1].
  EXPECT_EQ(Apply("Flatten", {x}, {{"axis", intAttr(3)}}).outShape(), "[8*b*s, 1]");
  EXPECT_TRUE(Apply("Flatten", {x}, {{"axis", intAttr(4)}}).isUserError());
  EXPECT_TRUE(Apply("Flatten", {x}, {{"axis", intAttr(-4)}}).isUserError());
  // The leading dim is read as it is; the flattened ones by // and %.
  EXPECT_EQ(Apply("Flatten", {x}, {{"axis", intAttr(1)}}).elementStr(), "in0[i!0, i!1 // 8, i!1 % 8]");
}

TEST(Flatten, ReadsElementsInRowMajorOrder) {
  for (int64_t axis : {0, 1, 2, -2, 3}) {
    Apply a("Flatten", {concrete({2, 3, 4})}, {{"axis", intAttr(axis)}});
    ASSERT_TRUE(a.result) << a.error->text;
    Dense y = a.evaluate({iota({2, 3, 4})});
    EXPECT_EQ(y.v, iota({24}).v) << "axis " << axis; // flattening keeps the order
  }
}

// --- Tile ------------------------------------------------------------------------

TEST(Tile, RepeatsEachAxisAndReadsModuloTheInput) {
  Apply a("Tile", {shape({sym("b"), sym("s"), num(8)}), concrete({3})}, {}, {std::nullopt, ints({1, 2, 1})});
  EXPECT_EQ(a.outShape(), "[b, 2*s, 8]");
  EXPECT_EQ(a.elementStr(), "in0[i!0, i!1 % s, i!2]");
  EXPECT_TRUE(a.obligations().empty());
  // torch: torch.arange(6.).view(2, 3).repeat(2, 3)
  Apply t("Tile", {concrete({2, 3}), concrete({2})}, {}, {std::nullopt, ints({2, 3})});
  ASSERT_EQ(t.outShape(), "[4, 9]");
  Dense y = t.evaluate({iota({2, 3})});
  std::vector<double> row0 = {0, 1, 2, 0, 1, 2, 0, 1, 2}, row1 = {3, 4, 5, 3, 4, 5, 3, 4, 5};
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 9; ++j)
      EXPECT_EQ(y.v[i * 9 + j], (i % 2 ? row1 : row0)[j]) << i << ", " << j;
}

TEST(Tile, ARepeatCountOnlyKnownSymbolicallyMustNotBeNegative) {
  IntTensor reps = ints({1, 1});
  reps.vals[1] = sym("r");
  Apply a("Tile", {shape({sym("b"), num(4)}), concrete({2})}, {}, {std::nullopt, reps});
  EXPECT_EQ(a.outShape(), "[b, 4*r]");
  EXPECT_EQ(a.obligations(), std::vector<std::string>{"0 <= r"});
  EXPECT_TRUE(Apply("Tile", {concrete({2, 4}), concrete({2})}, {}, {std::nullopt, ints({1, -1})}).isUserError());
  EXPECT_TRUE(Apply("Tile", {concrete({2, 4}), concrete({3})}, {}, {std::nullopt, ints({1, 1, 2})}).isUserError());
  // Repeats that are data: the output size would be unknown.
  Apply data("Tile", {concrete({2, 4}), concrete({2})});
  EXPECT_TRUE(data.isUnsupported());
  EXPECT_NE(data.error->text.find("repeats"), std::string::npos) << data.error->text;
}

// --- OneHot ----------------------------------------------------------------------

TEST(OneHot, NegativeIndicesCountFromTheEndAndOutOfRangeOnesAreAllOff) {
  // indices [3, -1, 0, 7], depth 5, values [off, on] = [0.5, 2]:
  // onnxruntime gives rows e3, e4 (-1 + 5), e0 and all-off (7 >= depth).
  std::vector<int64_t> idx = {3, -1, 0, 7};
  Expr::AppEnv apps = [&](const std::string &f, const std::vector<int64_t> &a) -> std::optional<int64_t> {
    if (f != "val:in0" || a.size() != 1 || a[0] < 0 || a[0] >= 4)
      return std::nullopt;
    return idx[a[0]];
  };
  Apply last("OneHot", {concrete({4}), shape({}), concrete({2})}, {}, {std::nullopt, ints({5})},
             {nullptr, nullptr, floats({0.5, 2})}, true);
  ASSERT_EQ(last.outShape(), "[4, 5]");
  Dense y = last.evaluate({}, apps);
  std::vector<int64_t> hot = {3, 4, 0, -1};
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(y.v[i * 5 + j], j == hot[i] ? 2.0 : 0.5) << i << ", " << j;
  // axis 0: the new axis first, y[j, i] = y_last[i, j].
  Apply first("OneHot", {concrete({4}), shape({}), concrete({2})}, {{"axis", intAttr(0)}},
              {std::nullopt, ints({5})}, {nullptr, nullptr, floats({0.5, 2})}, true);
  ASSERT_EQ(first.outShape(), "[5, 4]");
  Dense z = first.evaluate({}, apps);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(z.v[j * 4 + i], y.v[i * 5 + j]) << i << ", " << j;
}

TEST(OneHot, PutsTheDepthAtTheAxisAndNeedsIndexValuesAndConstantOnOff) {
  std::vector<std::optional<Shape>> in = {shape({sym("b"), sym("s")}), shape({}), concrete({2})};
  std::vector<std::optional<IntTensor>> depth = {std::nullopt, ints({8})};
  std::vector<std::shared_ptr<const TensorData>> onOff = {nullptr, nullptr, floats({0, 1})};
  EXPECT_EQ(Apply("OneHot", in, {}, depth, onOff, true).outShape(), "[b, s, 8]");
  EXPECT_EQ(Apply("OneHot", in, {{"axis", intAttr(1)}}, depth, onOff, true).outShape(), "[b, 8, s]");
  EXPECT_EQ(Apply("OneHot", in, {{"axis", intAttr(-3)}}, depth, onOff, true).outShape(), "[8, b, s]");
  EXPECT_TRUE(Apply("OneHot", in, {{"axis", intAttr(3)}}, depth, onOff, true).isUserError());
  // A depth that is a size (num_experts as a symbol) must not be negative.
  IntTensor n = ints({0});
  n.vals[0] = sym("e");
  EXPECT_EQ(Apply("OneHot", in, {}, {std::nullopt, n}, onOff, true).obligations(), std::vector<std::string>{"0 <= e"});
  // Indices whose values nothing knows: unsupported, as Gather's data indices.
  Apply blind("OneHot", in, {}, depth, onOff, false);
  ASSERT_TRUE(blind.isUnsupported());
  EXPECT_NE(blind.error->text.find("the indices are data whose values are not known"), std::string::npos);
  // [off, on] that are data would be a silent guess.
  EXPECT_TRUE(Apply("OneHot", in, {}, depth, {}, true).isUnsupported());
  EXPECT_TRUE(Apply("OneHot", in, {}, {}, onOff, true).isUnsupported()); // depth unknown
  EXPECT_TRUE(Apply("OneHot", {in[0], in[1], concrete({3})}, {}, depth, onOff, true).isUserError());
}

// --- Einsum ----------------------------------------------------------------------

TEST(Einsum, ExplicitOutputsSumOverTheOtherLetters) {
  Apply proj("Einsum", {shape({sym("b"), sym("s"), num(8)}), concrete({8, 16})}, {{"equation", strAttr("bsd,de->bse")}});
  EXPECT_EQ(proj.outShape(), "[b, s, 16]");
  EXPECT_EQ(proj.elementStr(), "sum(k!0 in [0, 8): (in0[i!0, i!1, k!0] * in1[k!0, i!2]))");
  Apply scores("Einsum", {shape({sym("b"), sym("q"), num(8)}), shape({sym("b"), sym("k"), num(8)})},
               {{"equation", strAttr("bqd, bkd -> bqk")}});
  EXPECT_EQ(scores.outShape(), "[b, q, k]");
  EXPECT_EQ(scores.elementStr(), "sum(k!0 in [0, 8): (in0[i!0, i!1, k!0] * in1[i!0, i!2, k!0]))");
  EXPECT_TRUE(scores.obligations().empty());
  // One operand: a transpose and a total sum.
  EXPECT_EQ(Apply("Einsum", {shape({sym("m"), sym("n")})}, {{"equation", strAttr("ij->ji")}}).elementStr(),
            "in0[i!1, i!0]");
  EXPECT_EQ(Apply("Einsum", {concrete({2, 3})}, {{"equation", strAttr("ij->")}}).outShape(), "[]");
}

TEST(Einsum, ThreeOperandsWithAnImplicitOutputMatchTheMatrixProduct) {
  // "ij,jk,kl": letters used once (i, l), sorted, index the output; j and k are summed.
  Apply a("Einsum", {concrete({2, 3}), concrete({3, 4}), concrete({4, 2})}, {{"equation", strAttr("ij,jk,kl")}});
  ASSERT_EQ(a.outShape(), "[2, 2]");
  Dense A = iota({2, 3}), B = iota({3, 4}), C = iota({4, 2});
  for (auto &v : B.v)
    v = v - 5;
  for (auto &v : C.v)
    v = 1 + v * 0.5;
  Dense y = a.evaluate({A, B, C});
  // numpy: A @ B @ C
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t l = 0; l < 2; ++l) {
      double want = 0;
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k)
          want += A.v[i * 3 + j] * B.v[j * 4 + k] * C.v[k * 2 + l];
      EXPECT_DOUBLE_EQ(y.v[i * 2 + l], want) << i << ", " << l;
    }
  // Implicit order is alphabetical, not order of appearance: "ba" -> "ab" is a transpose.
  Apply t("Einsum", {concrete({2, 3})}, {{"equation", strAttr("ba")}});
  EXPECT_EQ(t.outShape(), "[3, 2]");
  EXPECT_EQ(t.elementStr(), "in0[i!1, i!0]");
}

TEST(Einsum, AShapeThatMustAgreeIsAnObligationNamingTheNode) {
  Apply a("Einsum", {shape({sym("m"), sym("n")}), shape({sym("p"), sym("q")})}, {{"equation", strAttr("ij,jk->ik")}});
  EXPECT_EQ(a.outShape(), "[m, q]");
  EXPECT_EQ(a.obligations(), std::vector<std::string>{"n == p"});
  ASSERT_EQ(a.result->obligations.size(), 1u);
  EXPECT_NE(a.result->obligations[0].what.find("'/m/Einsum' (Einsum)"), std::string::npos);
  EXPECT_TRUE(Apply("Einsum", {concrete({2, 3}), concrete({4, 5})}, {{"equation", strAttr("ij,jk->ik")}}).isUserError());
  // A letter of size 1 broadcasts, as in onnxruntime and torch: y[i, k] = sum_{j < 3} a[i, 0] * b[j, k].
  Apply bc("Einsum", {concrete({2, 1}), concrete({3, 4})}, {{"equation", strAttr("ij,jk->ik")}});
  ASSERT_EQ(bc.outShape(), "[2, 4]");
  Dense y = bc.evaluate({iota({2, 1}), iota({3, 4})});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k)
      EXPECT_DOUBLE_EQ(y.at({i, k}), i * (k + (4 + k) + (8 + k))) << i << ", " << k;
}

TEST(Einsum, MalformedEquationsAreUserErrorsNamingTheNode) {
  auto fails = [](const char *eq, std::vector<std::optional<Shape>> in) {
    Apply a("Einsum", in, {{"equation", strAttr(eq)}});
    EXPECT_TRUE(a.isUserError()) << eq << ": " << (a.error ? a.error->text : a.outShape());
    if (a.error) {
      EXPECT_NE(a.error->text.find("'/m/Einsum'"), std::string::npos) << a.error->text;
    }
  };
  Shape m = concrete({2, 3}), n = concrete({3, 4});
  fails("ij,jk->iz", {m, n});  // output letter in no operand
  fails("ij,jk->ii", {m, n});  // output letter twice
  fails("ij", {m, n});         // one term for two inputs
  fails("ij,jk,kl", {m, n});   // three terms for two inputs
  fails("i1,jk", {m, n});      // not a letter
  fails("ijk,jk->i", {m, n});  // three letters for a rank-2 operand
  fails("ij,jk->i->k", {m, n});
  Apply none("Einsum", {m, n});
  EXPECT_TRUE(none.isUserError()); // no equation at all
}

TEST(Einsum, DiagonalsAndSummingAnEllipsisAwayAreUnsupportedNotGuessed) {
  Apply diag("Einsum", {concrete({3, 3})}, {{"equation", strAttr("ii->i")}});
  EXPECT_TRUE(diag.isUnsupported());
  EXPECT_NE(diag.error->text.find("diagonal"), std::string::npos);
  EXPECT_TRUE(Apply("Einsum", {concrete({2, 2, 3}), concrete({3, 4})}, {{"equation", strAttr("...j,jk->k")}}).isUnsupported());
  Shape m = concrete({2, 3}), n = concrete({3, 4});
  EXPECT_TRUE(Apply("Einsum", {m, n}, {{"equation", strAttr("..i.j,jk")}}).isUserError());
  EXPECT_TRUE(Apply("Einsum", {m, n}, {{"equation", strAttr("......,jk")}}).isUserError());
}

// `...` is the leading dims, right-aligned across operands and broadcast where
// one side is 1: "...ij,...jk->...ik" is numpy's batched matmul.
TEST(Einsum, EllipsesBroadcastLikeABatchedMatmul) {
  Apply proj("Einsum", {shape({sym("b"), sym("s"), num(8)}), concrete({8, 16})}, {{"equation", strAttr("...d,de->...e")}});
  EXPECT_EQ(proj.outShape(), "[b, s, 16]");
  EXPECT_EQ(proj.elementStr(), "sum(k!0 in [0, 8): (in0[i!0, i!1, k!0] * in1[k!0, i!2]))");
  // A [2, 1, 2, 3] (batch dims [2, 1]) and B [3, 3, 4] (batch dims [3]): batch [2, 3].
  Apply a("Einsum", {concrete({2, 1, 2, 3}), concrete({3, 3, 4})}, {{"equation", strAttr("...ij,...jk->...ik")}});
  ASSERT_EQ(a.outShape(), "[2, 3, 2, 4]");
  Dense A = iota({2, 1, 2, 3}), B = iota({3, 3, 4});
  for (auto &v : B.v)
    v = 7 - v;
  Dense y = a.evaluate({A, B});
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t k = 0; k < 4; ++k) {
          double want = 0;
          for (int64_t j = 0; j < 3; ++j)
            want += A.at({p, 0, i, j}) * B.at({q, j, k});
          EXPECT_DOUBLE_EQ(y.at({p, q, i, k}), want) << p << q << i << k;
        }
  // Implicit output: the ellipsis first, then the letters used once.
  Apply imp("Einsum", {concrete({2, 1, 2, 3}), concrete({3, 3, 4})}, {{"equation", strAttr("...ij,...jk")}});
  EXPECT_EQ(imp.outShape(), "[2, 3, 2, 4]");
  EXPECT_EQ(imp.evaluate({A, B}).v, y.v);
  // Batch dims that are symbols must be equal (a size-1 symbol is not assumed to broadcast).
  Apply sy("Einsum", {shape({sym("p"), num(2), num(3)}), shape({sym("q"), num(3), num(4)})},
           {{"equation", strAttr("...ij,...jk->...ik")}});
  EXPECT_EQ(sy.obligations(), std::vector<std::string>{"p == q"});
}

// --- DepthToSpace (F.pixel_shuffle) --------------------------------------------------

TEST(DepthToSpace, CrdIsTorchsPixelShuffleAndDcrIsOnnxsDefault) {
  // x = arange(16).view(1, 8, 1, 2), blocksize 2; the numbers are torch's
  // F.pixel_shuffle (CRD) and the ONNX reference's reshape/transpose (DCR).
  Attribute crd = strAttr("CRD");
  Apply pix("DepthToSpace", {concrete({1, 8, 1, 2})}, {{"blocksize", intAttr(2)}, {"mode", crd}});
  ASSERT_EQ(pix.outShape(), "[1, 2, 2, 4]");
  EXPECT_EQ(pix.evaluate({iota({1, 8, 1, 2})}).v,
            (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
  Apply dcr("DepthToSpace", {concrete({1, 8, 1, 2})}, {{"blocksize", intAttr(2)}});
  EXPECT_EQ(dcr.evaluate({iota({1, 8, 1, 2})}).v,
            (std::vector<double>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
}

TEST(DepthToSpace, ChannelsMustDivideIntoBlocks) {
  Apply a("DepthToSpace", {shape({sym("n"), sym("c"), sym("h"), num(4)})}, {{"blocksize", intAttr(2)}});
  EXPECT_EQ(a.outShape(), "[n, c // 4, 2*h, 8]");
  EXPECT_EQ(a.obligations().size(), 1u);
  EXPECT_TRUE(Apply("DepthToSpace", {concrete({1, 6, 2, 2})}, {{"blocksize", intAttr(2)}}).isUserError());
  EXPECT_TRUE(Apply("DepthToSpace", {concrete({1, 8, 2})}, {{"blocksize", intAttr(2)}}).isUserError());
  EXPECT_TRUE(Apply("DepthToSpace", {concrete({1, 8, 2, 2})}).isUserError()); // no blocksize
  EXPECT_TRUE(
      Apply("DepthToSpace", {concrete({1, 8, 2, 2})}, {{"blocksize", intAttr(2)}, {"mode", strAttr("XYZ")}}).isUserError());
}

// torch's repeat_interleave with a tensor of repeats splits that constant into
// pieces whose values size each Expand: Split must keep them.
TEST(Split, PiecesOfASmallIntegerVectorKeepTheirValues) {
  Attribute axis0 = intAttr(0);
  Apply a("Split", {concrete({4}), concrete({2})}, {{"axis", axis0}}, {ints({5, 6, 7, 8}), ints({1, 3})}, {}, false, 2);
  ASSERT_TRUE(a.result) << a.error->text;
  ASSERT_EQ(a.result->values.size(), 2u);
  ASSERT_TRUE(a.result->values[0] && a.result->values[1]);
  EXPECT_EQ(a.result->values[0]->vals[0].asInt(), 5);
  ASSERT_EQ(a.result->values[1]->size(), 3u);
  EXPECT_EQ(a.result->values[1]->vals[2].asInt(), 8);
  EXPECT_EQ(a.result->values[1]->dims, std::vector<int64_t>{3});
}
