#include "shardproof/smt/Expr.h"
#include "smt/Context.h"
#include "smt/Poly.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <unordered_set>
#include <unordered_map>
#include <sstream>

namespace shardproof::smt {
namespace detail {

static bool memoryOut_ = false;
bool memoryOut() { return memoryOut_; }
void resetMemoryOut() { memoryOut_ = false; }

static void onZ3Error(Z3_context c, Z3_error_code e) {
  // Running out of the memory the user allowed is a limit, not a bug: the
  // query answers Unknown (Solver::run) and a builder returns an invalid Expr.
  if (e == Z3_MEMOUT_FAIL) {
    memoryOut_ = true;
    return;
  }
  // Builders are called with well-sorted arguments; a Z3 error here is a bug in shardproof.
  std::fprintf(stderr, "shardproof: internal error: Z3: %s\n", Z3_get_error_msg(c, e));
  std::exit(4);
}

std::atomic<Z3_context> theContext{nullptr};

Z3_context makeContext() {
  static Z3_context c = [] {
    Z3_config cfg = Z3_mk_config();
    Z3_set_param_value(cfg, "model", "true");
    Z3_context c = Z3_mk_context_rc(cfg);
    Z3_del_config(cfg);
    Z3_set_error_handler(c, onZ3Error);
    theContext.store(c, std::memory_order_release);
    return c;
  }();
  return c;
}
Z3_sort intSort() {
  static Z3_sort s = [] { Z3_sort s = Z3_mk_int_sort(ctx()); Z3_inc_ref(ctx(), Z3_sort_to_ast(ctx(), s)); return s; }();
  return s;
}
Z3_sort boolSort() {
  static Z3_sort s = [] { Z3_sort s = Z3_mk_bool_sort(ctx()); Z3_inc_ref(ctx(), Z3_sort_to_ast(ctx(), s)); return s; }();
  return s;
}

NodeInfo *theNodeCache = nullptr;

NodeInfo &fillNode(NodeInfo &slot, Z3_ast a) {
  Z3_context c = ctx();
  Z3_inc_ref(c, a);
  if (slot.ast)
    Z3_dec_ref(c, slot.ast); // after the inc: `a` may be a descendant of it
  NodeInfo n;
  n.ast = a;
  n.id = Z3_get_ast_id(c, a);
  n.kind = Z3_get_ast_kind(c, a);
  if (n.kind == Z3_APP_AST || n.kind == Z3_NUMERAL_AST || n.kind == Z3_VAR_AST || n.kind == Z3_QUANTIFIER_AST)
    n.sort = Z3_get_sort_kind(c, Z3_get_sort(c, a));
  if (n.kind == Z3_NUMERAL_AST)
    n.isInt64 = Z3_get_numeral_int64(c, a, &n.value);
  if (n.kind == Z3_APP_AST || n.kind == Z3_NUMERAL_AST) {
    Z3_app app = Z3_to_app(c, a);
    n.numArgs = Z3_get_app_num_args(c, app);
    if (n.kind == Z3_APP_AST)
      n.op = Z3_get_decl_kind(c, Z3_get_app_decl(c, app));
    for (unsigned i = 0; i < n.numArgs && i < NodeInfo::kInlineArgs; ++i)
      n.args[i] = Z3_get_app_arg(c, app, i);
  }
  slot = n;
  return slot;
}

void clearNodeCache() {
  if (!theNodeCache) {
    theNodeCache = new NodeInfo[size_t{1} << kNodeCacheBits]; // never freed: outlives every Expr
    return;
  }
  for (size_t i = 0; i < (size_t{1} << kNodeCacheBits); ++i)
    if (theNodeCache[i].ast) {
      Z3_dec_ref(ctx(), theNodeCache[i].ast);
      theNodeCache[i] = NodeInfo();
    }
}
} // namespace detail

using detail::ctx;

Expr::Expr(_Z3_ast *a) : ast_(a) {
  if (ast_)
    Z3_inc_ref(ctx(), ast_);
}

Expr::Expr(const Expr &o) : ast_(o.ast_) {
  if (ast_)
    Z3_inc_ref(ctx(), ast_);
}
Expr &Expr::operator=(const Expr &o) {
  if (o.ast_)
    Z3_inc_ref(ctx(), o.ast_);
  if (ast_)
    Z3_dec_ref(ctx(), ast_);
  ast_ = o.ast_;
  return *this;
}
Expr &Expr::operator=(Expr &&o) noexcept {
  if (this != &o) {
    if (ast_)
      Z3_dec_ref(ctx(), ast_);
    ast_ = o.ast_;
    o.ast_ = nullptr;
  }
  return *this;
}
Expr::~Expr() {
  if (ast_)
    Z3_dec_ref(ctx(), ast_);
}

Expr Expr::intConst(int64_t v) { return Expr(Z3_mk_int64(ctx(), v, detail::intSort())); }
Expr Expr::intVar(const std::string &name) {
  return Expr(Z3_mk_const(ctx(), Z3_mk_string_symbol(ctx(), name.c_str()), detail::intSort()));
}
Expr Expr::boolConst(bool b) { return Expr(b ? Z3_mk_true(ctx()) : Z3_mk_false(ctx())); }
Expr Expr::boolVar(const std::string &name) {
  return Expr(Z3_mk_const(ctx(), Z3_mk_string_symbol(ctx(), name.c_str()), detail::boolSort()));
}

Expr Expr::app(const std::string &fn, const std::vector<Expr> &args) {
  std::vector<Z3_sort> domain(args.size(), detail::intSort());
  std::vector<Z3_ast> raw;
  for (auto &a : args) {
    if (!a.isValid())
      return Expr();
    raw.push_back(detail::raw(a));
  }
  Z3_func_decl f = Z3_mk_func_decl(ctx(), Z3_mk_string_symbol(ctx(), fn.c_str()), static_cast<unsigned>(args.size()),
                                   domain.data(), detail::intSort());
  return Expr(Z3_mk_app(ctx(), f, static_cast<unsigned>(raw.size()), raw.data()));
}

Expr Expr::forall(const std::vector<Expr> &vars, const Expr &body) {
  if (!body.isValid())
    return Expr();
  if (vars.empty())
    return body;
  std::vector<Z3_app> bound;
  for (auto &v : vars)
    bound.push_back(Z3_to_app(ctx(), detail::raw(v)));
  return Expr(Z3_mk_forall_const(ctx(), 0, static_cast<unsigned>(bound.size()), bound.data(), 0, nullptr, detail::raw(body)));
}

static bool hasAppIn(Z3_ast a, int depth) {
  const detail::NodeInfo &nd = detail::node(a);
  if (nd.kind != Z3_APP_AST || depth > 256)
    return false;
  unsigned n = nd.numArgs;
  if (n > 0 && nd.op == Z3_OP_UNINTERPRETED)
    return true;
  for (unsigned i = 0; i < n; ++i)
    if (hasAppIn(detail::argAt(a, i), depth + 1))
      return true;
  return false;
}

bool Expr::hasApp() const { return ast_ && hasAppIn(ast_, 0); }

// Walks shared subterms once (terms are DAGs) and into quantifier bodies (a
// value range's forall applies its function there).
// The context is passed down: read once per walk, not once per node.
static void collectFunctions(Z3_context c, Z3_ast a, detail::AstIdSet &seen, std::map<std::string, unsigned> &out) {
  const detail::NodeInfo &nd = detail::node(a);
  if (!seen.insert(nd.id).second)
    return;
  Z3_ast_kind kind = nd.kind;
  if (kind == Z3_QUANTIFIER_AST)
    return collectFunctions(c, Z3_get_quantifier_body(c, a), seen, out);
  unsigned n = nd.numArgs;
  if (kind != Z3_APP_AST || n == 0)
    return;
  if (nd.op == Z3_OP_UNINTERPRETED)
    out.emplace(detail::appName(a), n);
  for (unsigned i = 0; i < n; ++i)
    collectFunctions(c, detail::argAt(a, i), seen, out);
}

std::map<std::string, unsigned> Expr::functions() const {
  std::map<std::string, unsigned> out;
  detail::AstIdSet seen;
  if (ast_)
    collectFunctions(ctx(), ast_, seen, out);
  return out;
}

// A node's degree is kept with its cached answers (Context.h): the solver
// asks it of every query, and queries share most of their subterms. `memo`
// keeps the walk linear in the DAG where the cache lost an answer.
static unsigned degreeOf(Z3_ast a, detail::AstIdMap<unsigned> &memo) {
  constexpr unsigned kCap = 1000;
  unsigned n;
  Z3_decl_kind k;
  {
    const detail::NodeInfo &nd = detail::node(a);
    if (nd.kind != Z3_APP_AST)
      return 0; // numerals, bound variables, quantifiers' bodies are not walked
    if (nd.degree != detail::NodeInfo::kNoDegree)
      return nd.degree;
    if (auto it = memo.find(nd.id); it != memo.end())
      return it->second;
    n = nd.numArgs;
    k = nd.op;
  }
  unsigned d = 0;
  if (n == 0) {
    d = k == Z3_OP_UNINTERPRETED ? 1 : 0; // a variable, or a constant
  } else if (k == Z3_OP_MUL) {
    for (unsigned i = 0; i < n; ++i)
      d = std::min(kCap, d + degreeOf(detail::argAt(a, i), memo));
  } else if (k == Z3_OP_POWER) {
    Z3_ast exp = detail::argAt(a, 1);
    unsigned base = degreeOf(detail::argAt(a, 0), memo);
    const detail::NodeInfo &e = detail::node(exp);
    d = e.isInt64 && e.value >= 0 ? static_cast<unsigned>(std::min<int64_t>(kCap, int64_t(base) * e.value)) : kCap;
  } else {
    for (unsigned i = 0; i < n; ++i)
      d = std::max(d, degreeOf(detail::argAt(a, i), memo));
  }
  if (detail::NodeInfo &s = detail::nodeSlot(a); s.ast == a)
    s.degree = static_cast<uint16_t>(d);
  else
    memo[detail::astId(a)] = d;
  return d;
}

unsigned Expr::degree() const {
  detail::AstIdMap<unsigned> memo;
  return ast_ ? degreeOf(ast_, memo) : 0;
}

std::optional<std::pair<std::string, std::vector<Expr>>> Expr::asApp() const {
  if (!ast_ || !detail::isApp(ast_))
    return std::nullopt;
  Z3_app app = Z3_to_app(ctx(), ast_);
  Z3_func_decl d = Z3_get_app_decl(ctx(), app);
  unsigned n = Z3_get_app_num_args(ctx(), app);
  if (n == 0 || Z3_get_decl_kind(ctx(), d) != Z3_OP_UNINTERPRETED)
    return std::nullopt;
  std::vector<Expr> args;
  for (unsigned i = 0; i < n; ++i)
    args.push_back(Expr(Z3_get_app_arg(ctx(), app, i)));
  return std::make_pair(std::string(Z3_get_symbol_string(ctx(), Z3_get_decl_name(ctx(), d))), args);
}

bool Expr::isInt() const { return ast_ && detail::node(ast_).sort == Z3_INT_SORT; }
bool Expr::isBool() const { return ast_ && detail::node(ast_).sort == Z3_BOOL_SORT; }

std::optional<int64_t> Expr::asInt() const {
  if (!ast_)
    return std::nullopt;
  const detail::NodeInfo &n = detail::node(ast_);
  return n.isInt64 ? std::optional<int64_t>(n.value) : std::nullopt;
}


std::optional<bool> Expr::asBool() const {
  if (!ast_)
    return std::nullopt;
  switch (detail::kindOf(ast_)) {
  case Z3_OP_TRUE: return true;
  case Z3_OP_FALSE: return false;
  default: return std::nullopt;
  }
}

std::optional<std::string> Expr::asVar() const {
  if (!ast_ || !detail::isNamedConst(ast_))
    return std::nullopt;
  return detail::appName(ast_);
}

unsigned Expr::id() const { return ast_ ? detail::astId(ast_) : 0; }

static void collectVars(Z3_ast a, std::set<std::string> &out, std::set<unsigned> &seen) {
  if (!seen.insert(detail::astId(a)).second || !detail::isApp(a))
    return;
  if (detail::isNamedConst(a)) {
    out.insert(detail::appName(a));
    return;
  }
  for (unsigned i = 0, n = detail::node(a).numArgs; i < n; ++i)
    collectVars(detail::argAt(a, i), out, seen);
}

std::vector<std::string> Expr::vars() const {
  std::set<std::string> out;
  std::set<unsigned> seen;
  if (ast_)
    collectVars(ast_, out, seen);
  return {out.begin(), out.end()};
}

// By the name's symbol (Z3 interns symbols), stopping at the first hit: no
// set of every name (the world build asks this of each class definition, per axis).
static bool mentionsSymbol(Z3_ast a, Z3_symbol name, detail::AstIdSet &seen) {
  if (!detail::isApp(a))
    return false;
  if (detail::isNamedConst(a))
    return Z3_get_decl_name(ctx(), detail::declOf(a)) == name;
  unsigned n = detail::node(a).numArgs;
  if (n == 0 || !seen.insert(detail::astId(a)).second)
    return false;
  for (unsigned i = 0; i < n; ++i)
    if (mentionsSymbol(detail::argAt(a, i), name, seen))
      return true;
  return false;
}

bool Expr::mentions(const std::string &var) const {
  if (!ast_)
    return false;
  detail::AstIdSet seen;
  return mentionsSymbol(ast_, Z3_mk_string_symbol(ctx(), var.c_str()), seen);
}

// Does `name` occur in an argument of an uninterpreted function application
// under `a`?
static bool readsWithSymbol(Z3_ast a, Z3_symbol name, detail::AstIdSet &seen,
                            detail::AstIdSet &inArgs) {
  if (!detail::isApp(a) || detail::isNamedConst(a))
    return false;
  unsigned n = detail::node(a).numArgs;
  if (n == 0 || !seen.insert(detail::astId(a)).second)
    return false;
  bool uf = detail::node(a).op == Z3_OP_UNINTERPRETED;
  for (unsigned i = 0; i < n; ++i) {
    Z3_ast arg = detail::argAt(a, i);
    if (uf ? mentionsSymbol(arg, name, inArgs) : readsWithSymbol(arg, name, seen, inArgs))
      return true;
  }
  return false;
}

bool Expr::mentionsInApplication(const std::string &var) const {
  if (!ast_)
    return false;
  detail::AstIdSet seen, inArgs;
  return readsWithSymbol(ast_, Z3_mk_string_symbol(ctx(), var.c_str()), seen, inArgs);
}

Expr Expr::substitute(const std::vector<Expr> &from, const std::vector<Expr> &to) const {
  if (!ast_ || from.empty())
    return *this;
  std::vector<Z3_ast> f, t;
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    if (!from[i].isValid() || !to[i].isValid())
      return Expr();
    f.push_back(detail::raw(from[i]));
    t.push_back(detail::raw(to[i]));
  }
  return Expr(Z3_substitute(ctx(), ast_, static_cast<unsigned>(f.size()), f.data(), t.data()));
}

