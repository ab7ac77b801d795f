// Internal to smt/: the Z3 context shared by every Expr. Not a public header.
#pragma once

#include <z3.h>

namespace shardproof::smt::detail {
Z3_context ctx();
Z3_sort intSort();
Z3_sort boolSort();
} // namespace shardproof::smt::detail
