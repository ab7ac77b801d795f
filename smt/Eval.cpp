// Concrete evaluation of Exprs on a compiled form of the Z3 AST: replaying a
// counterexample evaluates millions of index expressions, far too many for
// Z3_simplify (or for asking Z3 about every node each time).
#include "smt/Context.h"
#include "smt/Program.h"
#include "shardproof/smt/Expr.h"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace shardproof::smt {

using detail::ctx;
using detail::raw;

namespace {

// Z3's integer div/mod are Euclidean: a = b*q + r with 0 <= r < |b|. For the
// positive divisors our builders produce this is floor division.
std::optional<int64_t> euclidDiv(int64_t a, int64_t b, bool wantMod) {
  if (b == 0 || b < -(int64_t{1} << 62) || b > (int64_t{1} << 62))
    return std::nullopt; // (a % m) + m below stays inside int64
  int64_t m = b < 0 ? -b : b;
  int64_t r = ((a % m) + m) % m;
  if (wantMod)
    return r;
  int64_t fl = a / m - ((a % m != 0 && a < 0) ? 1 : 0); // floor(a / m), which (a - r) / m is
  if (b < 0 && fl == INT64_MIN)
    return std::nullopt;
  return b > 0 ? fl : -fl;
}

} // namespace

namespace detail {
// An Expr compiled once into a compact tree: evaluating it again walks this
// instead of asking Z3 for every node's kind, arguments and symbol name (a
// replay evaluates the same few index expressions millions of times).
struct Program {
  enum Kind : uint8_t { Num, Var, Fun, Op, Bad };
  struct Node {
    Kind kind = Bad;
    Z3_decl_kind op = Z3_OP_TRUE;
    int64_t value = 0;
    std::string name;       // Var, Fun
    uint32_t slot = 0;      // Var: Expr::slotOf(name)
    uint32_t first = 0, n = 0; // children: kids[first, first + n)
  };
  Expr held; // keeps the AST (and so its id, the cache key) alive
  std::vector<Node> nodes;
  std::vector<uint32_t> kids;

  uint32_t compile(Z3_ast a, std::unordered_map<unsigned, uint32_t> &done) {
    const detail::NodeInfo &info = detail::node(a);
    unsigned id = info.id;
    if (auto it = done.find(id); it != done.end())
      return it->second;
    Node nd;
    std::vector<uint32_t> args;
    Z3_ast_kind k = info.kind;
    if (k == Z3_NUMERAL_AST) {
      if (info.isInt64) {
        nd.kind = Num;
        nd.value = info.value;
      }
    } else if (k == Z3_APP_AST) {
      nd.op = info.op;
      unsigned n = info.numArgs; // `info` is not read past the next node()
      for (unsigned i = 0; i < n; ++i)
        args.push_back(compile(detail::argAt(a, i), done));
      if (nd.op == Z3_OP_UNINTERPRETED) {
        nd.kind = n == 0 ? Var : Fun;
        nd.name = detail::appName(a);
        if (nd.kind == Var)
          nd.slot = Expr::slotOf(nd.name);
      } else {
        nd.kind = Op;
      }
    }
    nd.first = static_cast<uint32_t>(kids.size());
    nd.n = static_cast<uint32_t>(args.size());
    kids.insert(kids.end(), args.begin(), args.end());
    nodes.push_back(std::move(nd));
    uint32_t at = static_cast<uint32_t>(nodes.size() - 1);
    done.emplace(id, at);
    return at;
  }
};

} // namespace detail

