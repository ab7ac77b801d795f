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
#include <map>
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
  /// `redefinable`: whether a function may take another value at a point (a
  /// set-aside fact's function: no assumption a kept model meets applies it,
  /// and the query's own instances of the fact are part of the query).
  Repairer(std::function<bool(const std::string &)> isFree, std::function<bool(const std::string &)> redefinable)
      : isFree_(std::move(isFree)), redefinable_(std::move(redefinable)) {}
  /// The single-variable bounds among the conjuncts of `formula` (through
  /// and, not-or, double negation). Conjuncts are parsed once: paths repeat.
  std::vector<const Bound *> boundsOf(const std::vector<Expr> &conjuncts);
  /// Values for the bounded variables that meet every bound once the others
  /// take their values in `fixed` (each at the lower end of its range, or
  /// with `high` the upper one, where it has that end); nullopt if they
  /// conflict or an atom does not evaluate.
  static std::optional<std::unordered_map<std::string, int64_t>>
  values(const std::vector<const Bound *> &bounds, const Expr::Env &fixed, const Expr::AppEnv &apps,
         bool high = false);
  /// coef * app + constant + rest >= 0 for one application `app` of a
  /// redefinable function, `rest` applying none.
  struct AppBound {
    Expr app;
    int64_t coef;
    int64_t constant;
    std::vector<std::pair<int64_t, Expr>> rest;
  };
  /// Those among the conjuncts of `formula` (parsed once, as boundsOf).
  std::vector<const AppBound *> appBoundsOf(const std::vector<Expr> &conjuncts);
  /// Function values at points (the applications' arguments evaluated in
  /// `env`) meeting every bound at that point; nullopt if they conflict or
  /// something does not evaluate. Applications elsewhere read `apps`.
  using AppValues = std::map<std::pair<std::string, std::vector<int64_t>>, int64_t>;
  static std::optional<AppValues> appValues(const std::vector<const AppBound *> &bounds, const Expr::Env &env,
                                            const Expr::AppEnv &apps, bool high = false);
  /// Forgets parsed conjuncts (an assumption may have named a variable).
  void clear() {
    parsed_.clear();
    appParsed_.clear();
  }

private:
  void parse(const Expr &literal, std::vector<Bound> &out) const;
  void parseApp(const Expr &literal, std::vector<AppBound> &out) const;
  std::function<bool(const std::string &)> isFree_, redefinable_;
  std::unordered_map<unsigned, std::pair<Expr, std::vector<Bound>>> parsed_; // by AST id, held
  std::unordered_map<unsigned, std::pair<Expr, std::vector<AppBound>>> appParsed_;
};

} // namespace shardproof::smt::detail
