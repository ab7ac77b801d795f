// Internal to smt/: the Z3 context shared by every Expr. Not a public header.
#pragma once

#include "shardproof/smt/Expr.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <z3.h>

#include <atomic>

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

/// The Z3 handle of an Expr, and an Expr from a handle (taking a new
/// reference): private to Expr, reachable from smt/ only.
struct ExprAccess {
  static Z3_ast raw(const Expr &e) { return e.ast_; }
  static Expr fromRaw(Z3_ast a) { return Expr(a); }
};
inline Z3_ast raw(const Expr &e) { return ExprAccess::raw(e); }
inline Expr fromRaw(Z3_ast a) { return ExprAccess::fromRaw(a); }
} // namespace shardproof::smt::detail