static std::vector<Z3_ast> argsOf(Z3_ast a) {
  std::vector<Z3_ast> out;
  for (unsigned i = 0, n = detail::node(a).numArgs; i < n; ++i)
    out.push_back(detail::argAt(a, i));
  return out;
}

std::optional<std::pair<int64_t, Expr>> Expr::affineIn(const std::string &var) const {
  if (!ast_)
    return std::nullopt;
  Expr s = simplify();
  auto term = [&](Z3_ast t, int64_t &coef) -> int { // 1: var term, 0: free of var, -1: other
    Expr e(t);
    if (!e.mentions(var))
      return 0;
    if (auto n = e.asVar(); n && *n == var) {
      coef = 1;
      return 1;
    }
    if (detail::kindOf(t) == Z3_OP_MUL) {
      auto as = argsOf(t);
      if (as.size() == 2) {
        auto c = Expr(as[0]).asInt();
        auto v = Expr(as[1]).asVar();
        if (c && v && *v == var) {
          coef = *c;
          return 1;
        }
      }
    }
    return -1;
  };
  int64_t coef = 0;
  if (detail::kindOf(detail::raw(s)) == Z3_OP_ADD) {
    int64_t total = 0;
    Expr rest = Expr::intConst(0);
    for (Z3_ast t : argsOf(detail::raw(s))) {
      int64_t c = 0;
      int k = term(t, c);
      if (k < 0)
        return std::nullopt;
      if (k == 1)
        total += c;
      else
        rest = rest + Expr(t);
    }
    return std::make_pair(total, rest.simplify());
  }
  int k = term(detail::raw(s), coef);
  if (k < 0)
    return std::nullopt;
  if (k == 0)
    return std::make_pair<int64_t, Expr>(0, Expr(s));
  return std::make_pair<int64_t, Expr>(std::move(coef), Expr::intConst(0));
}

