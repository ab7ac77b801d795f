// Internal: what every phase of one check shares, passed to each explicitly:
// the graphs and the spec, the solver with the class table and the components
// that reason over it, and the Result under construction (the sink of
// failures, relation rows and stats). No phase's own state lives here.
#pragma once

#include "Classes.h"
#include "IndexValues.h"
#include "NodeMemo.h"
#include "OpBridge.h"
#include "Prover.h"
#include "Render.h"
#include "Values.h"
#include "Witness.h"

#include "shardproof/ir/Graph.h"
#include "shardproof/ir/Ops.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/spec/Spec.h"
#include "shardproof/smt/Solver.h"

#include <optional>
#include <string>
#include <vector>

namespace shardproof::relation {

/// A size condition a phase raised, decided by the output check.
struct PendingObligation {
  ir::Obligation obl;
  int rank; // -1: reference graph
  std::string node, module;
};

struct CheckCore {
  const ir::Graph &ref;
  const std::vector<ir::Graph> &ranks;
  const spec::Spec &spec;
  Options opts;
  smt::Solver solver;
  ClassTable classes;
  Prover prover;
  /// Integer data read as index expressions (IndexValues.h).
  IndexValues ints{classes};
  /// The op table's view of a node's inputs (OpBridge.h).
  OpBridge ops{classes, prover, ints, static_cast<int>(ranks.size())};
  /// Element maps, covers and renderings reused across layers identical up
  /// to names (a cache: render() is const).
  mutable NodeMemo memo;
  /// The free size symbols, in the order sizes are shrunk; set once the rank
  /// symbols are bound, before any phase asks the solver for sizes.
  std::vector<std::string> symbols;
  /// The result under construction: failures, relation rows, claims, stats.
  Result result;

  CheckCore(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec, const Options &o)
      : ref(ref), ranks(ranks), spec(spec), opts(scaledForWorld(o, static_cast<int>(ranks.size()))),
        solver(o.solverTimeoutMs), prover(solver, classes) {
    prover.setMaxTermNodes(opts.maxTermNodes);
    solver.setMemo(o.memo);
  }
  /// `o` with the limits that depend on the world size applied: the
  /// reference-term node limit is `o.maxTermNodes` up to 4 ranks and times
  /// (P/4)^2 above (Core.cpp says why).
  static Options scaledForWorld(Options o, int worldSize);

  int worldSize() const { return static_cast<int>(ranks.size()); }
  /// Solver queries that ended Unknown so far (timeouts, memory, the budget).
  unsigned unknownQueries() const;
  std::string render(const Term &t) const { return renderTerm(classes, memo, opts.memo, t); }
  /// `t` rendered with the symbols and index variables of `m` substituted.
  std::string renderAt(const Term &t, const smt::Model &m) const;
  /// The smallest sizes and element of a tensor of `shape` inside `region`,
  /// with both sides rendered there (no replay: the numbers are the solver's).
  Counterexample makeCounterexample(const smt::Expr &region, const std::string &tensor, int rank,
                                    const ir::Shape &shape, const Term &expected, const Term &actual);
  /// The sizes `m` gives the free symbols, into `cex`.
  void addSizes(Counterexample &cex, const smt::Model &m) const {
    for (auto &n : symbols)
      if (auto v = m.get(n))
        cex.sizes.push_back({n, *v});
  }
  /// The witness phase over this check's reference and solver (Witness.h).
  Witness witness(const std::vector<ValueInfo> &refValues) {
    return Witness(ref, refValues, solver, classes, prover, ints, ops, symbols,
                   [this](const Term &t) { return render(t); });
  }
  /// Bounds of the free index variables of a tensor of this shape.
  static smt::Expr bounds(const ir::Shape &s, const char *prefix = "i");
};

/// One computation recorded for the layer memo (NodeMemo.h): its result is
/// stored under the key only if a renaming can replay it (every class it read
/// was recorded, none created) and no solver query ended Unknown meanwhile.
/// Without a key (memoization off, or a scope where it does not apply) it
/// records nothing and stores nothing.
class MemoRecording {
public:
  MemoRecording(CheckCore &core, std::optional<MemoKey> key)
      : core_(core), key_(std::move(key)), unknownBefore_(core.unknownQueries()) {
    if (key_)
      rec_.emplace(core.classes);
  }
  /// Whether what was derived so far may be stored.
  bool reusable() const { return key_ && rec_->reusable() && core_.unknownQueries() == unknownBefore_; }
  /// Stores `r` if reusable(); once.
  void store(NodeMemo::Result r) {
    if (!reusable())
      return;
    core_.memo.store(std::move(*key_), rec_->consulted(), std::move(r));
    key_.reset();
  }

private:
  CheckCore &core_;
  std::optional<MemoKey> key_;
  unsigned unknownBefore_;
  std::optional<ClassTable::Recording> rec_;
};

} // namespace shardproof::relation
