// Internal to smt/: a kept model repaired for a new query.
//
// The relation layer asks whether a path of index conditions implies one more
// (`0 <= i!1 < 16, 10 <= i!1 => i!1 < 12`); most are not implied, and Z3 took
// 0.6 ms to say so, 7,000 times in a one-layer TP8 training step. The kept
// models (Solver.cpp) usually fix the sizes right but their index values miss
// the new path. Index variables appear in no assumption, so any values for
// them complete a model of the assumptions: this picks them from the bounds
// the query's own conjuncts put on each one, and the caller keeps the result
// only if the whole formula then evaluates to true.
#pragma once

#include "shardproof/smt/Expr.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace shardproof::smt::detail {

/// The conjuncts of `formula`, through and, not-or and double negation (the
/// forms `not (path => goal)` takes once simplified).
std::vector<Expr> conjunctsOf(const Expr &formula);

class Repairer {
public:
  // coef * var + rest >= 0, with `rest` (constant + sum of coefficient * atom)
  // free of every free variable.
  struct Bound {
    std::string var;
    int64_t coef;
    int64_t constant;
    std::vector<std::pair<int64_t, Expr>> rest;
  };
  /// `isFree`: whether a variable may take any value (named by no assumption).
  explicit Repairer(std::function<bool(const std::string &)> isFree) : isFree_(std::move(isFree)) {}
  /// The single-variable bounds among the conjuncts of `formula` (through
  /// and, not-or, double negation). Conjuncts are parsed once: paths repeat.
  std::vector<const Bound *> boundsOf(const std::vector<Expr> &conjuncts);
  /// Values for the bounded variables that meet every bound once the others
  /// take their values in `fixed`; nullopt if they conflict or an atom does
  /// not evaluate.
  static std::optional<std::unordered_map<std::string, int64_t>>
  values(const std::vector<const Bound *> &bounds, const Expr::Env &fixed, const Expr::AppEnv &apps);
  /// Forgets parsed conjuncts (an assumption may have named a variable).
  void clear() { parsed_.clear(); }

private:
  void parse(const Expr &literal, std::vector<Bound> &out) const;
  std::function<bool(const std::string &)> isFree_;
  std::unordered_map<unsigned, std::pair<Expr, std::vector<Bound>>> parsed_; // by AST id, held
};

} // namespace shardproof::smt::detail