std::optional<std::tuple<Expr::Cmp, Expr, Expr>> Expr::asCmp() const {
  if (!ast_ || !detail::isApp(ast_))
    return std::nullopt;
  Cmp k;
  switch (detail::kindOf(ast_)) {
  case Z3_OP_LT: k = Cmp::LT; break;
  case Z3_OP_LE: k = Cmp::LE; break;
  case Z3_OP_GT: k = Cmp::GT; break;
  case Z3_OP_GE: k = Cmp::GE; break;
  case Z3_OP_EQ: k = Cmp::EQ; break;
  default: return std::nullopt;
  }
  auto as = argsOf(ast_);
  if (as.size() != 2 || !Expr(as[0]).isInt())
    return std::nullopt;
  return std::make_tuple(k, Expr(as[0]), Expr(as[1]));
}

std::optional<Expr> Expr::asNot() const {
  if (!ast_ || detail::kindOf(ast_) != Z3_OP_NOT)
    return std::nullopt;
  return Expr(argsOf(ast_)[0]);
}

std::optional<std::tuple<Expr, Expr, Expr>> Expr::asIte() const {
  if (!ast_ || detail::kindOf(ast_) != Z3_OP_ITE)
    return std::nullopt;
  auto a = argsOf(ast_);
  return std::make_tuple(Expr(a[0]), Expr(a[1]), Expr(a[2]));
}

