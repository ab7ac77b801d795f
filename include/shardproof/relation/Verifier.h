// Relation inference and the refinement check: the reference outputs can be
// rebuilt from the ranks' outputs, for every admissible size.
//
// Pipeline: the rank graphs are merged into one world of tensor classes
// (hash-consed element definitions, collectives resolved across ranks); the
// reference graph is walked in order and each tensor gets a relation, a term
// over rank classes proven equal to it element by element; finally every
// reference output's relation is compared with the spec's.
#pragma once

#include "shardproof/ir/Graph.h"
#include "shardproof/spec/Spec.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::relation {

enum class Verdict { Verified, Refuted, Unknown };
const char *toString(Verdict v);

/// A concrete point where the implementation differs (or a proof step fails).
struct Counterexample {
  std::vector<std::pair<std::string, int64_t>> sizes; // symbol values
  int rank = -1;                                      // -1: not rank-specific
  std::string tensor;                                 // reference tensor
  std::vector<int64_t> index;                         // element index, if any
  std::string expected; // reference side at that point (symbolic)
  std::string actual;   // implementation side at that point (symbolic)
  bool replayed = false; // confirmed by evaluating both sides on numbers
  /// For size and side-condition failures: what evaluating at these sizes
  /// showed ("dim 1 is 0 on the implementation, 1 on the reference").
  std::string replay;
  bool expectedByInterpreter = false; // reference number from running its graph
  double expectedValue = 0, actualValue = 0;
  /// How integer inputs with a `values` range were filled when not at random
  /// ("every element of input_ids is 5"); empty for the seeded random draw.
  std::string intInputs;
  /// The same as the fill value's offset in its range (nullopt: seeded random).
  std::optional<int64_t> intOffset;
  /// The implementation's number again with only the leaf elements no
  /// reference input reads changed (padding, or what lies outside every
  /// placed slice). Set when it differs from actualValue: content the
  /// reference never sees reaches this element, a mask leak.
  std::optional<double> leakValue;
  std::string str() const;
};

/// One row of the per-layer relation table.
struct RelationRow {
  std::string tensor; // reference tensor
  std::string node;   // reference node producing it ("" for inputs)
  std::string op;
  std::string module; // from the node name
  std::string relation; // rendered relation over rank tensors
  enum Status { Input, Matched, View, Unmatched, Unsupported } status = Matched;
};

/// The sharding bug a failure shows, when the check can tell which: review
/// tools file each class under its own rule.
enum class BugClass {
  None,
  MissingReduction,  // partial sums reach a node that needs their total
  UncoveredElements, // some elements of a reference tensor have no counterpart on any rank
  MaskLeak,          // content the reference never reads (padding) reaches a real element
};
const char *toString(BugClass c);

/// The Python line that emitted a node (its ONNX doc_string, written by the
/// capture package or by torch.onnx.export(verbose=True)).
struct SourceSite {
  std::string role; // "reference node '/fc2/Add'", "rank 1 node '/fc2/Add'"
  SrcLoc loc;       // file and line (col 0)
  std::string function;
};

struct Failure {
  enum Kind { NoRelation, OutputMismatch, Obligation, Unsupported, SolverUnknown } kind;
  std::string message;
  std::string refNode, refOp, module, tensor;
  std::vector<std::string> rankNodes; // rank nodes around the failure ("rank 1: /fc1/MatMul")
  std::optional<Counterexample> cex;
  BugClass bugClass = BugClass::None;
  std::vector<SourceSite> sources; // reference node first, then rank nodes
};
/// The kind's stable key ("no-relation", "output-mismatch", ...), as --json,
/// --html and tools read it.
const char *toString(Failure::Kind k);

struct OutputResult {
  std::string tensor;
  std::string expected; // the spec's relation
  Verdict verdict = Verdict::Unknown;
  std::string detail;
};

/// `check --sample N`: a VERIFIED result cross-checked by executing both sides
/// at N random admissible sizes. Any disagreement is a bug in shardproof.
struct SampleResult {
  unsigned sizes = 0;      // size assignments executed
  uint64_t elements = 0;   // output elements compared
  std::vector<std::string> sizesTried; // "batch=2, seq=5" per assignment
  std::vector<std::string> disagreements;
  std::vector<std::string> skipped; // outputs not executable at some sizes (why)
};

/// Solver work of one kind of query (the name a query is asked under).
struct QueryKindStats {
  std::string name;
  unsigned count = 0;
  double seconds = 0;
};

/// A reference node's share of relation inference (its element map, cover,
/// proposals and checkpoint): where a slow check spends its time.
struct NodeTime {
  std::string node, op, module;
  double seconds = 0;
  double solverSeconds = 0; // of which in the solver
};

