// Rendering a check's result: a human report (text) and a machine one (JSON).
#pragma once

#include "shardproof/relation/Verifier.h"

#include <llvm/Support/raw_ostream.h>

#include <string>
#include <vector>

namespace shardproof::report {

struct Context {
  std::string specPath;
  std::string reference;
  std::vector<std::string> rankPaths;
};

struct TextOptions {
  bool showTable = true;  // the per-layer relation table
  bool showStats = false; // solver and timing figures
};

/// Exit code for a verdict: 0 VERIFIED, 1 REFUTED, 2 UNKNOWN.
int exitCode(relation::Verdict v);

void printText(llvm::raw_ostream &os, const relation::Result &r, const Context &ctx, const TextOptions &opts = {});
std::string toJson(const relation::Result &r, const Context &ctx);

/// Writes `text` to `path` via a temporary file and a rename, so a failure never
/// leaves half a file behind (for --json and relation files). A failure is a
/// user error naming the path.
llvm::Error writeFileAtomically(const std::string &path, const std::string &text);

} // namespace shardproof::report
