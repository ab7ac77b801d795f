// Internal: the state of one check, shared by the files of the relation layer.
#pragma once

#include "Classes.h"
#include "Prover.h"

#include "shardproof/ir/Ops.h"
#include "shardproof/relation/Verifier.h"

#include <map>
#include <optional>
#include <set>

namespace shardproof::relation {

/// What we know of one tensor of a graph: its element term over classes (free
/// index variables i!0..), shape and, for shape arithmetic, integer values.
struct ValueInfo {
  Term term; // null: no element map (shape-only or unsupported)
  std::optional<ir::Shape> shape;
  ir::DType dtype = ir::DType::Other;
  std::optional<ir::IntTensor> value;
  std::shared_ptr<const ir::TensorData> data;
  std::string unsupported; // why there is no term
};

struct PendingObligation {
  ir::Obligation obl;
  int rank; // -1: reference graph
  std::string node, module;
};

struct Session {
  const ir::Graph &ref;
  const std::vector<ir::Graph> &ranks;
  const spec::Spec &spec;
  Options opts;
  smt::Solver solver;
  ClassTable classes;
  Prover prover;
  std::vector<std::vector<ValueInfo>> rankValues;
  std::vector<ValueInfo> refValues;
  std::vector<PendingObligation> obligations;
  Result result;
  std::set<std::string> reportedRankNodes; // rank nodes already reported as unsupported

  Session(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec, const Options &o)
      : ref(ref), ranks(ranks), spec(spec), opts(o), solver(o.solverTimeoutMs), prover(solver, classes) {}

  int worldSize() const { return static_cast<int>(ranks.size()); }
  std::string rankFile(int r) const { return ranks[r].path; }

  // World.cpp
  llvm::Error setupSymbols();
  llvm::Error bindInputs();
  llvm::Error buildRanks();
  // Infer.cpp
  llvm::Error inferReference();
  // Check.cpp
  void checkObligations();
  llvm::Error checkOutputs();
  void decide();

  // Shared helpers
  /// Bounds of the free index variables of a tensor of this shape.
  static smt::Expr bounds(const ir::Shape &s, const char *prefix = "i");
  /// Evaluates one node with the op table; fills `values` for its outputs.
  llvm::Error evalNode(const ir::Graph &g, const ir::Node &n, std::vector<ValueInfo> &values, int rank);
  ValueInfo constantValue(const std::string &name, const std::shared_ptr<const ir::TensorData> &data);
  /// Element term of a spec relation expression over the ranks' tensors.
  llvm::Expected<std::pair<Term, ir::Shape>> compileRelation(const spec::RelExpr &e);
  std::string render(const Term &t) const;
  std::string className(ClassId c) const { return classes.label(c); }
  Counterexample makeCounterexample(const smt::Expr &region, const std::string &tensor, int rank,
                                    const ir::Shape &shape, const Term &expected, const Term &actual,
                                    const Term &expectedNum = nullptr, const Term &actualNum = nullptr);
  std::vector<std::string> symbolNames() const;
};

/// Numeric evaluation of terms at concrete sizes, with deterministic
/// pseudo-random leaf data (Eval.cpp).
double evaluate(const Term &t, const ClassTable &classes, const std::map<std::string, int64_t> &env);

} // namespace shardproof::relation
