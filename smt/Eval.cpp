// Concrete evaluation of Exprs by walking the Z3 AST: replaying a counterexample
// evaluates millions of index expressions, far too many for Z3_simplify.
#include "smt/Context.h"
#include "shardproof/smt/Expr.h"

namespace shardproof::smt {

using detail::ctx;

namespace {

// Z3's integer div/mod are Euclidean: a = b*q + r with 0 <= r < |b|. For the
// positive divisors our builders produce this is floor division.
std::optional<int64_t> euclidDiv(int64_t a, int64_t b, bool wantMod) {
  if (b == 0)
    return std::nullopt;
  int64_t m = b < 0 ? -b : b;
  int64_t r = ((a % m) + m) % m;
  return wantMod ? r : (a - r) / b;
}

struct Walker {
  const Expr::Env &env;
  const Expr::AppEnv &apps;

  std::optional<int64_t> arg(Z3_app app, unsigned i) { return go(Z3_get_app_arg(ctx(), app, i)); }

  std::optional<int64_t> go(Z3_ast a) {
    Z3_ast_kind k = Z3_get_ast_kind(ctx(), a);
    if (k == Z3_NUMERAL_AST) {
      int64_t v;
      return Z3_get_numeral_int64(ctx(), a, &v) ? std::optional<int64_t>(v) : std::nullopt;
    }
    if (k != Z3_APP_AST)
      return std::nullopt;
    Z3_app app = Z3_to_app(ctx(), a);
    Z3_func_decl d = Z3_get_app_decl(ctx(), app);
    unsigned n = Z3_get_app_num_args(ctx(), app);
    Z3_decl_kind dk = Z3_get_decl_kind(ctx(), d);
    if (dk == Z3_OP_UNINTERPRETED) {
      std::string name = Z3_get_symbol_string(ctx(), Z3_get_decl_name(ctx(), d));
      if (n == 0)
        return env(name);
      if (!apps)
        return std::nullopt;
      std::vector<int64_t> args;
      for (unsigned i = 0; i < n; ++i) {
        auto v = arg(app, i);
        if (!v)
          return std::nullopt;
        args.push_back(*v);
      }
      return apps(name, args);
    }
    switch (dk) {
    case Z3_OP_TRUE: return 1;
    case Z3_OP_FALSE: return 0;
    case Z3_OP_ITE: {
      auto c = arg(app, 0);
      if (!c)
        return std::nullopt;
      return arg(app, *c ? 1 : 2);
    }
    case Z3_OP_AND:
    case Z3_OP_OR: {
      bool isAnd = dk == Z3_OP_AND;
      for (unsigned i = 0; i < n; ++i) {
        auto v = arg(app, i);
        if (!v)
          return std::nullopt;
        if ((*v != 0) != isAnd)
          return isAnd ? 0 : 1; // short circuit
      }
      return isAnd ? 1 : 0;
    }
    case Z3_OP_NOT: {
      auto v = arg(app, 0);
      return v ? std::optional<int64_t>(*v == 0) : std::nullopt;
    }
    case Z3_OP_ADD:
    case Z3_OP_MUL:
    case Z3_OP_SUB: {
      auto acc = arg(app, 0);
      for (unsigned i = 1; acc && i < n; ++i) {
        auto v = arg(app, i);
        if (!v)
          return std::nullopt;
        acc = dk == Z3_OP_ADD ? *acc + *v : dk == Z3_OP_SUB ? *acc - *v : *acc * *v;
      }
      return acc;
    }
    case Z3_OP_UMINUS: {
      auto v = arg(app, 0);
      return v ? std::optional<int64_t>(-*v) : std::nullopt;
    }
    default: break;
    }
    if (n != 2)
      return std::nullopt;
    auto x = arg(app, 0), y = arg(app, 1);
    if (!x || !y)
      return std::nullopt;
    switch (dk) {
    case Z3_OP_IDIV:
    case Z3_OP_DIV: return euclidDiv(*x, *y, false);
    case Z3_OP_MOD: return euclidDiv(*x, *y, true);
    case Z3_OP_REM: return *y == 0 ? std::nullopt : std::optional<int64_t>(*x % *y);
    case Z3_OP_LE: return *x <= *y;
    case Z3_OP_LT: return *x < *y;
    case Z3_OP_GE: return *x >= *y;
    case Z3_OP_GT: return *x > *y;
    case Z3_OP_EQ: return *x == *y;
    case Z3_OP_DISTINCT: return *x != *y;
    case Z3_OP_IMPLIES: return *x == 0 || *y != 0;
    case Z3_OP_XOR: return (*x != 0) != (*y != 0);
    default: return std::nullopt; // an operator our builders never make
    }
  }
};

} // namespace

std::optional<int64_t> Expr::eval(const Env &env, const AppEnv &apps) const {
  if (!isValid())
    return std::nullopt;
  return Walker{env, apps}.go(detail::raw(*this));
}

} // namespace shardproof::smt