std::optional<Expr> Expr::findIntIte() const {
  if (!ast_)
    return std::nullopt;
  std::set<unsigned> seen;
  std::vector<Z3_ast> todo{ast_};
  while (!todo.empty()) {
    Z3_ast a = todo.back();
    todo.pop_back();
    if (!detail::isApp(a) || !seen.insert(detail::astId(a)).second)
      continue;
    if (detail::kindOf(a) == Z3_OP_ITE && detail::node(a).sort == Z3_INT_SORT)
      return Expr(a);
    auto args = argsOf(a);
    for (size_t i = args.size(); i-- > 0;)
      todo.push_back(args[i]);
  }
  return std::nullopt;
}

static bool isIntComparison(Z3_ast a) {
  switch (detail::kindOf(a)) {
  case Z3_OP_LE: case Z3_OP_LT: case Z3_OP_GE: case Z3_OP_GT: case Z3_OP_EQ: case Z3_OP_DISTINCT: {
    auto args = argsOf(a);
    return !args.empty() && detail::node(args[0]).sort == Z3_INT_SORT;
  }
  default: return false;
  }
}

std::optional<Expr> Expr::findAtom() const {
  if (!ast_ || isIntComparison(ast_))
    return std::nullopt;
  if (auto n = asNot(); n && isIntComparison(detail::raw(*n)))
    return std::nullopt;
  std::vector<Z3_ast> todo{ast_};
  while (!todo.empty()) {
    Z3_ast a = todo.back();
    todo.pop_back();
    if (isIntComparison(a))
      return Expr(a);
    switch (detail::kindOf(a)) {
    case Z3_OP_AND: case Z3_OP_OR: case Z3_OP_NOT: case Z3_OP_IMPLIES: case Z3_OP_IFF: case Z3_OP_XOR:
    case Z3_OP_EQ: case Z3_OP_ITE: {
      auto args = argsOf(a);
      for (size_t i = args.size(); i-- > 0;)
        if (Z3_get_sort_kind(ctx(), Z3_get_sort(ctx(), args[i])) == Z3_BOOL_SORT)
          todo.push_back(args[i]);
      break;
    }
    default: break;
    }
  }
  return std::nullopt;
}

