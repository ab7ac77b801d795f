// Activation functions (PRelu's slope is an input), rounding and
// inference-mode BatchNormalization.
//
// Each activation is written exactly with the term functions we already have
// (Relu, Exp, Log, Max2/Min2, constants), so the prover reasons about them as
// it does about any other arithmetic and numeric evaluation computes what
// onnxruntime computes. Rounding has no such form: Floor, Ceil, Round and Sign
// are opaque functions whose numbers live in ir/OpaqueFns.
#include "shardproof/ir/OpaqueFns.h"
#include "shardproof/ir/Ops.h"

#include <cmath>

namespace shardproof::ir {
namespace {

// A float attribute (ONNX stores them as float32; we keep the double of it).
llvm::Expected<double> floatAttr(const Node &n, const char *name, double dflt) {
  const Attribute *a = n.attr(name);
  if (!a)
    return dflt;
  if (a->kind != Attribute::Kind::Float)
    return userError("node " + describe(n) + ": attribute '" + name + "' must be a float");
  return a->f;
}

// After infer validated the attribute; the element map cannot fail.
double floatAttrOr(const Node &n, const char *name, double dflt) {
  const Attribute *a = n.attr(name);
  return a && a->kind == Attribute::Kind::Float ? a->f : dflt;
}

// Defaults from the ONNX operator definitions (opset 17).
constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

llvm::Expected<OpResult> inferUnary(const OpInputs &in) {
  if (in.shapes.size() != 1 || !in.has(0))
    return userError("node " + describe(in.node) + " takes exactly one input");
  return one(*in.shapes[0], in.dtypes[0]);
}

// The activations' attributes are checked once here: a wrongly typed one is an
// input error, a value we do not model is UNKNOWN.
llvm::Expected<OpResult> inferActivation(const OpInputs &in) {
  auto r = inferUnary(in);
  if (!r)
    return r;
  const std::string &op = in.node.opType;
  std::vector<std::pair<const char *, double>> attrs;
  if (op == "LeakyRelu")
    attrs = {{"alpha", 0.01}};
  else if (op == "Elu" || op == "Celu")
    attrs = {{"alpha", 1.0}};
  else if (op == "Selu")
    attrs = {{"alpha", kSeluAlpha}, {"gamma", kSeluGamma}};
  else if (op == "HardSigmoid")
    attrs = {{"alpha", 0.2}, {"beta", 0.5}};
  for (auto &[name, dflt] : attrs) {
    auto v = floatAttr(in.node, name, dflt);
    if (!v)
      return v.takeError();
    if (!std::isfinite(*v))
      return unsupportedError("node " + describe(in.node) + ": attribute '" + name + "' is not finite");
    // Celu divides by alpha: relu(x) + alpha * (exp(-relu(-x) / alpha) - 1) is
    // ONNX's max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) only for alpha > 0.
    if (op == "Celu" && *v <= 0)
      return unsupportedError("node " + describe(in.node) + ": Celu with alpha <= 0 (" + std::to_string(*v) +
                              ") is not modelled");
  }
  return r;
}

Term relu(const Term &x) { return mkApply(Fn::Relu, {x}); }

// x for x >= 0, alpha * (exp(x) - 1) below: the negative part enters only
// through -relu(-x) = min(x, 0), so exp never sees a large positive number.
Term elu(const Term &x, double alpha) {
  Term negPart = mkNeg(relu(mkNeg(x)));
  return mkAdd({relu(x), mkMul({mkConst(alpha), mkSub(mkApply(Fn::Exp, {negPart}), mkConst(1))})});
}

Term hardSigmoid(const Term &x, double alpha, double beta) {
  Term lin = mkAdd({mkMul({mkConst(alpha), x}), mkConst(beta)});
  return mkApply(Fn::Max2, {mkConst(0), mkApply(Fn::Min2, {mkConst(1), lin})});
}

Term activation(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  const Node &n = in.node;
  const std::string &op = n.opType;
  Term x = read(0, idx, level);
  if (op == "LeakyRelu") // x for x >= 0, alpha * x below
    return mkSub(relu(x), mkMul({mkConst(floatAttrOr(n, "alpha", 0.01)), relu(mkNeg(x))}));
  if (op == "Elu")
    return elu(x, floatAttrOr(n, "alpha", 1.0));
  if (op == "Celu") {
    double alpha = floatAttrOr(n, "alpha", 1.0);
    Term scaled = mkMul({mkConst(-1.0 / alpha), relu(mkNeg(x))}); // min(x, 0) / alpha
    return mkAdd({relu(x), mkMul({mkConst(alpha), mkSub(mkApply(Fn::Exp, {scaled}), mkConst(1))})});
  }
  if (op == "Selu")
    return mkMul({mkConst(floatAttrOr(n, "gamma", kSeluGamma)), elu(x, floatAttrOr(n, "alpha", kSeluAlpha))});
  if (op == "HardSigmoid")
    return hardSigmoid(x, floatAttrOr(n, "alpha", 0.2), floatAttrOr(n, "beta", 0.5));
  if (op == "HardSwish") // ONNX: x * HardSigmoid<alpha = 1/6, beta = 1/2>(x)
    return mkMul({x, hardSigmoid(x, 1.0 / 6.0, 0.5)});
  // Softplus: log(exp(x) + 1), ONNX's definition as written. Its numbers are
  // exact (in double) while exp(x) is finite, |x| < 709; onnxruntime's float32
  // kernel is accurate beyond that, the term then reads +inf.
  return mkApply(Fn::Log, {mkAdd({mkApply(Fn::Exp, {x}), mkConst(1)})});
}

// --- PRelu ---------------------------------------------------------------------
// y = x for x >= 0, slope * x below, with slope broadcast to X unidirectionally
// (opset >= 7). torch exports nn.PReLU(C) on [N, C, ...] with its weight as
// [C, 1, ...] (as [C] on [N, C]) and nn.PReLU(1) as [1, ...].
llvm::Expected<OpResult> inferPRelu(const OpInputs &in) {
  const Node &n = in.node;
  if (in.opset < 7)
    return unsupportedError("node " + describe(n) + ": PRelu before opset 7 (no unidirectional broadcast) is not "
                                                    "modelled");
  if (in.shapes.size() != 2 || !in.has(0) || !in.has(1))
    return userError("node " + describe(n) + ": PRelu takes two inputs (X, slope)");
  const Shape &x = *in.shapes[0], &slope = *in.shapes[1];
  OpResult r = one(x, in.dtypes[0]);
  if (auto e = broadcastsTo(n, "slope", slope, x, r.obligations))
    return std::move(e);
  return r;
}

// LeakyRelu with the slope read per element: relu(x) - slope * relu(-x). At
// x >= 0 a non-finite slope makes this NaN where ONNX gives x (weights are finite).
Term prelu(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term x = read(0, idx, level);
  Term slope = read(1, broadcastIndex(*in.shapes[1], idx), level);
  return mkSub(relu(x), mkMul({slope, relu(mkNeg(x))}));
}

// Floor, Ceil, Round (half to even), Sign: the named opaque function, folded
// on numbers.
Term rounding(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term x = read(0, idx, level);
  if (x->kind == TermKind::Const)
    if (auto v = evalOpaque(in.node.opType, {x->value}))
      return mkConst(*v);
  return mkApply(Fn::Opaque, {x}, in.node.opType);
}

// --- BatchNormalization (inference) ------------------------------------------
// y[n, c, ...] = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c].
// Training mode (batch statistics, running-stat outputs) is not modelled.
llvm::Expected<OpResult> inferBatchNorm(const OpInputs &in) {
  const Node &n = in.node;
  if (in.opset < 9)
    return unsupportedError("node " + describe(n) + ": BatchNormalization before opset 9 (spatial, is_test) is not "
                                                    "modelled");
  if (in.shapes.size() != 5)
    return userError("node " + describe(n) + ": BatchNormalization takes 5 inputs (X, scale, B, mean, var), got " +
                     std::to_string(in.shapes.size()));
  for (unsigned i = 0; i < 5; ++i)
    if (!in.has(i))
      return userError("node " + describe(n) + ": input " + std::to_string(i) + " is missing");
  if (const Attribute *t = n.attr("training_mode")) {
    if (t->kind != Attribute::Kind::Int || (t->i != 0 && t->i != 1))
      return userError("node " + describe(n) + ": training_mode must be the integer 0 or 1");
    if (t->i == 1)
      return unsupportedError("node " + describe(n) + ": BatchNormalization in training mode is not modelled");
  }
  if (n.outputs.size() != 1)
    return unsupportedError("node " + describe(n) + ": BatchNormalization's running statistics outputs are not "
                                                    "modelled");
  auto eps = floatAttr(n, "epsilon", 1e-5);
  if (!eps)
    return eps.takeError();
  if (auto m = floatAttr(n, "momentum", 0.9); !m)
    return m.takeError();
  const Shape &x = *in.shapes[0];
  if (x.rank() < 2)
    return userError("node " + describe(n) + ": BatchNormalization's input needs a channel dim (rank >= 2)");
  const Dim &channels = x.dims[1];
  OpResult r = one(x, in.dtypes[0]);
  static const char *names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (unsigned i = 1; i < 5; ++i) {
    const Shape &s = *in.shapes[i];
    if (s.rank() != 1)
      return userError("node " + describe(n) + ": " + names[i] + " must be 1-D (one value per channel)");
    auto a = s.dims[0].asInt(), c = channels.asInt();
    if (a && c && *a != *c)
      return userError("node " + describe(n) + ": " + names[i] + " has " + std::to_string(*a) + " values for " +
                       std::to_string(*c) + " channels");
    if (!s.dims[0].same(channels))
      r.obligations.push_back({std::string(names[i]) + " of " + describe(n) + " has one value per channel: " +
                                   s.dims[0].str() + " == " + channels.str(),
                               s.dims[0] == channels});
  }
  return r;
}

Term batchNorm(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  double eps = floatAttrOr(in.node, "epsilon", 1e-5);
  IndexVec c = {idx[1]};
  Term invStd = mkApply(Fn::Recip, {mkApply(Fn::Sqrt, {mkAdd({read(4, c, level), mkConst(eps)})})});
  Term centered = mkSub(read(0, idx, level), read(3, c, level));
  return mkAdd({mkMul({centered, invStd, read(1, c, level)}), read(2, c, level)});
}

} // namespace

std::vector<OpDef> activationOps() {
  using C = OpClass;
  return {
      opRow("LeakyRelu", C::Compute, {1, 1}, inferActivation, activation),
      opRow("Elu", C::Compute, {1, 1}, inferActivation, activation),
      opRow("Celu", C::Compute, {1, 1}, inferActivation, activation),
      opRow("Selu", C::Compute, {1, 1}, inferActivation, activation),
      opRow("HardSigmoid", C::Compute, {1, 1}, inferActivation, activation),
      opRow("HardSwish", C::Compute, {1, 1}, inferActivation, activation),
      opRow("Softplus", C::Compute, {1, 1}, inferActivation, activation),
      opRow("PRelu", C::Compute, {2, 2}, inferPRelu, prelu),
      opRow("Floor", C::Compute, {1, 1}, inferUnary, rounding),
      opRow("Ceil", C::Compute, {1, 1}, inferUnary, rounding),
      opRow("Round", C::Compute, {1, 1}, inferUnary, rounding),
      opRow("Sign", C::Compute, {1, 1}, inferUnary, rounding),
      opRow("BatchNormalization", C::Compute, {5, 5}, inferBatchNorm, batchNorm),
  };
}

} // namespace shardproof::ir
