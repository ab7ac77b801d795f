// Named solver queries over smt::Expr. Every query has a name (for counters, for
// SMT-LIB dumps and for the report), a timeout, and a three-way outcome: a
// timeout or a Z3 failure is never read as "proved".
#pragma once

#include "shardproof/smt/Expr.h"
#include "shardproof/smt/Facts.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace shardproof::smt {
namespace detail {
class IntervalProver;
class Repairer;
} // namespace detail

enum class Result { Unsat, Sat, Unknown, Error };
const char *toString(Result r);

/// A satisfying assignment restricted to named integer constants (Z3's internal
/// div0/mod0 functions are filtered out).
struct Model {
  std::vector<std::pair<std::string, int64_t>> values;
  /// Uninterpreted integer functions (data values such as token ids): the
  /// points the model lists, and its value elsewhere when that is a number.
  struct Function {
    std::vector<std::pair<std::vector<int64_t>, int64_t>> points;
    std::optional<int64_t> otherwise;
  };
  std::vector<std::pair<std::string, Function>> functions;
  std::optional<int64_t> get(const std::string &name) const;
  /// The model's value of `name(args)`; nullopt if it does not say.
  std::optional<int64_t> apply(const std::string &name, const std::vector<int64_t> &args) const;
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
  unsigned cached = 0;      // answered from the result cache (an earlier identical formula)
  unsigned witnessed = 0;   // Sat by a model of an earlier query, without Z3
  unsigned byIntervals = 0; // proven by the atoms' ranges, without Z3 (Intervals.h)
  double seconds = 0;
};

class Solver {
public:
  explicit Solver(unsigned timeoutMs = 10000);
  ~Solver();
  Solver(const Solver &) = delete;
  Solver &operator=(const Solver &) = delete;

  /// A background fact (spec constraint, symbol bound) assumed by every query.
  /// Clears the result cache (answers may change under a new assumption).
  void assume(const Expr &fact);
  /// A background fact that constrains only the uninterpreted function `fn`
  /// (a tensor's value range: forall q in the shape, lo <= fn(q) <= hi) and
  /// can be met by some fn whenever `satisfiable` holds. If the assumptions
  /// so far prove `satisfiable`, the fact joins only the queries that apply
  /// fn (an equivalent query: every model of the others extends to fn), so
  /// index arithmetic is decided without quantifiers; otherwise it is
  /// assumed like any other fact.
  void assumeOnFunction(const Expr &fact, const std::string &fn, const Expr &satisfiable);
  /// Queries (with their assumptions) of a higher Expr::degree() are not
  /// asked: Unknown, saying why. Real size arithmetic stays far below.
  static constexpr unsigned kMaxDegree = 20; // seen: n^24 still answers the interrupt, n^28 not
  const std::vector<Expr> &assumptions() const { return assumptions_; }

  /// Is `formula` satisfiable together with the assumptions?
  /// Without `wantModel` a Sat answer carries no model (cheaper: Z3 builds none).
  CheckResult check(const std::string &name, const Expr &formula, bool wantModel = true);
  /// Does `goal` hold for every assignment satisfying the assumptions?
  /// Constant-folded goals (after the size facts' rewrites) are answered
  /// without the solver.
  /// Without `wantCounterexample` a refutation carries no model.
  Proof prove(const std::string &name, const Expr &goal, bool wantCounterexample = true);
  /// Cheap entailment for simplification: true only if proved (Unknown -> false).
  bool entails(const std::string &name, const Expr &goal) { return prove(name, goal, false).proved(); }

  /// Shrinks a model of `formula`: minimises `vars` one after another (in the
  /// given order) towards their smallest admissible values.
  Model shrink(const std::string &name, const Expr &formula, const Model &start,
               const std::vector<std::string> &vars);

