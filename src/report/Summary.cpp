// The check as a Markdown summary for a pull-request comment (--summary-md):
// short when the run is clean, complete when it fails.
#include "shardproof/report/RelationFile.h"
#include "shardproof/report/Report.h"

#include <llvm/Support/FormatVariadic.h>

#include <map>

namespace shardproof::report {

using namespace relation;

namespace {

// Inline code that survives any tensor name (`a`b` becomes ``a`b``).
std::string code(const std::string &s) {
  std::string fence = s.find('`') == std::string::npos ? "`" : "``";
  return fence + (fence.size() > 1 ? " " + s + " " : s) + fence;
}

// Table cells: a pipe would end the cell, a newline the row.
std::string cell(std::string s) {
  std::string out;
  for (char c : s)
    out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

void failureDetail(std::string &md, const Failure &f) {
  if (!f.module.empty())
    md += "- module " + code(f.module) + "\n";
  if (!f.refNode.empty())
    md += "- reference node " + code(f.refNode) + (f.refOp.empty() ? "" : " (" + f.refOp + ")") + "\n";
  if (!f.rankNodes.empty()) {
    md += "- rank nodes nearby:";
    for (auto &n : f.rankNodes)
      md += " " + code(n);
    md += "\n";
  }
  for (auto &site : f.sources)
    md += "- python: " + code(site.loc.file + ":" + std::to_string(site.loc.line)) +
          (site.function.empty() ? "" : " in " + code(site.function)) + " (" + site.role + ")\n";
  if (!f.cex)
    return;
  const Counterexample &c = *f.cex;
  md += "- counterexample: " + sizesOf(c) + (c.rank >= 0 ? ", rank " + std::to_string(c.rank) : "") + ", " +
        code(elementOf(c)) + "\n";
  if (c.replayed)
    md += llvm::formatv("- replayed on numbers: reference **{0}**, implementation **{1}** (confirmed)\n",
                        c.expectedValue, c.actualValue)
              .str();
  else if (!c.replay.empty())
    md += "- replay: " + c.replay + "\n";
}

void changesSection(std::string &md, const RelationDiff &d) {
  if (d.empty()) {
    md += "\nRelations: unchanged from the relation file.\n";
    return;
  }
  md += llvm::formatv("\n### Relations changed: {0} changed, {1} added, {2} removed\n", d.changed.size(),
                      d.added.size(), d.removed.size())
            .str();
  // Grouped by module, in graph order of each module's first change.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const RelationChange *>> byModule;
  for (auto &c : d.changed) {
    const std::string &m = c.current.module.empty() ? "(top level)" : c.current.module;
    if (!byModule.count(m))
      order.push_back(m);
    byModule[m].push_back(&c);
  }
  for (auto &m : order) {
    md += "\n**" + cell(m) + "**\n\n| tensor | recorded | now |\n|---|---|---|\n";
    for (const RelationChange *c : byModule[m])
      md += "| " + cell(code(c->current.tensor)) + " | " + cell(c->recorded.status + " " + code(c->recorded.relation)) +
            " | " + cell(c->current.status + " " + code(c->current.relation)) + " |\n";
  }
  for (auto &a : d.added)
    md += "- added: " + code(a.tensor) + " " + a.status + " " + code(a.relation) + "\n";
  for (auto &r : d.removed)
    md += "- removed: " + code(r.tensor) + " (was " + r.status + ")\n";
}

} // namespace

std::string toMarkdown(const Result &r, const Context &ctx, const RelationDiff *changes) {
  std::string md = "## shardproof: " + std::string(toString(r.verdict)) + "\n\n";
  md += code(ctx.specPath) + ": reference " + code(ctx.reference) + ", " + std::to_string(ctx.rankPaths.size()) +
        " rank graphs.\n\n";
  unsigned proven = 0;
  for (auto &o : r.outputs)
    proven += o.verdict == Verdict::Verified;
  if (r.verdict == Verdict::Verified) {
    md += llvm::formatv("All {0} outputs are rebuilt from the ranks' outputs for every admissible size.\n",
                        r.outputs.size())
              .str();
  } else {
    md += "**" + std::string(toString(r.verdict)) + ":** " + r.reason + "\n\n";
    md += "| output | verdict |\n|---|---|\n";
    for (auto &o : r.outputs)
      md += "| " + cell(code(o.tensor)) + " | " + toString(o.verdict) + " |\n";
    md += llvm::formatv("\n{0} of {1} outputs proven.\n", proven, r.outputs.size()).str();
    if (!r.failures.empty()) {
      md += "\n### " + std::string(r.verdict == Verdict::Refuted ? "First failing node" : "What stopped the proof") +
            "\n\n";
      failureDetail(md, r.failures.front());
      // The node's own counterexample may be symbolic only; the first one
      // execution confirmed is the number a reviewer trusts.
      if (!(r.failures.front().cex && r.failures.front().cex->replayed))
        for (const Failure &f : r.failures)
          if (f.cex && f.cex->replayed) {
            md += "- confirmed by execution: " + f.message + "\n";
            const Counterexample &c = *f.cex;
            md += "  - at " + sizesOf(c) + (c.rank >= 0 ? ", rank " + std::to_string(c.rank) : "") + ", " +
                  code(elementOf(c)) +
                  llvm::formatv(": reference **{0}**, implementation **{1}** (confirmed)\n", c.expectedValue,
                                c.actualValue)
                      .str();
            break;
          }
      if (r.failures.size() > 1) {
        md += llvm::formatv("\n<details><summary>{0} more</summary>\n\n", r.failures.size() - 1).str();
        for (size_t i = 1; i < r.failures.size(); ++i)
          md += "- " + cell(r.failures[i].message) + "\n";
        md += "\n</details>\n";
      }
    }
  }
  if (changes)
    changesSection(md, *changes);
  return md;
}

std::string relationDiffMarkdown(const RelationDiff &d, const std::string &before, const std::string &after) {
  std::string md = "## shardproof diff: " + std::string(d.empty() ? "relations unchanged" : "RELATIONS CHANGED") +
                   "\n\n" + code(before) + " -> " + code(after) + "\n";
  if (!d.recordedVerdict.empty() && d.recordedVerdict != d.verdict)
    md += "\nVerdict: " + d.recordedVerdict + " -> **" + d.verdict + "**\n";
  if (!d.empty())
    changesSection(md, d);
  return md;
}

} // namespace shardproof::report