std::vector<Expr> Expr::conjuncts() const {
  if (!ast_)
    return {};
  if (detail::kindOf(ast_) != Z3_OP_AND)
    return {*this};
  std::vector<Expr> out;
  for (Z3_ast a : argsOf(ast_))
    out.push_back(Expr(a));
  return out;
}

// --- Builders with constant folding -------------------------------------------

static bool bothValid(const Expr &a, const Expr &b) { return a.isValid() && b.isValid(); }

// Folding on int64_t must not overflow (undefined behaviour, and a wrapped
// value would be a wrong size): each folder reports whether the exact result
// fits; if not, the builder leaves the operation to Z3's unbounded integers.
static bool foldAdd(int64_t a, int64_t b, int64_t &r) { return !__builtin_add_overflow(a, b, &r); }
static bool foldSub(int64_t a, int64_t b, int64_t &r) { return !__builtin_sub_overflow(a, b, &r); }
static bool foldMul(int64_t a, int64_t b, int64_t &r) { return !__builtin_mul_overflow(a, b, &r); }
// Floor division and modulo (b != 0). Only INT64_MIN / -1 does not fit.
static bool foldFloorDiv(int64_t a, int64_t b, int64_t &r) {
  if (a == INT64_MIN && b == -1)
    return false;
  r = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
  return true;
}
static bool foldFloorMod(int64_t a, int64_t b, int64_t &r) {
  if (b == -1) { // a % -1 is 0, but INT64_MIN % -1 is undefined in C++
    r = 0;
    return true;
  }
  r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b; // opposite signs: cannot overflow
  return true;
}

