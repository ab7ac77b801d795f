#include "shardproof/report/Report.h"

#include <llvm/Support/Format.h>

#include <algorithm>

namespace shardproof::report {

using namespace relation;

int exitCode(Verdict v) {
  switch (v) {
  case Verdict::Verified: return 0;
  case Verdict::Refuted: return 1;
  case Verdict::Unknown: return 2;
  }
  return 2;
}

std::string sizesOf(const Counterexample &c) {
  std::string s;
  for (auto &[n, v] : c.sizes)
    s += (s.empty() ? "" : ", ") + n + "=" + std::to_string(v);
  return s.empty() ? "any sizes" : s;
}

std::string elementOf(const Counterexample &c) {
  std::string s = c.tensor;
  if (!c.index.empty()) {
    s += "[";
    for (size_t i = 0; i < c.index.size(); ++i)
      s += (i ? ", " : "") + std::to_string(c.index[i]);
    s += "]";
  }
  return s;
}

static const char *statusName(RelationRow::Status s) {
  switch (s) {
  case RelationRow::Input: return "input";
  case RelationRow::Matched: return "matched";
  case RelationRow::View: return "view";
  case RelationRow::Unmatched: return "NO RELATION";
  case RelationRow::Unsupported: return "UNSUPPORTED";
  }
  return "?";
}

static std::string clip(const std::string &s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

// Only a REFUTED verdict has counterexamples; under UNKNOWN the same data is
// just an element the checker could not relate.
static void printCex(llvm::raw_ostream &os, const Counterexample &c, bool refuted) {
  os << (refuted ? "  counterexample: " : "  unrelated element: ") << c.str() << "\n";
  if (!c.expected.empty())
    os << "    reference:      " << clip(c.expected, 300) << "\n";
  if (!c.actual.empty())
    os << "    implementation: " << clip(c.actual, 300) << "\n";
  if (c.replayed && !c.replay.empty())
    os << "    evaluated at these sizes: " << c.replay << "\n";
  else if (c.replayed)
    os << "    evaluated on seeded random inputs at these sizes: reference = "
       << llvm::format("%.6g", c.expectedValue) << ", implementation = " << llvm::format("%.6g", c.actualValue)
       << "\n";
}

void printText(llvm::raw_ostream &os, const Result &r, const Context &ctx, const TextOptions &opts) {
  os << "shardproof check " << ctx.specPath << "\n";
  os << "  reference: " << ctx.reference << "\n";
  os << "  ranks:     " << ctx.rankPaths.size() << " (";
  for (size_t i = 0; i < ctx.rankPaths.size() && i < 4; ++i)
    os << (i ? ", " : "") << ctx.rankPaths[i];
  if (ctx.rankPaths.size() > 4)
    os << ", ...";
  os << ")\n";

  if (opts.showTable && !r.rows.empty()) {
    os << "\nRelations (reference tensor = expression over rank tensors):\n";
    size_t wm = 6, wo = 2, wt = 6;
    for (auto &row : r.rows) {
      wm = std::max(wm, std::min<size_t>(row.module.size(), 24));
      wo = std::max(wo, std::min<size_t>(row.op.size(), 14));
      wt = std::max(wt, std::min<size_t>(row.tensor.size(), 32));
    }
    auto pad = [](const std::string &s, size_t w) { return clip(s, w) + std::string(w - std::min(w, clip(s, w).size()), ' '); };
    os << "  " << pad("module", wm) << "  " << pad("op", wo) << "  " << pad("tensor", wt) << "  status       relation\n";
    for (auto &row : r.rows) {
      std::string module = row.module.empty() ? "-" : row.module;
      std::string op = row.status == RelationRow::Input ? "input" : row.op;
      os << "  " << pad(module, wm) << "  " << pad(op, wo) << "  " << pad(row.tensor, wt) << "  "
         << pad(statusName(row.status), 11) << "  " << clip(row.relation, 160) << "\n";
    }
  }

  if (!r.outputs.empty()) {
    os << "\nOutputs:\n";
    for (auto &o : r.outputs) {
      os << "  " << o.tensor << ": " << toString(o.verdict) << (o.detail.empty() ? "" : " (" + o.detail + ")");
      // An equal output does not outweigh a failed side condition: say so on
      // the line, so it never reads as VERIFIED under a REFUTED headline.
      if (o.verdict == Verdict::Verified && r.verdict != Verdict::Verified)
        os << " (this output; the check as a whole is " << toString(r.verdict) << ", see below)";
      os << "\n";
    }
  }

  os << "\n" << toString(r.verdict);
  if (r.verdict != Verdict::Verified && !r.failures.empty()) {
    const Failure &f = r.failures.front();
    if (!f.module.empty())
      os << " at module " << f.module;
    if (!f.refNode.empty())
      os << " (reference node " << f.refNode << (f.refOp.empty() || f.refOp == "reference" ? "" : ", " + f.refOp) << ")";
  }
  os << ": " << r.reason << "\n";
  if (r.verdict != Verdict::Verified) {
    bool first = true;
    for (auto &f : r.failures) {
      if (!first)
        os << "- " << f.message << "\n";
      first = false;
      if (!f.rankNodes.empty()) {
        os << "  rank nodes nearby: ";
        for (size_t i = 0; i < f.rankNodes.size(); ++i)
          os << (i ? "; " : "") << f.rankNodes[i];
        os << "\n";
      }
      for (auto &site : f.sources)
        os << "  python: " << site.loc.file << ":" << site.loc.line
           << (site.function.empty() ? "" : " in " + site.function) << " (" << site.role << ")\n";
      if (f.cex)
        printCex(os, *f.cex, r.verdict == Verdict::Refuted);
    }
  }
  for (auto &n : r.notes)
    os << "note: " << n << "\n";
  if (opts.showStats)
    printStats(os, r.stats);
}

void printStats(llvm::raw_ostream &os, const Stats &s) {
  double total = s.loadSeconds + s.seconds + s.reportSeconds;
  os << "stats:\n";
  os << llvm::format("  nodes:     %u reference, %u on the ranks\n", s.refNodes, s.rankNodes);
  os << llvm::format("  classes:   %u (rank tensors after merging)\n", s.classes);
  os << llvm::format("  relations: %u reference tensors related, %u rewrite matches, %llu rewrite steps\n", s.relations,
                     s.matches, static_cast<unsigned long long>(s.rewriteSteps));
  os << llvm::format("  memo:      %u node results reused, %u stored (layers identical up to names); layers copied "
                     "whole: %u of the ranks, %u of the reference\n",
                     s.memoHits, s.memoStored, s.layersCopied, s.refLayersCopied);
  if (s.probes > 0)
    os << llvm::format("  numbers:   %u probes of proposals, %u gave up\n", s.probes, s.probesGaveUp);
  os << llvm::format("  side conditions: %u, %u distinct formulas\n", s.obligations, s.distinctObligations);
  os << llvm::format("  solver:    %u queries, %u cache hits, %u met by an earlier model, %u proven by intervals, "
                     "%.3f s in the solver\n",
                     s.solverQueries, s.cacheHits, s.witnessed, s.byIntervals, s.solverSeconds);
  os << llvm::format("  time:      load %.3f s, build world %.3f s, relation inference %.3f s, output check %.3f s, "
                     "report %.3f s; total %.3f s\n",
                     s.loadSeconds, s.worldSeconds, s.inferSeconds, s.checkSeconds, s.reportSeconds, total);
  if (s.peakRssKiB > 0)
    os << llvm::format("  peak RSS:  %.1f MiB\n", s.peakRssKiB / 1024.0);
  size_t shown = std::min<size_t>(s.queries.size(), 5);
  for (size_t i = 0; i < shown; ++i)
    os << llvm::format("  solver time %-28s %6u queries %8.3f s\n", (s.queries[i].name + ":").c_str(),
                       s.queries[i].count, s.queries[i].seconds);
  for (auto &t : s.slowestNodes)
    os << llvm::format("  slow node   %8.3f s (solver %.3f s)  ", t.seconds, t.solverSeconds) << t.node << " ("
       << t.op << ")" << (t.module.empty() ? "" : " in " + t.module) << "\n";
}

} // namespace shardproof::report
