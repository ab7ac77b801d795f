// Elementwise operators: unary functions, broadcast binary arithmetic, casts.
#include "shardproof/ir/OpaqueFns.h"
#include "shardproof/ir/Ops.h"

#include <cmath>

namespace shardproof::ir {
namespace {

llvm::Expected<OpResult> inferSame(const OpInputs &in) {
  if (!in.has(0))
    return userError("node " + describe(in.node) + " has no input");
  OpResult r;
  r.shapes = {*in.shapes[0]};
  r.dtypes = {in.dtypes[0]};
  return r;
}

// com.microsoft's FastGelu takes an optional bias added before the function;
// read as plain FastGelu(x) it would be silently dropped.
llvm::Expected<OpResult> inferFastGelu(const OpInputs &in) {
  if (in.has(1))
    return unsupportedError("node " + describe(in.node) + ": FastGelu with a bias input");
  return inferSame(in);
}

llvm::Expected<OpResult> inferBroadcast(const OpInputs &in) {
  bool cmp = in.node.opType == "Equal" || in.node.opType == "Less" || in.node.opType == "Greater";
  return broadcastResult(in, cmp ? DType::Bool : in.dtypes[0]);
}

Term readB(const OpInputs &in, unsigned i, const IndexVec &idx, const ReadFn &read, int level) {
  return read(i, broadcastIndex(*in.shapes[i], idx), level);
}

template <Fn F>
Term unary(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mkApply(F, {read(0, idx, level)});
}

Term identity(const OpInputs &, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return read(0, idx, level);
}

Term neg(const OpInputs &, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mkNeg(read(0, idx, level));
}

Term recip(const OpInputs &, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mkApply(Fn::Recip, {read(0, idx, level)});
}

Term opaqueUnary(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  return mkApply(Fn::Opaque, {read(0, idx, level)}, in.node.opType);
}

#define BINARY(NAME, EXPR)                                                                        \
  Term NAME(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, \
            int level) {                                                                          \
    Term a = readB(in, 0, idx, read, level), b = readB(in, 1, idx, read, level);                 \
    return EXPR;                                                                                  \
  }
#undef BINARY

// Integer positions plus an offset (arange(seq) + past, a sequence shard's
// start): when both addends are index values known to be >= 0 (a Range's
// element, a shape value), the sum is the count sum(k in [0, a + b): 1), the
// form of arange(past, past + seq), so either way of writing the positions
// unifies with the reference's index by index.
static std::optional<Term> addCounts(const OpInputs &in, const OpResult &r, const Term &a, const Term &b, int level) {
  if (isFloating(r.dtypes[0]) || r.dtypes[0] == DType::Bool || !in.indexValue || !in.nonNegative)
    return std::nullopt;
  auto va = in.indexValue(a), vb = in.indexValue(b);
  if (!va || !vb || va->hasApp() || vb->hasApp() || !in.nonNegative(*va) || !in.nonNegative(*vb))
    return std::nullopt;
  smt::Expr e = (*va + *vb).simplify();
  if (e.asInt())
    return std::nullopt;
  return mkSum(level, smt::Expr::intConst(0), e, mkConst(1));
}

Term add(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term a = readB(in, 0, idx, read, level), b = readB(in, 1, idx, read, level);
  if (auto c = addCounts(in, r, a, b, level))
    return *c;
  return mkAdd({a, b});
}

#define BINARY(NAME, EXPR)                                                                        \
  Term NAME(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, \
            int level) {                                                                          \
    Term a = readB(in, 0, idx, read, level), b = readB(in, 1, idx, read, level);                 \
    return EXPR;                                                                                  \
  }
BINARY(sub, mkSub(a, b))
BINARY(mul, mkMul({a, b}))
BINARY(power, (b->kind == TermKind::Const && b->value == 1) ? a : mkApply(Fn::Pow, {a, b}))
#undef BINARY

// --- Integer Div and Mod ------------------------------------------------------
// ONNX integer Div truncates toward zero; Mod with fmod=0 (integers only) is
// Python's % (the divisor's sign), with fmod=1 C's fmod (the dividend's sign,
// integers and floats). Float Div stays real division. The element is the
// named function "Div" / "Mod" / "FMod" of its operands, which IndexValue.cpp
// follows exactly on integer data and Eval.cpp computes on numbers.
bool integerTyped(const OpInputs &in) {
  return !in.dtypes.empty() && !isFloating(in.dtypes[0]) && in.dtypes[0] != DType::Other;
}

const char *divModName(const OpInputs &in) {
  if (in.node.opType == "Div")
    return "Div";
  return attrInt(in.node, "fmod", 0) == 1 ? "FMod" : "Mod";
}

llvm::Expected<OpResult> inferDivMod(const OpInputs &in) {
  auto r = broadcastResult(in, in.dtypes.empty() ? DType::Other : in.dtypes[0]);
  if (!r)
    return r;
  if (in.node.opType == "Mod") {
    int64_t fmod = attrInt(in.node, "fmod", 0);
    if (fmod != 0 && fmod != 1)
      return userError("node " + describe(in.node) + ": Mod's fmod must be 0 or 1, not " + std::to_string(fmod));
    if (fmod == 0 && !integerTyped(in))
      return userError("node " + describe(in.node) + ": Mod with fmod=0 is for integer tensors (floats need fmod=1)");
  }
  if (!integerTyped(in))
    return r;
  // Integer division by zero is undefined: every divisor whose value is known
  // must be nonzero at every admissible size (an obligation, like a bound).
  std::string what = "the divisor of " + describe(in.node) + " is not 0";
  if (in.values.size() > 1 && in.values[1]) {
    for (auto &v : in.values[1]->vals)
      if (!(v.asInt() && *v.asInt() != 0))
        r->obligations.push_back({what, v != smt::Expr::intConst(0)});
  } else if (in.inputValue && in.has(1)) {
    IndexVec pos = indexVars("g", static_cast<unsigned>(in.shapes[1]->rank()));
    if (auto v = in.inputValue(1, pos); v && !(v->asInt() && *v->asInt() != 0)) {
      std::vector<smt::Expr> inside;
      for (size_t d = 0; d < pos.size(); ++d)
        inside.push_back(inRange(pos[d], smt::Expr::intConst(0), in.shapes[1]->dims[d]));
      r->obligations.push_back({what, smt::implies(smt::conj(inside), *v != smt::Expr::intConst(0))});
    }
  }
  return r;
}

// Folds integer numbers (as the graph computes them, ir/OpaqueFns); otherwise
// the named function.
Term divModLeaves(const char *name, const Term &a, const Term &b) {
  if (a->kind == TermKind::Const && b->kind == TermKind::Const && b->value != 0 &&
      a->value == std::trunc(a->value) && b->value == std::trunc(b->value) && std::abs(a->value) < 1e15 &&
      std::abs(b->value) < 1e15)
    if (auto v = evalOpaque(name, {a->value, b->value}))
      return mkConst(*v);
  return mkApply(Fn::Opaque, {a, b}, name);
}

Term divMod(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term a = readB(in, 0, idx, read, level), b = readB(in, 1, idx, read, level);
  if (in.node.opType == "Div" && !integerTyped(in))
    return mkDiv(a, b); // real division
  return divModLeaves(divModName(in), a, b);
}

// n-ary Max/Min/Sum fold pairwise.
template <Fn F>
Term variadic(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term acc = readB(in, 0, idx, read, level);
  for (unsigned i = 1; i < in.shapes.size(); ++i)
    acc = mkApply(F, {acc, readB(in, i, idx, read, level)});
  return acc;
}

llvm::Expected<OpResult> inferCast(const OpInputs &in) {
  auto r = inferSame(in);
  if (!r)
    return r.takeError();
  int64_t to = attrInt(in.node, "to", 1);
  // ONNX TensorProto element types; only the float/int distinction matters here.
  DType t = to == 1 ? DType::Float : to == 11 ? DType::Double : to == 10 ? DType::Float16
          : to == 16 ? DType::BFloat16 : to == 7 ? DType::Int64 : to == 6 ? DType::Int32
          : to == 9 ? DType::Bool : DType::Other;
  r->dtypes = {t};
  if (in.values.size() && in.values[0])
    r->values = {in.values[0]};
  return r;
}

Term cast(const OpInputs &in, const OpResult &r, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  // We reason over real numbers: a cast to a floating type (or between integer
  // types) keeps the value; a cast from floating to integer rounds, so it stays opaque.
  DType from = in.dtypes[0], to = r.dtypes[0];
  Term x = read(0, idx, level);
  // A boolean mask built from index conditions or bound integer data
  // (arange(padded) < seq_len) cast to numbers is the 0/1 Select on that
  // condition, so a product with it is a masked term the prover splits.
  if (from == DType::Bool && to != DType::Bool && in.indexValue)
    if (auto v = in.indexValue(x))
      return mkMaskSelect(*v != smt::Expr::intConst(0), mkConst(1), mkConst(0));
  if (isFloating(to) || (!isFloating(from) && to != DType::Bool))
    return x;
  return mkApply(Fn::Opaque, {x}, std::string("Cast:") + toString(to));
}

// Clip: min(max(x, lo), hi), bounds as optional inputs (opset >= 11) or
// attributes `min`/`max` (before). ONNX sets every element to `max` when
// min > max, which min(max(x, lo), hi) also gives.
llvm::Expected<OpResult> inferClip(const OpInputs &in) {
  auto r = inferSame(in);
  if (!r)
    return r.takeError();
  for (unsigned i = 1; i < 3; ++i)
    if (in.has(i) && in.shapes[i]->rank() != 0)
      return userError("node " + describe(in.node) + ": Clip bounds must be scalars");
  return r;
}

Term clip(const OpInputs &in, const OpResult &, unsigned, const IndexVec &idx, const ReadFn &read, int level) {
  Term x = read(0, idx, level);
  auto bound = [&](unsigned i, const char *attr) -> Term {
    if (in.has(i))
      return read(i, {}, level);
    if (in.opset < 11)
      if (const Attribute *a = in.node.attr(attr))
        return mkConst(a->f);
    return nullptr;
  };
  if (Term lo = bound(1, "min"))
    x = mkApply(Fn::Max2, {x, lo});
  if (Term hi = bound(2, "max"))
    x = mkApply(Fn::Min2, {x, hi});
  return x;
}

} // namespace

std::vector<OpDef> elementwiseOps() {
  using C = OpClass;
  return {
      opRow("Identity", C::View, {1, 1}, inferSame, identity),
      opRow("Neg", C::Compute, {1, 1}, inferSame, neg),
      opRow("Reciprocal", C::Compute, {1, 1}, inferSame, recip),
      opRow("Erf", C::Compute, {1, 1}, inferSame, unary<Fn::Erf>),
      opRow("Tanh", C::Compute, {1, 1}, inferSame, unary<Fn::Tanh>),
      opRow("Exp", C::Compute, {1, 1}, inferSame, unary<Fn::Exp>),
      opRow("Log", C::Compute, {1, 1}, inferSame, unary<Fn::Log>),
      opRow("Sqrt", C::Compute, {1, 1}, inferSame, unary<Fn::Sqrt>),
      opRow("Sigmoid", C::Compute, {1, 1}, inferSame, unary<Fn::Sigmoid>),
      opRow("Relu", C::Compute, {1, 1}, inferSame, unary<Fn::Relu>),
      opRow("Abs", C::Compute, {1, 1}, inferSame, unary<Fn::Abs>),
      opRow("Cos", C::Compute, {1, 1}, inferSame, unary<Fn::Cos>),
      opRow("Sin", C::Compute, {1, 1}, inferSame, unary<Fn::Sin>),
      opRow("Gelu", C::Compute, {1, 1}, inferSame, opaqueUnary),
      opRow("Gelu", C::Compute, {1, 1}, inferSame, opaqueUnary, "com.microsoft"),
      opRow("FastGelu", C::Compute, {1, 2}, inferFastGelu, opaqueUnary, "com.microsoft"),
      opRow("Add", C::Compute, {2, 2}, inferBroadcast, add),
      opRow("Sub", C::Compute, {2, 2}, inferBroadcast, sub),
      opRow("Mul", C::Compute, {2, 2}, inferBroadcast, mul),
      opRow("Div", C::Compute, {2, 2}, inferDivMod, divMod),
      opRow("Mod", C::Compute, {2, 2}, inferDivMod, divMod),
      opRow("Pow", C::Compute, {2, 2}, inferBroadcast, power),
      opRow("Max", C::Compute, {1, Arity::kAnyCount}, inferBroadcast, variadic<Fn::Max2>),
      opRow("Min", C::Compute, {1, Arity::kAnyCount}, inferBroadcast, variadic<Fn::Min2>),
      opRow("Sum", C::Compute, {1, Arity::kAnyCount}, inferBroadcast, variadic<Fn::Add>),
      opRow("Cast", C::Compute, {1, 1}, inferCast, cast),
      opRow("Clip", C::Compute, {1, 3}, inferClip, clip),
  };
}

} // namespace shardproof::ir
