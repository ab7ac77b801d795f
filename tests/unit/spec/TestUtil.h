// Shared helpers for the spec-layer tests.
#pragma once

#include "shardproof/spec/Spec.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace shardproof::spec::test {

/// The rendered error ("file:line:col: error: message"), or "" on success.
template <typename T> std::string errorOf(llvm::Expected<T> &&e) {
  if (e)
    return "";
  return takeError(e.takeError()).text;
}

/// Evaluates an integer or boolean expression under concrete symbol values.
inline smt::Expr evalWith(const smt::Expr &e, const std::map<std::string, int64_t> &env) {
  std::vector<smt::Expr> from, to;
  for (auto &[k, v] : env) {
    from.push_back(smt::Expr::intVar(k));
    to.push_back(smt::Expr::intConst(v));
  }
  return e.substitute(from, to).simplify();
}

} // namespace shardproof::spec::test
