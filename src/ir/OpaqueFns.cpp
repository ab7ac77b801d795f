// Numeric semantics of the named opaque functions (see OpaqueFns.h).
#include "shardproof/ir/OpaqueFns.h"

#include <cmath>
#include <cstdint>

namespace shardproof::ir {
namespace {

// ONNX integer Div (truncating), Mod (the divisor's sign) and FMod (C's
// fmod, also on floats), as the graph computes them; a zero divisor is NaN.
double divMod(const std::string &op, double x, double y) {
  if (y == 0 || std::isnan(x) || std::isnan(y))
    return NAN;
  if (x == std::trunc(x) && y == std::trunc(y) && std::abs(x) < 1e15 && std::abs(y) < 1e15) {
    auto a = static_cast<int64_t>(x), b = static_cast<int64_t>(y);
    int64_t r = a % b; // C++: truncating, the dividend's sign
    if (op == "Mod" && r != 0 && ((r < 0) != (b < 0)))
      r += b;
    return static_cast<double>(op == "Div" ? a / b : r);
  }
  if (op == "Div")
    return std::trunc(x / y);
  double r = std::fmod(x, y);
  if (op == "Mod" && r != 0 && ((r < 0) != (y < 0)))
    r += y;
  return r;
}

// ONNX Round rounds halves to the even neighbour (numpy's round, not C's
// std::round): 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2. Spelled out rather
// than relying on the floating-point environment's rounding mode.
double roundHalfEven(double x) {
  if (!std::isfinite(x))
    return x;
  double f = std::floor(x), d = x - f;
  if (d < 0.5)
    return f;
  if (d > 0.5)
    return f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

// ONNX Sign: -1, 0 or 1 (NaN stays NaN, as numpy's sign).
double sign(double x) {
  if (std::isnan(x))
    return x;
  return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

} // namespace

std::optional<double> evalOpaque(const std::string &op, const std::vector<double> &a) {
  auto b = [](bool x) { return x ? 1.0 : 0.0; };
  // Masks: comparisons, logic, Where and casts to bool compute what the graph
  // computes (a mask built from data, a finite additive mask).
  if (a.size() == 2) {
    if (op == "Equal") return b(a[0] == a[1]);
    if (op == "Less") return b(a[0] < a[1]);
    if (op == "Greater") return b(a[0] > a[1]);
    if (op == "LessOrEqual") return b(a[0] <= a[1]);
    if (op == "GreaterOrEqual") return b(a[0] >= a[1]);
    if (op == "And") return b(a[0] != 0 && a[1] != 0);
    if (op == "Or") return b(a[0] != 0 || a[1] != 0);
  }
  if (a.size() == 1 && op == "Not") return b(a[0] == 0);
  if (a.size() == 1 && op == "Cast:bool") return b(a[0] != 0);
  if (a.size() == 3 && op == "Where") return a[0] != 0 ? a[1] : a[2];
  if (a.size() == 2 && (op == "Div" || op == "Mod" || op == "FMod")) return divMod(op, a[0], a[1]);
  // Rounding (float tensors; Sign also integers).
  if (a.size() == 1) {
    if (op == "Floor") return std::floor(a[0]);
    if (op == "Ceil") return std::ceil(a[0]);
    if (op == "Round") return roundHalfEven(a[0]);
    if (op == "Sign") return sign(a[0]);
  }
  return std::nullopt;
}

namespace {

using smt::Expr;

Expr truth(const Expr &b) { return ite(b, Expr::intConst(1), Expr::intConst(0)); }
Expr nonZero(const Expr &v) { return v != Expr::intConst(0); }

std::optional<Expr> compareNamed(const std::string &op, const Expr &a, const Expr &b) {
  if (op == "Equal") return truth(a == b);
  if (op == "Less") return truth(a < b);
  if (op == "Greater") return truth(a > b);
  if (op == "LessOrEqual") return truth(a <= b);
  if (op == "GreaterOrEqual") return truth(a >= b);
  if (op == "And") return truth(nonZero(a) && nonZero(b));
  if (op == "Or") return truth(nonZero(a) || nonZero(b));
  return std::nullopt;
}

// ONNX's integer Div (truncating) and Mod (fmod=0: the divisor's sign, fmod=1:
// the dividend's), exact for every sign: Z3's div and mod are Euclidean, so
// the smt builders spell the signs out, unless the dividend is known >= 0
// (an index, a count), where the plain form is exact. The divisor is nonzero
// by the node's obligation; a constant 0 gives no value.
std::optional<Expr> integerDivMod(const std::string &op, const Expr &a, const Expr &b, bool nonNeg) {
  Expr r = op == "Div" ? truncDiv(a, b, nonNeg) : op == "FMod" ? truncMod(a, b, nonNeg) : floorModSigned(a, b, nonNeg);
  if (!r.isValid())
    return std::nullopt;
  return r.simplify();
}

} // namespace

std::optional<Expr> integerOpaque(const std::string &name, const std::vector<Expr> &xs, bool firstNonNegative) {
  if (name == "Cast:bool" && xs.size() == 1)
    return truth(nonZero(xs[0]));
  if (name.rfind("Cast:", 0) == 0 && xs.size() == 1)
    return xs[0]; // integer casts keep the value
  if (name == "Not" && xs.size() == 1)
    return truth(!nonZero(xs[0]));
  if (name == "Where" && xs.size() == 3)
    return ite(nonZero(xs[0]), xs[1], xs[2]);
  if ((name == "Div" || name == "Mod" || name == "FMod") && xs.size() == 2)
    return integerDivMod(name, xs[0], xs[1], firstNonNegative);
  if (xs.size() == 2)
    return compareNamed(name, xs[0], xs[1]);
  return std::nullopt;
}

} // namespace shardproof::ir
