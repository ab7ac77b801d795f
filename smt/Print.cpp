// Infix rendering of smt::Expr for reports, and SMT-LIB rendering for dumps.
#include "smt/Context.h"
#include "shardproof/smt/Expr.h"

#include <string>
#include <vector>

namespace shardproof::smt {
using detail::ctx;

namespace {

// Precedence: higher binds tighter.
enum Prec { POr = 1, PAnd, PNot, PCmp, PAdd, PMul, PUnary, PAtom };

struct Printer {
  std::string out;

  std::vector<Z3_ast> args(Z3_ast a) {
    std::vector<Z3_ast> v;
    Z3_app app = Z3_to_app(ctx(), a);
    for (unsigned i = 0, n = Z3_get_app_num_args(ctx(), app); i < n; ++i)
      v.push_back(Z3_get_app_arg(ctx(), app, i));
    return v;
  }

  // Renders `a` and returns its precedence; wraps in parens when below `min`.
  void emit(Z3_ast a, int min) {
    std::string s;
    int p = render(a, s);
    if (p < min)
      out += "(" + s + ")";
    else
      out += s;
  }

  std::string sub(Z3_ast a, int min) {
    Printer p;
    p.emit(a, min);
    return p.out;
  }

  static bool isNumeral(Z3_ast a) { return Z3_get_ast_kind(ctx(), a) == Z3_NUMERAL_AST; }
  // The operator at the root of `a`, or Z3_OP_UNINTERPRETED for a leaf.
  static Z3_decl_kind kindOf(Z3_ast a) {
    if (Z3_get_ast_kind(ctx(), a) != Z3_APP_AST)
      return Z3_OP_UNINTERPRETED;
    return Z3_get_decl_kind(ctx(), Z3_get_app_decl(ctx(), Z3_to_app(ctx(), a)));
  }
  // Whether the text of `a` starts with a numeral factor (`2*s`, `(2*3)*s`).
  // What a product prints first: its first factor, through nested products.
  static Z3_ast leftmostFactor(Z3_ast a) {
    while (kindOf(a) == Z3_OP_MUL)
      a = Z3_get_app_arg(ctx(), Z3_to_app(ctx(), a), 0);
    return a;
  }
  static bool isQuotient(Z3_ast a) {
    Z3_decl_kind k = kindOf(a);
    return k == Z3_OP_IDIV || k == Z3_OP_DIV || k == Z3_OP_MOD || k == Z3_OP_REM;
  }

  // "min" for ite(a <= b, a, b) (or b >= a), "max" for ite(b <= a, a, b)
  // (or a >= b), else null.
  static const char *minOrMax(const std::vector<Z3_ast> &ite) {
    Z3_decl_kind k = kindOf(ite[0]);
    if (k != Z3_OP_LE && k != Z3_OP_GE)
      return nullptr;
    Z3_app cmp = Z3_to_app(ctx(), ite[0]);
    Z3_ast lo = Z3_get_app_arg(ctx(), cmp, k == Z3_OP_LE ? 0 : 1);
    Z3_ast hi = Z3_get_app_arg(ctx(), cmp, k == Z3_OP_LE ? 1 : 0);
    if (lo == ite[1] && hi == ite[2])
      return "min";
    if (lo == ite[2] && hi == ite[1])
      return "max";
    return nullptr;
  }

  static std::optional<int64_t> negCoef(Z3_ast a, Z3_ast &rest) {
    // Matches (* -c x) so that a + (* -1 x) prints as a - x.
    if (kindOf(a) != Z3_OP_MUL)
      return std::nullopt;
    Z3_app app = Z3_to_app(ctx(), a);
    if (Z3_get_app_num_args(ctx(), app) != 2)
      return std::nullopt;
    Z3_ast c = Z3_get_app_arg(ctx(), app, 0);
    int64_t v;
    if (!isNumeral(c) || !Z3_get_numeral_int64(ctx(), c, &v) || v >= 0)
      return std::nullopt;
    rest = Z3_get_app_arg(ctx(), app, 1);
    return -v;
  }

