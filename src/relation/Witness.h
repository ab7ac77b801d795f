// Internal: the witness phase (Replay.cpp), the numbers behind a REFUTED
// output. It owns no state of the check: it reads the reference graph and its
// values, the class table and the solver it is handed, evaluates both sides of
// an output on numbers at small admissible sizes (the reference side with an
// interpreter of the reference graph), and returns a confirmed counterexample
// or nothing.
#pragma once

#include "Classes.h"
#include "IndexValues.h"
#include "OpBridge.h"
#include "Prover.h"
#include "Replayer.h"
#include "Values.h"

#include "shardproof/ir/Graph.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/smt/Solver.h"

#include <climits>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::relation {

class Witness {
public:
  using Render = std::function<std::string(const Term &)>;
  Witness(const ir::Graph &ref, const std::vector<ValueInfo> &refValues, smt::Solver &solver, ClassTable &classes,
          Prover &prover, IndexValues &ints, const OpBridge &ops, std::vector<std::string> symbols, Render render)
      : ref(ref), refValues(refValues), solver(solver), classes(classes), prover(prover), ints(ints), ops(ops),
        symbols(std::move(symbols)), render(std::move(render)) {}

  /// Looks for a confirmed difference between `expected` and `actual` (element
  /// terms of a tensor of `shape`) by evaluating every element at a few small
  /// sizes admitted by `region`. Only a numeric difference found with complete
  /// evaluations is returned: it is what REFUTED rests on. At most
  /// `maxAttempts` size assignments are tried, the smallest first.
  std::optional<Counterexample> search(const smt::Expr &region, int outputId, int rank, const ir::Shape &shape,
                                       const Term &expected, const Term &actual, int maxAttempts = INT_MAX);
  /// Runs the reference graph on numbers at `sizes` (inputs: their relations
  /// over the ranks' leaf data) and returns output `outputId` row-major;
  /// nullopt if some node cannot be evaluated or a tensor is too large.
  std::optional<std::vector<double>> runReference(int outputId, const std::map<std::string, int64_t> &sizes,
                                                  std::optional<int64_t> intOffset = std::nullopt);
  /// The implementation's value of `actual` at `idx` with every leaf element
  /// that no reference input reads given other numbers (the mask-leak probe);
  /// nullopt when the reference inputs are too large to tabulate here.
  std::optional<double> unreadProbe(const Term &actual, const std::vector<int64_t> &idx,
                                    const std::map<std::string, int64_t> &sizes, std::optional<int64_t> intOffset);
  /// Both sides with the highest rank class unfolded a few layers, for display.
  std::pair<Term, Term> readableSides(Term a, Term b);
  /// Ways of filling integer inputs tried at one size.
  std::vector<std::optional<int64_t>> intStrategies(const std::map<std::string, int64_t> &sizes) const;
  std::string describeIntStrategy(const std::map<std::string, int64_t> &sizes, int64_t offset) const;

private:
  const ir::Graph &ref;
  const std::vector<ValueInfo> &refValues;
  smt::Solver &solver;
  ClassTable &classes;
  Prover &prover;
  IndexValues &ints;
  const OpBridge &ops;
  std::vector<std::string> symbols; // the free size symbols, in the order sizes are shrunk
  Render render;
  std::string renderAt(const Term &t, const smt::Model &m) const { return renderWithModel(render, t, m); }

public:
  /// `t` rendered with the sizes and element indices of `m` substituted.
  static std::string renderWithModel(const Render &render, const Term &t, const smt::Model &m);
};

/// Numbers equal as replay compares them (relative 1e-6; NaN equals NaN).
bool sameNumber(double a, double b);
/// Row-major successor of `idx` within `dims`; false after the last one.
bool nextIndex(std::vector<int64_t> &idx, const std::vector<int64_t> &dims);
/// A shape's dims at concrete sizes; nullopt if one is unknown or negative.
std::optional<std::vector<int64_t>> dimsAt(const ir::Shape &s, const std::map<std::string, int64_t> &sizes);

} // namespace shardproof::relation
