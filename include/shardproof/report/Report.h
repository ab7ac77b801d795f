// Rendering a check's result: a human report (text) and a machine one (JSON).
#pragma once

#include "shardproof/relation/Verifier.h"

#include <llvm/Support/raw_ostream.h>

#include <string>
#include <vector>

namespace shardproof::report {

/// A collective node of a rank graph (AllReduce, AllGather, ...), for the
/// --html page's diagram of which collective joins which ranks.
struct CollectiveSite {
  int rank = 0;
  std::string node, op, module; // node name, op type, module path of the node
};

struct Context {
  std::string specPath;
  std::string reference;
  std::vector<std::string> rankPaths;
  /// Where the spec places each input, output and checkpoint (file:line:col),
  /// and the ranks line: review annotations point there (--sarif).
  std::vector<std::pair<std::string, SrcLoc>> placementLocs;
  SrcLoc ranksLoc;
  /// Every collective of the rank graphs, rank by rank in graph order (--html).
  std::vector<CollectiveSite> collectives;
};

struct TextOptions {
  bool showTable = true;  // the per-layer relation table
  bool showStats = false; // solver and timing figures
};

/// Exit code for a verdict: 0 VERIFIED, 1 REFUTED, 2 UNKNOWN.
int exitCode(relation::Verdict v);

void printText(llvm::raw_ostream &os, const relation::Result &r, const Context &ctx, const TextOptions &opts = {});
/// The --stats summary: counts, time per phase, solver time by query kind,
/// peak memory.
void printStats(llvm::raw_ostream &os, const relation::Stats &s);
std::string toJson(const relation::Result &r, const Context &ctx);
struct RelationDiff;
/// The result as SARIF 2.1.0 (--sarif): one result per failure, located in the
/// spec, and with `changes` (check --relations) one per changed relation,
/// located at its line in the relation file.
std::string toSarif(const relation::Result &r, const Context &ctx, const RelationDiff *changes = nullptr);
/// The result as Markdown for a pull-request comment (--summary-md): the
/// verdict; for a failing run the outputs, the first failing node with its
/// counterexample and replay numbers, and the other failures folded; with
/// `changes` the changed relations grouped by module (recorded -> now).
std::string toMarkdown(const relation::Result &r, const Context &ctx, const RelationDiff *changes = nullptr);
/// The result as one self-contained HTML page (--html): verdict and counts,
/// outputs, the module tree with rows by status (repeated layers folded), the
/// first failure with its counterexample, the collectives per layer and rank.
std::string toHtml(const relation::Result &r, const Context &ctx);
/// `shardproof diff OLD NEW --summary-md FILE`: the changed relations grouped by
/// module, old -> new.
std::string relationDiffMarkdown(const RelationDiff &d, const std::string &before, const std::string &after);

/// The replay section: for each refuted output or size condition, the sizes,
/// rank and index, and the two numbers (or sizes) execution gave. Returns
/// false if no failure could be confirmed by execution.
bool printReplay(llvm::raw_ostream &os, const relation::Result &r);
/// The --sample section; disagreements are printed as an internal error.
void printSample(llvm::raw_ostream &os, const relation::SampleResult &s);

/// A counterexample's sizes ("batch=1, seq=2", or "any sizes") and its
/// element ("y[0, 1, 2]"), as every report writes them.
std::string sizesOf(const relation::Counterexample &c);
std::string elementOf(const relation::Counterexample &c);

/// Writes `text` to `path` via a temporary file and a rename, so a failure never
/// leaves half a file behind (for --json and relation files). A failure is a
/// user error naming the path.
llvm::Error writeFileAtomically(const std::string &path, const std::string &text);
/// Fails (a user error) if `path` is one of `inputs` (the spec, a model): an
/// output never overwrites what the run reads. Empty: fine.
llvm::Error checkNotAnInput(const std::string &path, const std::vector<std::string> &inputs);
/// Fails (a user error naming the path) if `path` could not be written: its
/// directory is missing or not writable, or it is a directory. Empty: fine.
llvm::Error checkWritable(const std::string &path);

} // namespace shardproof::report