// Whether `m` is -1 * x (x the same AST as `x`).
static bool isMinus(const Expr &m, const Expr &x) {
  Z3_ast t = detail::raw(m);
  return detail::kindOf(t) == Z3_OP_MUL && detail::numArgs(t) == 2 && detail::argOf(t, 0).asInt() == -1 &&
         detail::argOf(t, 1).same(x);
}

Expr operator+(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (int64_t r; x && y && foldAdd(*x, *y, r))
    return Expr::intConst(r);
  if (x && *x == 0)
    return b;
  if (y && *y == 0)
    return a;
  // a + -1*a prints as `a - a`, which a - b folds to 0: so does this, or a
  // rendered expression would read back as another (spec relations must
  // render to text that parses to the same rendering).
  if (isMinus(b, a) || isMinus(a, b))
    return Expr::intConst(0);
  Z3_ast args[2] = {detail::raw(a), detail::raw(b)};
  return detail::fromRaw(Z3_mk_add(ctx(), 2, args));
}
Expr operator-(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (int64_t r; x && y && foldSub(*x, *y, r))
    return Expr::intConst(r);
  if (y && *y == 0)
    return a;
  if (a.same(b))
    return Expr::intConst(0);
  Z3_ast args[2] = {detail::raw(a), detail::raw(b)};
  return detail::fromRaw(Z3_mk_sub(ctx(), 2, args));
}
Expr operator-(const Expr &a) { return Expr::intConst(0) - a; }
Expr operator*(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (int64_t r; x && y && foldMul(*x, *y, r))
    return Expr::intConst(r);
  if ((x && *x == 0) || (y && *y == 0))
    return Expr::intConst(0);
  if (x && *x == 1)
    return b;
  if (y && *y == 1)
    return a;
  Z3_ast args[2] = {detail::raw(a), detail::raw(b)};
  return detail::fromRaw(Z3_mk_mul(ctx(), 2, args));
}
Expr floorDiv(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (y && *y == 0)
    return Expr(); // division by zero is a bug in the caller's obligations
  if (int64_t r; x && y && foldFloorDiv(*x, *y, r))
    return Expr::intConst(r);
  if (y && *y == 1)
    return a;
  // (b*s*32) div (b*s) is 32: cancelled before Z3 rewrites it with zero guards.
  if (auto q = dividePolynomial(a, b, false))
    return *q;
  // Z3's div is Euclidean; it agrees with floor division for positive divisors.
  return detail::fromRaw(Z3_mk_div(ctx(), detail::raw(a), detail::raw(b)));
}
Expr mod(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (y && *y == 0)
    return Expr();
  if (int64_t r; x && y && foldFloorMod(*x, *y, r))
    return Expr::intConst(r);
  if (y && *y == 1)
    return Expr::intConst(0);
  if (auto r = dividePolynomial(a, b, true))
    return *r;
  return detail::fromRaw(Z3_mk_mod(ctx(), detail::raw(a), detail::raw(b)));
}
Expr ceilDiv(const Expr &a, const Expr &b) { return floorDiv(a + b - Expr::intConst(1), b); }