  int render(Z3_ast a, std::string &s) {
    switch (Z3_get_ast_kind(ctx(), a)) {
    case Z3_NUMERAL_AST: {
      s = Z3_get_numeral_string(ctx(), a);
      return s[0] == '-' ? PUnary : PAtom;
    }
    case Z3_APP_AST: break;
    default: s = Z3_ast_to_string(ctx(), a); return PAtom;
    }
    Z3_app app = Z3_to_app(ctx(), a);
    Z3_func_decl d = Z3_get_app_decl(ctx(), app);
    auto as = args(a);
    auto bin = [&](const char *op, int p, bool assoc) {
      for (size_t i = 0; i < as.size(); ++i) {
        if (i)
          s += op;
        s += sub(as[i], assoc || i == 0 ? p : p + 1);
      }
      return p;
    };
    switch (Z3_get_decl_kind(ctx(), d)) {
    case Z3_OP_TRUE: s = "true"; return PAtom;
    case Z3_OP_FALSE: s = "false"; return PAtom;
    case Z3_OP_ADD: {
      for (size_t i = 0; i < as.size(); ++i) {
        Z3_ast rest;
        if (i) {
          if (auto c = negCoef(as[i], rest)) {
            s += " - ";
            if (*c != 1)
              s += std::to_string(*c) + "*";
            s += sub(rest, *c != 1 ? PMul + 1 : PMul);
            continue;
          }
          s += " + ";
        }
        // A later operand that is itself a sum or difference keeps its
        // parentheses: `a + (0 - x)` printed `a + 0 - x` would parse back as
        // `(a + 0) - x`, another tree, and the rendering would not be stable.
        s += sub(as[i], i == 0 ? PAdd : PAdd + 1);
      }
      return PAdd;
    }
    case Z3_OP_SUB:
      // 0 - x is how a unary minus is read (smt's operator-), so it prints as
      // one; -1*x prints the same, so either reads back as 0 - x.
      if (as.size() == 2 && isNumeral(as[0]) && Z3_get_numeral_string(ctx(), as[0]) == std::string("0")) {
        s = "-" + sub(as[1], PUnary);
        return PUnary;
      }
      return bin(" - ", PAdd, false);
    case Z3_OP_MUL: {
      Z3_ast rest;
      if (as.size() == 2)
        if (auto c = negCoef(a, rest); c && *c == 1) {
          s = "-" + sub(rest, PUnary);
          return PUnary;
        }
      // A later factor keeps its parentheses when reading the text back left
      // to right would build another tree: a quotient or remainder always
      // (`2*((3*s) // q)` printed `2*3*s // q` is `(6*s) // q`, another value);
      // a product that starts with one (`2*((s // k)*q)` printed
      // `2*s // k*q` is `((2*s) // k)*q`); a product when only numerals
      // precede it and it starts with one (`2*(2*s)` printed `2*2*s` reads
      // back folded, as `4*s`).
      bool numeralsSoFar = true;
      for (size_t i = 0; i < as.size(); ++i) {
        if (i)
          s += "*";
        bool product = kindOf(as[i]) == Z3_OP_MUL;
        Z3_ast first = leftmostFactor(as[i]);
        bool keepsParens = i && (!product || isQuotient(first) || (numeralsSoFar && isNumeral(first)));
        s += sub(as[i], keepsParens ? PMul + 1 : PMul);
        numeralsSoFar = numeralsSoFar && isNumeral(as[i]);
      }
      return PMul;
    }
    case Z3_OP_UMINUS: s = "-" + sub(as[0], PUnary); return PUnary;
    case Z3_OP_IDIV: case Z3_OP_DIV: return bin(" // ", PMul, false);
    case Z3_OP_MOD: case Z3_OP_REM: return bin(" % ", PMul, false);
    case Z3_OP_LE: return bin(" <= ", PCmp, false);
    case Z3_OP_GE: return bin(" >= ", PCmp, false);
    case Z3_OP_LT: return bin(" < ", PCmp, false);
    case Z3_OP_GT: return bin(" > ", PCmp, false);
    case Z3_OP_EQ: return bin(" == ", PCmp, false);
    case Z3_OP_DISTINCT: return bin(" != ", PCmp, false);
    case Z3_OP_AND: return bin(" && ", PAnd, true);
    case Z3_OP_OR: return bin(" || ", POr, true);
    case Z3_OP_IMPLIES: return bin(" => ", POr, false);
    case Z3_OP_NOT: {
      // !(a <= b) reads better as a > b.
      static const std::pair<Z3_decl_kind, const char *> flip[] = {
          {Z3_OP_LE, " > "}, {Z3_OP_LT, " >= "}, {Z3_OP_GE, " < "}, {Z3_OP_GT, " <= "}, {Z3_OP_EQ, " != "}};
      for (auto &[kind, op] : flip)
        if (kindOf(as[0]) == kind) {
          auto inner = args(as[0]);
          s = sub(inner[0], PCmp + 1) + op + sub(inner[1], PCmp + 1);
          return PCmp;
        }
      s = "!" + sub(as[0], PAtom);
      return PNot;
    }
    case Z3_OP_ITE:
      // min and max (smt::min, smt::max) print as written: the text stays
      // linear in nested minima, whose tree repeats each operand, and reads back.
      if (auto m = minOrMax(as)) {
        s = std::string(m) + "(" + sub(as[1], 0) + ", " + sub(as[2], 0) + ")";
        return PAtom;
      }
      s = "ite(" + sub(as[0], 0) + ", " + sub(as[1], 0) + ", " + sub(as[2], 0) + ")";
      return PAtom;
    default: break;
    }
    if (as.empty()) {
      s = Z3_get_symbol_string(ctx(), Z3_get_decl_name(ctx(), d));
      return PAtom;
    }
    s = Z3_get_symbol_string(ctx(), Z3_get_decl_name(ctx(), d));
    s += "(";
    for (size_t i = 0; i < as.size(); ++i)
      s += (i ? ", " : "") + sub(as[i], 0);
    s += ")";
    return PAtom;
  }
};

} // namespace

std::string Expr::str() const {
  if (!isValid())
    return "<invalid>";
  Printer p;
  p.emit(detail::raw(*this), 0);
  return p.out;
}

std::string Expr::smtlib() const {
  if (!isValid())
    return "<invalid>";
  return Z3_ast_to_string(ctx(), detail::raw(*this));
}

} // namespace shardproof::smt
