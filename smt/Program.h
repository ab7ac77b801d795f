// Internal to smt/: an Expr compiled for repeated evaluation (Eval.cpp).
// Expr::eval keeps the programs of small expressions (index expressions,
// evaluated millions of times by a replay, and the conjuncts of a path that
// the kept models evaluate query after query, Solver.cpp); a larger one is
// compiled for the call and let go.
#pragma once

#include "shardproof/smt/Expr.h"

#include <memory>

namespace shardproof::smt::detail {

struct Program;
std::shared_ptr<const Program> compile(const Expr &e);
std::optional<int64_t> run(const Program &p, const Expr::Env &env, const Expr::AppEnv &apps = nullptr);

} // namespace shardproof::smt::detail
