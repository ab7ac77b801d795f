// Relation files: the relation found for every reference tensor, written by
// `shardproof infer` in a stable, diff-friendly YAML form meant to be committed,
// and compared with a fresh check by `shardproof check --relations`, so that a
// refactor that silently changes how a tensor is sharded shows up in review.
//
// The format is documented in docs/relation-files.md. Reading is strict (every
// problem is a user error at file:line:col); writing is deterministic (no time,
// no absolute path, graph order), so the same models give the same bytes.
#pragma once

#include "shardproof/relation/Verifier.h"
#include "shardproof/report/Report.h"
#include "shardproof/support/Error.h"

#include <llvm/Support/Error.h>
#include <llvm/Support/raw_ostream.h>

#include <string>
#include <vector>

namespace shardproof::report {

/// Exit code of `check --relations` when the check itself is VERIFIED but the
/// relations differ from the recorded ones. REFUTED (1) and UNKNOWN (2) win over it.
constexpr int kExitRelationsChanged = 5;

/// One line of a relation file. `status` uses the JSON report's names
/// (input, matched, view, unmatched, unsupported).
struct RelationEntry {
  std::string tensor, module, op, status, relation;
  SrcLoc loc; // where the entry is in the file it was read from (empty when computed)
};

struct RelationFile {
  std::string verdict; // as recorded; informational, not compared
  std::vector<RelationEntry> entries;
};

/// The rows of a check that a relation file records, in graph order. Rows of
/// `Constant` nodes are left out: their value comes from the reference graph
/// alone (the check already requires the ranks to agree on it), so a line for
/// each would only bury the relations that can change with the sharding.
std::vector<RelationEntry> recordedEntries(const relation::Result &r);

/// The relation file for a check's result. `ctx` supplies the names shown in the
/// header comment; only their file names are used, so the bytes do not depend on
/// the directory the command ran in.
std::string writeRelationFile(const relation::Result &r, const Context &ctx);

/// Parses a relation file's text; `path` names it in messages.
llvm::Expected<RelationFile> parseRelationFile(const std::string &text, const std::string &path);
/// Reads and parses a relation file. Missing, unreadable or malformed: user error.
llvm::Expected<RelationFile> readRelationFile(const std::string &path);

struct RelationChange {
  RelationEntry recorded; // as in the file (with its location)
  RelationEntry current;  // as found now
};

/// How a check's relations differ from a recorded file, keyed by tensor name.
/// A tensor's relation differs when its status or relation text does. Module and
/// op are shown for context but not compared: they describe the reference graph,
/// while the file guards how each tensor is rebuilt from the ranks.
struct RelationDiff {
  std::vector<RelationChange> changed;  // in current graph order; front() is the first
  std::vector<RelationEntry> added;     // computed now, absent from the file (graph order)
  std::vector<RelationEntry> removed;   // in the file, not computed now (file order)
  std::string recordedVerdict, verdict;
  bool empty() const { return changed.empty() && added.empty() && removed.empty(); }
};

RelationDiff diffRelations(const RelationFile &recorded, const relation::Result &current);
/// `shardproof diff OLD NEW`: how NEW's relations differ from OLD's.
RelationDiff diffRelationFiles(const RelationFile &before, const RelationFile &after);
/// Every change of a file-to-file diff, old -> new, with both files' lines.
void printRelationFileDiff(llvm::raw_ostream &os, const RelationDiff &d, const std::string &before,
                           const std::string &after);

/// The comparison for the text report: one line when nothing changed; otherwise
/// the first changed tensor with both relations, then counts and names of the
/// other changes, additions and removals, and how to accept them. `path` is the
/// relation file as given. `brief` (for --quiet): one line.
void printRelationDiff(llvm::raw_ostream &os, const RelationDiff &d, const std::string &path, const Context &ctx,
                       bool brief = false);

/// The exit code of a check that was compared with a relation file.
int exitCode(relation::Verdict v, const RelationDiff &d);

} // namespace shardproof::report
