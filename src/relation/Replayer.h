// Internal: numeric evaluation of element terms (Eval.cpp), the independent
// check that a counterexample is real. Needs only the class table.
#pragma once

#include "Classes.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardproof::relation {

/// Numeric evaluation of terms at one concrete assignment of the symbols, with
/// deterministic pseudo-random leaf data keyed by class label and index, so a
/// replicated input reads the same everywhere (Eval.cpp). Class elements are
/// memoized, so evaluating every element of an output shares the work.
class Replayer {
public:
  /// `intOffset`: integer inputs with a `values` range [lo, hi] hold
  /// min(lo + intOffset, hi) in every element instead of seeded random values
  /// (witness search tries each value of a small range, and both bounds).
  Replayer(const ClassTable &classes, std::map<std::string, int64_t> sizes,
           std::optional<int64_t> intOffset = std::nullopt);
  ~Replayer();
  /// Value of `t` with its free index variables i!0.. set to `idx`.
  double at(const Term &t, const std::vector<int64_t> &idx);
  /// Leaf elements (by label, so a replicated input is one tensor) read as
  /// floats. Recorded into `out` when set; with `keep` set, elements not in
  /// it read other pseudo-random numbers (the mask-leak probe).
  using LeafSet = std::set<std::pair<std::string, std::vector<int64_t>>>;
  void recordLeafReads(LeafSet *out);
  void perturbUnread(const LeafSet *keep);
  /// Which class elements each computed element read (kRoot: the evaluated
  /// term itself), recorded into `out` while set: the cone of an element.
  using Element = std::pair<ClassId, std::vector<int64_t>>;
  static constexpr ClassId kRoot = static_cast<ClassId>(-1);
  using ElementReads = std::map<Element, std::set<Element>>;
  void recordElementReads(ElementReads *out);
  /// False when the cone outgrew what is recorded (then it is partial).
  bool recordedAllReads() const;
  /// Values of the evaluated term's own subterms (partial sums and products
  /// included), recorded into `out` while set; class definitions excluded.
  void recordValues(std::vector<double> *out);
  /// A computed element's value, if this replayer evaluated it.
  std::optional<double> element(const Element &e) const;
  /// False once the work budget ran out or an index could not be evaluated:
  /// the numbers are then meaningless.
  bool complete() const;
  /// Term steps this replayer may take before it gives up (default 50M).
  void setBudget(uint64_t steps);
  /// Starts another evaluation on this replayer with `steps` of budget,
  /// keeping the class elements computed so far (classes never change; an
  /// element whose evaluation was cut short is never kept).
  void newProbe(uint64_t steps);
  /// Steps left of the budget.
  uint64_t budgetLeft() const;
  /// Compute classes outside `exact` read as pseudo-random numbers keyed by
  /// class and index (the same wherever they are read) instead of being
  /// evaluated: a shallow probe, whose cost does not grow with what lies
  /// below the cut. Set before the first evaluation.
  void cutBelow(const std::set<ClassId> &exact);
  /// Evaluates the classes in `more` exactly too, keeping the elements
  /// computed so far, which stay right as long as none of them read a class
  /// of `more` as a cut leaf; false (and nothing changed) otherwise. Lets
  /// probes of neighbouring tensors share one replayer.
  bool widenCut(const std::set<ClassId> &more);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The classes a shallow probe comparing `a` with each of `sides` evaluates
/// exactly (for cutBelow): those within `levels` class definitions below
/// either, less the reductions both read (ShallowCut.cpp).
std::set<ClassId> shallowCut(const ClassTable &classes, const Term &a, const std::vector<Term> &sides,
                             unsigned levels);

} // namespace shardproof::relation
