// Short names for the terms the smt tests write: sym("n") for an integer
// symbol, k(3) for a numeral.
#pragma once

#include "shardproof/smt/Expr.h"

#include <cstdint>

namespace shardproof::smt::test {
inline Expr sym(const char *n) { return Expr::intVar(n); }
inline Expr k(int64_t v) { return Expr::intConst(v); }
} // namespace shardproof::smt::test