  void setTimeout(unsigned ms) { timeoutMs_ = ms; }
  /// A total time budget shared by every later query: each query gets at most
  /// what is left, and once it is spent queries answer Unknown at once, with
  /// `what` ("time budget of 60 s") in the reason.
  void setDeadline(std::chrono::steady_clock::time_point deadline, std::string what);
  bool pastDeadline() const;
  /// "time budget of 60 s exhausted"; empty without a deadline.
  std::string budgetMessage() const;
  /// The first query the budget cut short, if any.
  const std::string &firstCutQuery() const { return firstCut_; }
  /// Caps the memory Z3 may use, process-wide (0: no cap). A query that hits
  /// the cap answers Unknown ("solver memory limit of N MB reached").
  static void setMemoryLimitMb(unsigned mb);
  /// Write every query as an SMT-LIB file into `dir` (created if missing).
  void setDumpDir(std::string dir) { dumpDir_ = std::move(dir); }
  const std::map<std::string, QueryStats> &stats() const { return stats_; }
  /// Queries that reached Z3 (not folded, not cached).
  unsigned totalQueries() const;
  /// Seconds spent in Z3 so far, all queries.
  double totalSeconds() const;
  unsigned cacheHits() const { return cacheHits_; }
  /// Queries answered Sat by the model of an earlier one (not in totalQueries).
  unsigned witnessed() const { return witnessed_; }
  /// Goals proven by intervals (not in totalQueries).
  unsigned byIntervals() const { return byIntervals_; }
  /// Answers Unknown or Error so far, cached ones included.
  unsigned undecided() const { return undecided_; }

  /// Result cache on the final formula (default on). Off: every query is
  /// solved again (`check --no-memo`, to compare verdicts).
  void setMemo(bool on) { memo_ = on; if (!on) cache_.clear(); }
  bool memo() const { return memo_; }
  /// One long-lived Z3 solver with the assumptions asserted once and a
  /// push/pop per query (default on); off: a fresh solver per query.
  void setIncremental(bool on);

  /// Proves `goals` (constant-folded and cached ones aside) on `jobs` threads,
  /// each with its own Z3 context, and stores the ones proved in the result
  /// cache, so that later `prove` calls on them are cache hits. Nothing else
  /// is recorded: a goal not proved here is asked again by the caller, on this
  /// solver, so verdicts and counterexamples do not depend on `jobs`.
  /// Returns how many goals were proved here.
  unsigned provePrefetch(const std::string &name, const std::vector<Expr> &goals, unsigned jobs);

private:
  /// `freshSolver`: a new Z3 solver whatever the mode, so that the model does
  /// not depend on earlier queries (the final model of a counterexample).
  CheckResult run(const std::string &name, const Expr &formula, bool freshSolver = false, bool wantModel = true);
  CheckResult runUncounted(const std::string &name, const Expr &formula, bool freshSolver, bool wantModel);
  void dump(const std::string &name, const Expr &formula);
  struct Impl; // the Z3 solver and the watchdog thread (Solver.cpp)
  std::unique_ptr<Impl> impl_;
  bool memo_ = true;
  // Keyed by the formula's AST id; the entry holds the formula alive, so the id
  // cannot be recycled for a different formula while the entry exists.
  struct Cached {
    Expr formula;
    CheckResult result;
    bool hasModel; // a Sat result asked without a model has none
  };
  std::unordered_map<unsigned, Cached> cache_;
  unsigned cacheHits_ = 0;
  unsigned witnessed_ = 0;
  unsigned byIntervals_ = 0;
  unsigned undecided_ = 0;
  /// Goals proven from the atoms' ranges before Z3 (the index bounds a cover
  /// simplifies: 0.7 ms each in Z3).
  std::unique_ptr<detail::IntervalProver> intervals_;
  /// While prove() runs its query: the goal, which run() tries by cases
  /// (IntervalProver::provesByCases) once no kept model refutes it.
  const Expr *proving_ = nullptr;
  /// Whether an assumption names variable `v` (the sizes); the others may
  /// take any value in a kept model (Repair.h).
  bool assumedVar(const std::string &v);
  std::set<std::string> assumedVars_;
  std::unique_ptr<detail::Repairer> repairer_; // kept models moved to a query's index bounds
  size_t assumedVarsSeen_ = 0;                 // assumptions_ read into assumedVars_

  std::vector<Expr> assumptions_;
  /// Parallel to assumptions_: the function an assumeOnFunction fact is
  /// about, or "" for a fact every query assumes.
  std::vector<std::string> factFunction_;
  /// Symbol bounds from the assumptions: goals are rewritten with them before
  /// Z3 sees them (products of sizes cancelled, signs decided; Facts.h).
  SizeFacts facts_;
  unsigned assumptionDegree_ = 0; // the largest Expr::degree() among them
  unsigned timeoutMs_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::string budgetWhat_, firstCut_;
  std::string dumpDir_;
  unsigned dumpCounter_ = 0;
  std::map<std::string, QueryStats> stats_;
};

} // namespace shardproof::smt
