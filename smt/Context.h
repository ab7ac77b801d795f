// Internal to smt/: the Z3 context shared by every Expr. Not a public header.
#pragma once

#include <z3.h>

namespace shardproof::smt::detail {
Z3_context ctx();
Z3_sort intSort();
Z3_sort boolSort();
/// Set when Z3 reported running out of the memory it was allowed (see
/// Solver::setMemoryLimitMb): the builder or query that hit it is invalid.
bool memoryOut();
void resetMemoryOut();
} // namespace shardproof::smt::detail
