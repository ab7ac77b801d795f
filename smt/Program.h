// Internal to smt/: an Expr compiled for repeated evaluation (Eval.cpp).
// Expr::eval keeps the programs of small expressions (index expressions,
// evaluated millions of times by a replay); a caller that evaluates one large
// formula a few times (a query in the kept models, Solver.cpp) compiles it
// once itself and lets it go.
#pragma once

#include "shardproof/smt/Expr.h"

#include <memory>

namespace shardproof::smt::detail {

struct Program;
std::shared_ptr<const Program> compile(const Expr &e);
std::optional<int64_t> run(const Program &p, const Expr::Env &env, const Expr::AppEnv &apps = nullptr);

} // namespace shardproof::smt::detail