namespace {
using detail::Program;

// `Vars` maps a Var node to its value: by name (Expr::Env) or by slot.
template <class Vars> struct Walker {
  const Program &p;
  const Vars &vars;
  const Expr::AppEnv &apps;

  std::optional<int64_t> arg(const Program::Node &nd, unsigned i) { return go(p.kids[nd.first + i]); }

  std::optional<int64_t> go(uint32_t at) {
    const Program::Node &nd = p.nodes[at];
    const unsigned n = nd.n;
    switch (nd.kind) {
    case Program::Num: return nd.value;
    case Program::Var: return vars(nd);
    case Program::Bad: return std::nullopt;
    case Program::Fun: {
      if (!apps)
        return std::nullopt;
      std::vector<int64_t> args;
      for (unsigned i = 0; i < n; ++i) {
        auto v = arg(nd, i);
        if (!v)
          return std::nullopt;
        args.push_back(*v);
      }
      return apps(nd.name, args);
    }
    case Program::Op: break;
    }
    const Z3_decl_kind dk = nd.op;
    switch (dk) {
    case Z3_OP_TRUE: return 1;
    case Z3_OP_FALSE: return 0;
    case Z3_OP_ITE: {
      auto c = arg(nd, 0);
      if (!c)
        return std::nullopt;
      return arg(nd, *c ? 1 : 2);
    }
    case Z3_OP_AND:
    case Z3_OP_OR: {
      bool isAnd = dk == Z3_OP_AND;
      for (unsigned i = 0; i < n; ++i) {
        auto v = arg(nd, i);
        if (!v)
          return std::nullopt;
        if ((*v != 0) != isAnd)
          return isAnd ? 0 : 1; // short circuit
      }
      return isAnd ? 1 : 0;
    }
    case Z3_OP_NOT: {
      auto v = arg(nd, 0);
      return v ? std::optional<int64_t>(*v == 0) : std::nullopt;
    }
    case Z3_OP_ADD:
    case Z3_OP_MUL:
    case Z3_OP_SUB: {
      if (n == 0)
        return std::nullopt;
      auto acc = arg(nd, 0);
      for (unsigned i = 1; acc && i < n; ++i) {
        auto v = arg(nd, i);
        if (!v)
          return std::nullopt;
        // Past int64 the number means nothing: no value (a kept model's
        // evaluation must never read a wrapped sum as true).
        int64_t out;
        if (dk == Z3_OP_ADD ? __builtin_add_overflow(*acc, *v, &out)
                            : dk == Z3_OP_SUB ? __builtin_sub_overflow(*acc, *v, &out)
                                              : __builtin_mul_overflow(*acc, *v, &out))
          return std::nullopt;
        acc = out;
      }
      return acc;
    }
    case Z3_OP_UMINUS: {
      auto v = arg(nd, 0);
      return v && *v != INT64_MIN ? std::optional<int64_t>(-*v) : std::nullopt;
    }
    default: break;
    }
    if (n != 2)
      return std::nullopt;
    auto x = arg(nd, 0), y = arg(nd, 1);
    if (!x || !y)
      return std::nullopt;
    switch (dk) {
    case Z3_OP_IDIV:
    case Z3_OP_DIV: return euclidDiv(*x, *y, false);
    case Z3_OP_MOD: return euclidDiv(*x, *y, true);
    case Z3_OP_REM: return *y == 0 || *y == -1 ? std::nullopt : std::optional<int64_t>(*x % *y);
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

namespace detail {

std::shared_ptr<const Program> compile(const Expr &e) {
  auto p = std::make_shared<Program>();
  p->held = e;
  std::unordered_map<unsigned, uint32_t> done;
  p->compile(raw(e), done);
  return p;
}

std::optional<int64_t> run(const Program &p, const Expr::Env &env, const Expr::AppEnv &apps) {
  auto byName = [&](const Program::Node &nd) { return env(nd.name); };
  return Walker<decltype(byName)>{p, byName, apps}.go(static_cast<uint32_t>(p.nodes.size() - 1)); // the root is compiled last
}

} // namespace detail

namespace {

// Programs of small expressions by AST id, per thread (each holds its Expr,
// so ids stay unique). Large ones (whole queries) are compiled each time and
// not kept: they are many, and kept they held every query's AST alive.
// Cleared when full: the index expressions of one replay are few.
const Program *programOf(const Expr &e, std::shared_ptr<const Program> &oneOff) {
  static thread_local std::unordered_map<unsigned, std::shared_ptr<const Program>> cache;
  // In front of it, the last program seen in each of a few slots by id: a
  // replay reads the same few index expressions over and over, and the hash
  // lookup was a sixth of its time. A slot holds a program the map holds too
  // (cleared together), so an id there is still that program's.
  struct Slot {
    unsigned id = 0;
    const Program *program = nullptr;
  };
  static constexpr size_t kSlots = 1024;
  static thread_local std::vector<Slot> slots(kSlots);
  static constexpr size_t kMaxPrograms = 8192, kMaxKeptNodes = 256;
  unsigned id = e.id();
  Slot &slot = slots[id % kSlots];
  if (slot.program && slot.id == id)
    return slot.program;
  if (auto it = cache.find(id); it != cache.end()) {
    slot = {id, it->second.get()};
    return slot.program;
  }
  oneOff = detail::compile(e);
  if (oneOff->nodes.size() > kMaxKeptNodes)
    return oneOff.get();
  if (cache.size() >= kMaxPrograms) {
    cache.clear();
    slots.assign(kSlots, Slot{});
  }
  slot = {id, oneOff.get()};
  return (cache[id] = oneOff).get();
}

} // namespace

std::optional<int64_t> Expr::eval(const Env &env, const AppEnv &apps) const {
  if (!isValid())
    return std::nullopt;
  std::shared_ptr<const Program> oneOff;
  return detail::run(*programOf(*this, oneOff), env, apps);
}

uint32_t Expr::slotOf(const std::string &name) {
  // Programs compile on several threads (check --jobs): the table is shared.
  static std::mutex m;
  static std::unordered_map<std::string, uint32_t> slots;
  std::lock_guard<std::mutex> lock(m);
  return slots.try_emplace(name, static_cast<uint32_t>(slots.size())).first->second;
}

std::optional<int64_t> Expr::evalSlots(const Slots &slots, const AppEnv &apps, bool unknownAsZero) const {
  if (!isValid())
    return std::nullopt;
  std::shared_ptr<const Program> oneOff;
  const Program &p = *programOf(*this, oneOff);
  auto bySlot = [&](const Program::Node &nd) -> std::optional<int64_t> {
    int64_t v = nd.slot < slots.size() ? slots[nd.slot] : kUnset;
    if (v != kUnset)
      return v;
    return unknownAsZero ? std::optional<int64_t>(0) : std::nullopt;
  };
  return Walker<decltype(bySlot)>{p, bySlot, apps}.go(static_cast<uint32_t>(p.nodes.size() - 1));
}

} // namespace shardproof::smt
