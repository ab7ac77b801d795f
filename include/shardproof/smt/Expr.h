// smt::Expr: a small value type for integer and boolean expressions over named
// symbols. It is the only handle the rest of shardproof has on Z3: this header
// forward-declares the Z3 types, so z3.h is included by smt/*.cpp alone.
//
// Builders fold constants before reaching Z3, so shape arithmetic on concrete
// dims never costs a solver call. A default-constructed Expr is "invalid" and
// propagates through builders; a query on it ends as Result::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

struct _Z3_ast;

namespace shardproof::smt {

namespace detail {
struct ExprAccess;
}

class Expr {
public:
  Expr() = default;
  Expr(const Expr &o);
  Expr(Expr &&o) noexcept : ast_(o.ast_) { o.ast_ = nullptr; }
  Expr &operator=(const Expr &o);
  Expr &operator=(Expr &&o) noexcept;
  ~Expr();

  // --- Construction ---------------------------------------------------------
  static Expr intConst(int64_t v);
  static Expr intVar(const std::string &name);
  static Expr boolConst(bool b);
  static Expr boolVar(const std::string &name);
  /// f(args...) for an integer-valued uninterpreted function of integers: the
  /// value of an element of an integer tensor, e.g. input_ids(b, s).
  static Expr app(const std::string &fn, const std::vector<Expr> &args);
  /// For all integer constants `vars`: body (a background fact about apps).
  static Expr forall(const std::vector<Expr> &vars, const Expr &body);

  bool isValid() const { return ast_ != nullptr; }
  bool isInt() const;
  bool isBool() const;

  // --- Inspection -----------------------------------------------------------
  /// The integer value if this is a numeral.
  std::optional<int64_t> asInt() const;
  /// The boolean value if this is `true` or `false`.
  std::optional<bool> asBool() const;
  /// The name if this is a named constant (a symbol or index variable).
  std::optional<std::string> asVar() const;
  /// Structural identity: equal ids mean the same (hash-consed) AST.
  unsigned id() const;
  bool same(const Expr &o) const { return ast_ == o.ast_; }
  /// Names of the named constants occurring in this expression.
  std::vector<std::string> vars() const;
  bool mentions(const std::string &var) const;

  enum class Cmp { LT, LE, GT, GE, EQ };
  /// If this is a comparison `a OP b` of integers, its parts.
  std::optional<std::tuple<Cmp, Expr, Expr>> asCmp() const;
  /// If this is `!x`, x.
  std::optional<Expr> asNot() const;
  /// If this is `ite(c, t, e)`: c, t and e.
  std::optional<std::tuple<Expr, Expr, Expr>> asIte() const;
  /// The first integer-valued `ite` inside this expression (pre-order), if any.
  std::optional<Expr> findIntIte() const;
  /// In a boolean combination (and, or, not, implies, iff, xor, ite) of
  /// integer comparisons: the first comparison (pre-order). Nothing when this
  /// is itself a comparison or the negation of one.
  std::optional<Expr> findAtom() const;
  /// If this is a conjunction, its conjuncts.
  std::vector<Expr> conjuncts() const;

  /// If this is `a*var + rest` with `a` a numeral and `rest` free of `var`,
  /// returns {a, rest}. Works on the simplified form.
  std::optional<std::pair<int64_t, Expr>> affineIn(const std::string &var) const;

  /// Does an uninterpreted function application (tensor data) occur in it?
  bool hasApp() const;
  /// Does `var` occur in the arguments of such an application (the index of
  /// a data read)?
  bool mentionsInApplication(const std::string &var) const;
  /// The uninterpreted functions applied in it (also under a forall), with
  /// their arities.
  std::map<std::string, unsigned> functions() const;
  /// The polynomial degree in the integer variables (n * n * m is 3; a sum,
  /// a quotient or a remainder takes its largest operand's), capped at 1000. Cheap: no solver. High degrees are where Z3's
  /// preprocessing stops answering its interrupt.
  unsigned degree() const;
  /// If this applies an uninterpreted function to arguments: its name and them.
  std::optional<std::pair<std::string, std::vector<Expr>>> asApp() const;

  /// Value of a variable, or nullopt if unknown.
  using Env = std::function<std::optional<int64_t>(const std::string &)>;
  /// Value of an uninterpreted function at integer arguments, or nullopt.
  using AppEnv = std::function<std::optional<int64_t>(const std::string &, const std::vector<int64_t> &)>;
  /// Evaluates this integer (or boolean: 1/0) expression with the variables
  /// given by `env` (and function applications by `apps`), without the solver;
  /// nullopt if something is unknown or a division by zero occurs. Division
  /// and modulo are floor-style (as built).
  std::optional<int64_t> eval(const Env &env, const AppEnv &apps = nullptr) const;
  /// The slot of variable `name` in a `Slots` environment: one per name for the
  /// whole process, small and dense (names are interned as programs compile).
  static uint32_t slotOf(const std::string &name);
  /// Variable values by slot; kUnset (or a slot past the end) is unknown.
  using Slots = std::vector<int64_t>;
  static constexpr int64_t kUnset = INT64_MIN;
  /// eval() reading variables from `slots`: no name lookups, for callers that
  /// evaluate index expressions millions of times (a numeric replay).
  /// `unknownAsZero`: an unknown variable reads as 0 instead of making the value unknown.
  std::optional<int64_t> evalSlots(const Slots &slots, const AppEnv &apps = nullptr, bool unknownAsZero = false) const;