// Z3's own (Euclidean) div and mod: a = b*q + r with 0 <= r < |b|, folded the
// same way on numerals.
static Expr euclid(const Expr &a, const Expr &b, bool wantMod) {
  auto x = a.asInt(), y = b.asInt();
  if (x && y && *y != 0 && *y != INT64_MIN) {
    int64_t m = *y < 0 ? -*y : *y;
    int64_t r = *x % m, d;
    if (r < 0)
      r += m;
    if (wantMod)
      return Expr::intConst(r);
    if (!__builtin_sub_overflow(*x, r, &d) && !(d == INT64_MIN && *y == -1))
      return Expr::intConst(d / *y);
  }
  return detail::fromRaw(wantMod ? Z3_mk_mod(ctx(), detail::raw(a), detail::raw(b)) : Z3_mk_div(ctx(), detail::raw(a), detail::raw(b)));
}

static bool divisorUsable(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return false;
  auto y = b.asInt();
  return !(y && *y == 0);
}

Expr truncDiv(const Expr &a, const Expr &b, bool aNonNegative) {
  if (!divisorUsable(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (x && y && !(*x == INT64_MIN && *y == -1))
    return Expr::intConst(*x / *y); // C++ division truncates
  if (y && *y == 1)
    return a;
  // a >= 0: Euclid's q is trunc(a / b) for either sign of b; a < 0: -trunc(-a / b).
  if (aNonNegative || (x && *x >= 0))
    return euclid(a, b, false);
  Expr zero = Expr::intConst(0);
  return ite(a >= zero, euclid(a, b, false), -euclid(-a, b, false));
}

Expr truncMod(const Expr &a, const Expr &b, bool aNonNegative) {
  if (!divisorUsable(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (x && y)
    return Expr::intConst(*y == -1 ? 0 : *x % *y); // C++ % has the dividend's sign
  if (aNonNegative || (x && *x >= 0))
    return euclid(a, b, true);
  Expr zero = Expr::intConst(0);
  return ite(a >= zero, euclid(a, b, true), -euclid(-a, b, true));
}

Expr floorModSigned(const Expr &a, const Expr &b, bool aNonNegative) {
  (void)aNonNegative; // the divisor's sign decides, not the dividend's
  if (!divisorUsable(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (int64_t r; x && y && foldFloorMod(*x, *y, r))
    return Expr::intConst(r);
  // Euclid's r is in [0, |b|): the answer for b > 0; for b < 0, r + b unless r is 0.
  Expr r = euclid(a, b, true), zero = Expr::intConst(0);
  Expr negative = ite(r == zero, zero, r + b);
  if (y)
    return *y > 0 ? r : negative;
  return ite(b > zero, r, negative);
}
Expr min(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (x && y)
    return Expr::intConst(std::min(*x, *y));
  if (a.same(b))
    return a;
  return ite(a <= b, a, b);
}
Expr max(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (x && y)
    return Expr::intConst(std::max(*x, *y));
  if (a.same(b))
    return a;
  return ite(a >= b, a, b);
}
Expr operator+(const Expr &a, int64_t b) { return a + Expr::intConst(b); }
Expr operator-(const Expr &a, int64_t b) { return a - Expr::intConst(b); }
Expr operator*(const Expr &a, int64_t b) { return a * Expr::intConst(b); }

template <typename F, typename Mk>
static Expr compare(const Expr &a, const Expr &b, F fold, Mk mk) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asInt(), y = b.asInt();
  if (x && y)
    return Expr::boolConst(fold(*x, *y));
  return detail::fromRaw(mk(ctx(), detail::raw(a), detail::raw(b)));
}

Expr operator==(const Expr &a, const Expr &b) {
  if (bothValid(a, b) && a.same(b))
    return Expr::boolConst(true);
  if (bothValid(a, b) && a.isBool()) {
    auto x = a.asBool(), y = b.asBool();
    if (x && y)
      return Expr::boolConst(*x == *y);
  }
  return compare(a, b, [](int64_t x, int64_t y) { return x == y; }, Z3_mk_eq);
}
Expr operator!=(const Expr &a, const Expr &b) { return !(a == b); }
Expr operator<(const Expr &a, const Expr &b) {
  if (bothValid(a, b) && a.same(b))
    return Expr::boolConst(false);
  return compare(a, b, [](int64_t x, int64_t y) { return x < y; }, Z3_mk_lt);
}
Expr operator<=(const Expr &a, const Expr &b) {
  if (bothValid(a, b) && a.same(b))
    return Expr::boolConst(true);
  return compare(a, b, [](int64_t x, int64_t y) { return x <= y; }, Z3_mk_le);
}
Expr operator>(const Expr &a, const Expr &b) { return b < a; }
Expr operator>=(const Expr &a, const Expr &b) { return b <= a; }

Expr operator&&(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asBool(), y = b.asBool();
  if ((x && !*x) || (y && !*y))
    return Expr::boolConst(false);
  if (x)
    return b;
  if (y)
    return a;
  if (a.same(b))
    return a;
  Z3_ast args[2] = {detail::raw(a), detail::raw(b)};
  return detail::fromRaw(Z3_mk_and(ctx(), 2, args));
}
Expr operator||(const Expr &a, const Expr &b) {
  if (!bothValid(a, b))
    return Expr();
  auto x = a.asBool(), y = b.asBool();
  if ((x && *x) || (y && *y))
    return Expr::boolConst(true);
  if (x)
    return b;
  if (y)
    return a;
  if (a.same(b))
    return a;
  Z3_ast args[2] = {detail::raw(a), detail::raw(b)};
  return detail::fromRaw(Z3_mk_or(ctx(), 2, args));
}
Expr operator!(const Expr &a) {
  if (!a.isValid())
    return Expr();
  if (auto x = a.asBool())
    return Expr::boolConst(!*x);
  if (detail::kindOf(detail::raw(a)) == Z3_OP_NOT)
    return detail::fromRaw(argsOf(detail::raw(a))[0]);
  return detail::fromRaw(Z3_mk_not(ctx(), detail::raw(a)));
}
Expr implies(const Expr &a, const Expr &b) { return !a || b; }
Expr ite(const Expr &c, const Expr &t, const Expr &e) {
  if (!c.isValid() || !bothValid(t, e))
    return Expr();
  if (auto x = c.asBool())
    return *x ? t : e;
  if (t.same(e))
    return t;
  return detail::fromRaw(Z3_mk_ite(ctx(), detail::raw(c), detail::raw(t), detail::raw(e)));
}
Expr conj(const std::vector<Expr> &xs) {
  Expr r = Expr::boolConst(true);
  for (auto &x : xs)
    r = r && x;
  return r;
}
Expr disj(const std::vector<Expr> &xs) {
  Expr r = Expr::boolConst(false);
  for (auto &x : xs)
    r = r || x;
  return r;
}
Expr inRange(const Expr &x, const Expr &lo, const Expr &hi) { return lo <= x && x < hi; }

} // namespace shardproof::smt
