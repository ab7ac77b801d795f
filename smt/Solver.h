// Named solver queries over smt::Expr. Every query has a name (for counters, for
// SMT-LIB dumps and for the report), a timeout, and a three-way outcome: a
// timeout or a Z3 failure is never read as "proved".
#pragma once

#include "smt/Expr.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardproof::smt {

enum class Result { Unsat, Sat, Unknown, Error };
const char *toString(Result r);

/// A satisfying assignment restricted to named integer constants (Z3's internal
/// div0/mod0 functions are filtered out).
struct Model {
  std::vector<std::pair<std::string, int64_t>> values;
  std::optional<int64_t> get(const std::string &name) const;
  std::string str() const;
};

struct CheckResult {
  Result result = Result::Error;
  Model model;        // when Sat
  std::string reason; // when Unknown or Error
};

/// Outcome of proving `goal` under the solver's assumptions.
struct Proof {
  enum Status { Proved, Refuted, Unknown } status = Unknown;
  Model counterexample; // when Refuted: assumptions hold, goal fails
  std::string reason;   // when Unknown
  bool proved() const { return status == Proved; }
};

struct QueryStats {
  unsigned unsat = 0, sat = 0, unknown = 0, error = 0, trivial = 0;
  double seconds = 0;
};

class Solver {
public:
  explicit Solver(unsigned timeoutMs = 10000);
  ~Solver();
  Solver(const Solver &) = delete;
  Solver &operator=(const Solver &) = delete;

  /// A background fact (spec constraint, symbol bound) assumed by every query.
  void assume(const Expr &fact);
  const std::vector<Expr> &assumptions() const { return assumptions_; }

  /// Is `formula` satisfiable together with the assumptions?
  CheckResult check(const std::string &name, const Expr &formula);
  /// Does `goal` hold for every assignment satisfying the assumptions?
  /// Constant-folded goals are answered without the solver.
  Proof prove(const std::string &name, const Expr &goal);
  /// Cheap entailment for simplification: true only if proved (Unknown -> false).
  bool entails(const std::string &name, const Expr &goal) { return prove(name, goal).proved(); }

  /// Shrinks a model of `formula`: minimises `vars` one after another (in the
  /// given order) towards their smallest admissible values.
  Model shrink(const std::string &name, const Expr &formula, const Model &start,
               const std::vector<std::string> &vars);

  void setTimeout(unsigned ms) { timeoutMs_ = ms; }
  /// Write every query as an SMT-LIB file into `dir` (created if missing).
  void setDumpDir(std::string dir) { dumpDir_ = std::move(dir); }
  const std::map<std::string, QueryStats> &stats() const { return stats_; }
  unsigned totalQueries() const;

private:
  CheckResult run(const std::string &name, const Expr &formula);
  void dump(const std::string &name, const Expr &formula);

  std::vector<Expr> assumptions_;
  unsigned timeoutMs_;
  std::string dumpDir_;
  unsigned dumpCounter_ = 0;
  std::map<std::string, QueryStats> stats_;
};

} // namespace shardproof::smt