  // --- Transformation -------------------------------------------------------
  /// Z3's simplifier plus the div/mod rules of reshaped indices (Simplify.cpp).
  Expr simplify() const;
  /// Replaces named constants `from[i]` by `to[i]` simultaneously.
  Expr substitute(const std::vector<Expr> &from, const std::vector<Expr> &to) const;

  /// Infix rendering for reports: `seq // 2 + 1`, `(i < 8) && (j >= 0)`.
  std::string str() const;
  /// SMT-LIB rendering for dumps.
  std::string smtlib() const;

private:
  // The Z3 handle is reached only inside smt/ (detail::raw, detail::fromRaw in
  // smt/Context.h): nothing else sees Z3.
  friend struct detail::ExprAccess;
  Expr simplifyUncached() const;
  explicit Expr(_Z3_ast *a); // takes a new reference
  _Z3_ast *ast_ = nullptr;
};

/// Drops the process-wide memo of simplify() and the ASTs it keeps alive. A
/// check calls it when it ends, so a process that runs many (a fuzzer, a
/// library user) does not accumulate every formula it ever simplified.
void releaseCaches();

// --- Integer arithmetic (integers are unbounded; division is floor division,
// the only one our sizes need since divisors are positive) --------------------
Expr operator+(const Expr &a, const Expr &b);
Expr operator-(const Expr &a, const Expr &b);
Expr operator-(const Expr &a);
Expr operator*(const Expr &a, const Expr &b);
Expr floorDiv(const Expr &a, const Expr &b);
Expr mod(const Expr &a, const Expr &b);
Expr ceilDiv(const Expr &a, const Expr &b);
// ONNX's integer Div and Mod, exact for every sign (b != 0 is the caller's
// obligation; a constant 0 divisor gives an invalid Expr). Z3's div/mod are
// Euclidean, so the signs are spelled out with ite unless `aNonNegative` says
// the dividend is >= 0, where truncDiv and truncMod are Euclid's (floorModSigned
// depends on the divisor's sign only).
/// Division truncating toward zero (C, ONNX integer Div): -7 / 2 = -3.
Expr truncDiv(const Expr &a, const Expr &b, bool aNonNegative = false);
/// Remainder with the dividend's sign (C fmod, ONNX Mod fmod=1): -7 % 2 = -1.
Expr truncMod(const Expr &a, const Expr &b, bool aNonNegative = false);
/// Remainder with the divisor's sign (Python %, ONNX Mod fmod=0): -7 % 2 = 1, 7 % -2 = -1.
Expr floorModSigned(const Expr &a, const Expr &b, bool aNonNegative = false);
Expr min(const Expr &a, const Expr &b);
Expr max(const Expr &a, const Expr &b);
Expr operator+(const Expr &a, int64_t b);
Expr operator-(const Expr &a, int64_t b);
Expr operator*(const Expr &a, int64_t b);

// --- Comparisons and logic --------------------------------------------------
Expr operator==(const Expr &a, const Expr &b);
Expr operator!=(const Expr &a, const Expr &b);
Expr operator<(const Expr &a, const Expr &b);
Expr operator<=(const Expr &a, const Expr &b);
Expr operator>(const Expr &a, const Expr &b);
Expr operator>=(const Expr &a, const Expr &b);
Expr operator&&(const Expr &a, const Expr &b);
Expr operator||(const Expr &a, const Expr &b);
Expr operator!(const Expr &a);
Expr implies(const Expr &a, const Expr &b);
Expr ite(const Expr &c, const Expr &t, const Expr &e);
Expr conj(const std::vector<Expr> &xs);
Expr disj(const std::vector<Expr> &xs);
/// lo <= x < hi
Expr inRange(const Expr &x, const Expr &lo, const Expr &hi);
/// e / c when every coefficient of the linear form of e (and its constant) is a
/// multiple of c; nullopt otherwise (Simplify.cpp).
std::optional<Expr> divideExact(const Expr &e, int64_t c);
/// a div b (or a mod b) when b is a product of atoms and every monomial of a
/// is a multiple of it: the exact polynomial quotient (remainder 0), valid
/// wherever b != 0; nullopt otherwise.
std::optional<Expr> dividePolynomial(const Expr &a, const Expr &b, bool isMod);
/// `e` with each x mod c replaced by x, and x div c by 0, where inRange(x, c)
/// says 0 <= x < c (the caller's facts, e.g. a bound variable's range).
Expr dropModuli(const Expr &e, const std::function<bool(const Expr &, int64_t)> &inRange);
/// {q, r} with e = c*q + r: q takes the linear terms whose coefficient is a
/// multiple of c (c > 0) and floor(constant / c); r the rest (Simplify.cpp).
std::pair<Expr, Expr> divModLinear(const Expr &e, int64_t c);

} // namespace shardproof::smt
