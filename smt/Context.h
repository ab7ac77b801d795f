// Internal to smt/: the Z3 context shared by every Expr. Not a public header.
#pragma once

#include "shardproof/smt/Expr.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <z3.h>

#include <atomic>
#include <cstdint>

namespace shardproof::smt::detail {
/// Ids of the ASTs a formula walk has seen (ids are small and dense, walks
/// short: inline buckets, no node per insert as std::unordered_set has).
using AstIdSet = llvm::SmallDenseSet<unsigned, 32>;
template <class V> using AstIdMap = llvm::SmallDenseMap<unsigned, V, 32>;
/// The context, once made (makeContext). Read inline: every step of every
/// formula walk asks for it (a call and a guarded static were 2% of a check).
extern std::atomic<Z3_context> theContext;
Z3_context makeContext();
inline Z3_context ctx() {
  Z3_context c = theContext.load(std::memory_order_acquire);
  return c ? c : makeContext();
}
Z3_sort intSort();
Z3_sort boolSort();
/// Set when Z3 reported running out of the memory it was allowed (see
/// Solver::setMemoryLimitMb): the builder or query that hit it is invalid.
bool memoryOut();
void resetMemoryOut();

/// What formula walks ask of a Z3 node, read once. Each Z3 C API call costs
/// 30 to 100 instructions (argument checks, the log hook; the kind of an
/// application looks up its sort), and the cheap proofs, the simplifier and
/// the evaluator walk the same hash-consed formulas again and again: these
/// calls were a fifth of a check. A direct-mapped cache of the answers: a
/// slot holds a reference to its node, so while it is cached no other node
/// can have its address, and a node never changes.
struct NodeInfo {
  Z3_ast ast = nullptr;
  unsigned id = 0;
  Z3_ast_kind kind = Z3_UNKNOWN_AST;
  Z3_decl_kind op = Z3_OP_UNINTERPRETED; // of an application; UNINTERPRETED otherwise
  Z3_sort_kind sort = Z3_UNKNOWN_SORT;   // of an expression (not a quantifier's body)
  unsigned numArgs = 0;                  // of an application
  bool isInt64 = false;                  // a numeral that fits int64_t: value
  int8_t divMod = -1;                    // hasDivMod: unknown (-1), no, yes
  static constexpr uint16_t kNoDegree = 0xFFFF;
  uint16_t degree = kNoDegree;           // Expr::degree, once asked
  int64_t value = 0;
  static constexpr unsigned kInlineArgs = 3;
  Z3_ast args[kInlineArgs] = {};         // the first arguments
};
constexpr unsigned kNodeCacheBits = 16;
extern NodeInfo *theNodeCache; // 2^kNodeCacheBits slots, made on first use
NodeInfo &fillNode(NodeInfo &slot, Z3_ast a);
void clearNodeCache();
inline NodeInfo &nodeSlot(Z3_ast a) {
  auto h = (reinterpret_cast<uintptr_t>(a) * 0x9E3779B97F4A7C15ULL) >> (64 - kNodeCacheBits);
  if (!theNodeCache)
    clearNodeCache(); // allocates the table
  return theNodeCache[h];
}
/// The node's answers; the reference is good until the next node() call.
inline const NodeInfo &node(Z3_ast a) {
  NodeInfo &s = nodeSlot(a);
  return s.ast == a ? s : fillNode(s, a);
}
inline bool isApp(Z3_ast a) { return node(a).kind == Z3_APP_AST; }
inline unsigned astId(Z3_ast a) { return node(a).id; }
/// Argument i of an application.
inline Z3_ast argAt(Z3_ast a, unsigned i) {
  const NodeInfo &n = node(a);
  return i < NodeInfo::kInlineArgs ? n.args[i] : Z3_get_app_arg(ctx(), Z3_to_app(ctx(), a), i);
}
/// A 0-ary uninterpreted application: a named constant (a size, an index).
inline bool isNamedConst(Z3_ast a) {
  const NodeInfo &n = node(a);
  return n.kind == Z3_APP_AST && n.numArgs == 0 && n.op == Z3_OP_UNINTERPRETED;
}
/// The name of an application's function (of a named constant: its name).
inline Z3_func_decl declOf(Z3_ast a) { return Z3_get_app_decl(ctx(), Z3_to_app(ctx(), a)); }
inline std::string appName(Z3_ast a) { return Z3_get_symbol_string(ctx(), Z3_get_decl_name(ctx(), declOf(a))); }

/// The Z3 handle of an Expr, and an Expr from a handle (taking a new
/// reference): private to Expr, reachable from smt/ only.
struct ExprAccess {
  static Z3_ast raw(const Expr &e) { return e.ast_; }
  static Expr fromRaw(Z3_ast a) { return Expr(a); }
};
inline Z3_ast raw(const Expr &e) { return ExprAccess::raw(e); }
inline Expr fromRaw(Z3_ast a) { return ExprAccess::fromRaw(a); }
} // namespace shardproof::smt::detail