struct Stats {
  unsigned refNodes = 0, rankNodes = 0, classes = 0, relations = 0, matches = 0;
  unsigned solverQueries = 0, cacheHits = 0;
  unsigned witnessed = 0; // answered Sat by an earlier query's model (Solver::witnessed)
  unsigned byIntervals = 0;                          // proven from the atoms' ranges without Z3 (Solver::byIntervals)
  unsigned obligations = 0, distinctObligations = 0; // side conditions, and distinct formulas among them
  uint64_t rewriteSteps = 0; // term rewrites: normalize/cover steps of the prover
  // Layer memoization: results stored, and reused for a node identical up to
  // names (element maps of rank and reference nodes, covers of reference terms).
  unsigned memoStored = 0, memoHits = 0;
  // Whole layers taken as the layer below renamed instead of evaluated node
  // by node (LayerCopy.h in src/relation): of the rank graphs (all ranks
  // together), and of the reference walk.
  unsigned layersCopied = 0, refLayersCopied = 0;
  // Numeric probes of same-name proposals (Propose.cpp in src/relation): run,
  // and shallow ones that ran out of steps before an answer.
  unsigned probes = 0, probesGaveUp = 0;
  double seconds = 0; // verify() as a whole
  // Seconds per phase. verify() fills world (symbols, inputs, rank graphs
  // merged into classes), infer (a relation per reference tensor) and check
  // (obligations, outputs, verdict); the caller fills load (ONNX files and
  // spec) and report (printing), and the peak resident set size.
  double loadSeconds = 0, worldSeconds = 0, inferSeconds = 0, checkSeconds = 0, reportSeconds = 0;
  double solverSeconds = 0;           // inside the solver, all phases
  // CPU time (user + system, every thread) of the load phase: a total CPU
  // figure's ratio to it does not change with how busy the machine is, as a
  // ratio to the phase's wall time does.
  double loadCpuSeconds = 0;
  std::vector<QueryKindStats> queries; // by solver time, largest first
  std::vector<NodeTime> slowestNodes;  // the kSlowestNodes slowest reference nodes, slowest first
  static constexpr size_t kSlowestNodes = 10;
  long peakRssKiB = 0;                // getrusage ru_maxrss; 0 if unknown
};

struct Result {
  Verdict verdict = Verdict::Unknown;
  std::string reason; // one line: why this verdict
  std::vector<RelationRow> rows;
  std::vector<OutputResult> outputs;
  std::vector<Failure> failures; // first is the one to show
  std::vector<std::string> notes;
  std::optional<SampleResult> sample;
  Stats stats;
};

struct Options {
  unsigned solverTimeoutMs = 10000; // per query; a timeout is Unknown
  unsigned solverMemoryMb = 0;      // Z3's memory cap, process-wide; 0: none
  /// Wall time for the whole check; once spent, what is left is not checked
  /// and the verdict is UNKNOWN (naming the budget). Unset: no budget.
  std::optional<double> timeBudgetSeconds;
  std::string smtDumpDir; // empty: no dumps
  unsigned maxExpansion = 64; // class expansions when comparing outputs
  /// Term nodes beyond which a reference term is neither normalized nor
  /// covered (it only arises below a node no rank computes); for up to 4
  /// ranks, times (P/4)^2 above (CheckCore::scaledForWorld, Core.cpp).
  unsigned maxTermNodes = 4000; // an 8-shard LogSoftmax is about 2,500
  /// Threads for independent solver work (the obligations); results are the
  /// same for any value.
  unsigned jobs = 1;
  /// Reuse of earlier work: a node's results for the same node one layer up
  /// (NodeMemo), solver results by formula, obligations by formula. Off (`--no-memo`): each query reaches Z3 (the prover's own
  /// entailment cache on (path, condition) stays); verdicts must not change.
  bool memo = true;
  /// Called now and then during the check with the phase ("world", "infer",
  /// "check"), work done and total in that phase; may be empty.
  std::function<void(const char *phase, size_t done, size_t total)> progress;
  /// For a process that ends right after the check (the CLI), as clang's
  /// -disable-free: given, the check hands its state (at 126 layers a million
  /// terms, 2 s to free piece by piece) to this instead of freeing it, and the
  /// process exits without freeing it. Empty (a library caller): freed as usual.
  std::function<void(std::shared_ptr<void>)> keepAtExit;
  unsigned samples = 0;     // check --sample: executions after VERIFIED
  uint64_t sampleSeed = 1;  // which sizes --sample draws
};

/// Runs the check. User errors (spec names a tensor that does not exist, shapes
/// of a replicated input differ, ...) come back as errors; everything else is in
/// the Result.
llvm::Expected<Result> verify(const ir::Graph &ref, const std::vector<ir::Graph> &ranks,
                              const spec::Spec &spec, const Options &opts = {});
/// The same, taking the graphs over: where the spec's constraints make sizes
/// multiples (`seq % 8 == 0`), the graphs' input shapes are rewritten in place
/// instead of in a copy of every graph.
llvm::Expected<Result> verify(ir::Graph &&ref, std::vector<ir::Graph> &&ranks, const spec::Spec &spec,
                              const Options &opts = {});

} // namespace shardproof::relation
