// The check as one self-contained HTML page (--html). Everything a reader or
// a test looks for is rendered here, with stable ids and data- attributes;
// the inline script (HtmlAssets.cpp) only folds, filters and draws the rows
// of layers folded as identical, from the JSON data block in the page.
#include "HtmlModel.h"

#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

namespace shardproof::report {

using namespace relation;
using namespace html;
namespace json = llvm::json;

namespace {

std::string esc(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  }
  return out;
}

// Module paths are user text; in a link they are percent-encoded (the
// script decodes them).
std::string fragment(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-')
      out += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string num(double v, const char *fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string utf8(const std::string &s) { return json::isUTF8(s) ? s : json::fixUTF8(s); }

const char *verdictClass(Verdict v) {
  return v == Verdict::Verified ? "v-verified" : v == Verdict::Refuted ? "v-refuted" : "v-unknown";
}

const char *kindLabel(Failure::Kind k) {
  switch (k) {
  case Failure::NoRelation: return "no rank tensor computes this node";
  case Failure::OutputMismatch: return "an output differs from the reference";
  case Failure::Obligation: return "a size or coverage condition does not hold";
  case Failure::Unsupported: return "an operator shardproof does not model";
  case Failure::SolverUnknown: return "the solver could not decide";
  }
  return "?";
}

std::string plural(size_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "AllReduce ×2, AllGather" in order of first appearance.
std::string opSummary(const std::vector<std::string> &ops) {
  std::vector<std::pair<std::string, unsigned>> counts;
  for (auto &op : ops) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto &p) { return p.first == op; });
    if (it == counts.end())
      counts.emplace_back(op, 1);
    else
      ++it->second;
  }
  std::string s;
  for (auto &[op, n] : counts)
    s += (s.empty() ? "" : ", ") + op + (n > 1 ? " \u00d7" + std::to_string(n) : "");
  return s;
}

class Page {
public:
  Page(const Result &r, const Context &ctx)
      : r(r), ctx(ctx), groups(groupCollectives(ctx)), tree(buildTree(r, groups)) {
    for (auto &f : r.failures)
      if (!f.refNode.empty())
        failingNodes.insert(f.refNode);
    world = static_cast<int>(ctx.rankPaths.size());
    for (auto &s : ctx.collectives)
      world = std::max(world, s.rank + 1);
  }

  std::string render() {
    const char *v = toString(r.verdict);
    h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta name=\"generator\" content=\"shardproof check --html\">\n";
    h += "<title>shardproof: " + std::string(v) + " \u2014 " + esc(ctx.specPath) + "</title>\n";
    h += "<style>" + std::string(kStyle) + "</style>\n</head>\n";
    h += "<body data-verdict=\"" + std::string(v) + "\">\n<main>\n";
    header();
    h += "<nav><a href=\"#outputs\">Outputs</a>";
    if (!r.failures.empty())
      h += "<a href=\"#first-failure\">First failure</a>";
    h += "<a href=\"#modules\">Module tree</a><a href=\"#collectives\">Collectives</a>";
    if (r.failures.size() > 1)
      h += "<a href=\"#other-failures\">Other failures</a>";
    h += "</nav>\n";
    outputs();
    firstFailure();
    modules();
    collectives();
    otherFailures();
    notes();
    h += "<footer>Written by <code>shardproof check --html</code>. The page is self-contained: it loads "
         "nothing from the network.</footer>\n</main>\n";
    dataBlock();
    h += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
    return std::move(h);
  }

private:
  const Result &r;
  const Context &ctx;
  std::vector<CollectiveGroup> groups;
  std::unique_ptr<ModNode> tree;
  std::set<std::string> failingNodes; // reference nodes named by a failure
  int world = 0;
  std::string h;

  void header() {
    const char *v = toString(r.verdict);
    unsigned proven = 0;
    for (auto &o : r.outputs)
      proven += o.verdict == Verdict::Verified;
    size_t bars = 0;
    for (auto &g : groups)
      bars += g.bars.size();
    h += "<header id=\"summary\" class=\"" + std::string(verdictClass(r.verdict)) + "\">\n";
    h += "<h1><span id=\"verdict\" class=\"verdict " + std::string(verdictClass(r.verdict)) + "\" data-verdict=\"" + v +
         "\">" + v + "</span> <code>" + esc(ctx.specPath) + "</code></h1>\n";
    h += "<p id=\"reason\">" + esc(r.reason) + "</p>\n<dl class=\"facts\">";
    h += "<dt>spec</dt><dd><code id=\"spec-path\">" + esc(ctx.specPath) + "</code></dd>";
    h += "<dt>reference</dt><dd><code id=\"reference-path\">" + esc(ctx.reference) + "</code></dd>";
    h += "<dt>ranks</dt><dd><details id=\"ranks\"" + std::string(ctx.rankPaths.size() <= 8 ? " open" : "") +
         "><summary>" + plural(ctx.rankPaths.size(), "rank graph", "rank graphs") +
         "</summary><ol id=\"rank-paths\" start=\"0\">";
    for (auto &p : ctx.rankPaths)
      h += "<li><code>" + esc(p) + "</code></li>";
    h += "</ol></details></dd></dl>\n<ul class=\"counts\">";
    h += "<li><b id=\"count-reference-nodes\">" + std::to_string(r.stats.refNodes) + "</b> reference nodes</li>";
    h += "<li><b id=\"count-relations\">" + std::to_string(r.rows.size()) + "</b> relation rows</li>";
    h += "<li><b id=\"count-outputs-proven\">" + std::to_string(proven) + "</b> of <b id=\"count-outputs\">" +
         std::to_string(r.outputs.size()) + "</b> outputs proven</li>";
    h += "<li><b id=\"count-failures\">" + std::to_string(r.failures.size()) + "</b> failures</li>";
    h += "<li><b id=\"count-collectives\">" + std::to_string(bars) + "</b> collectives</li></ul>\n";
    h += "<ul class=\"legend\" id=\"status-counts\" title=\"click to hide or show rows of a status\">";
    for (int s = 0; s < kStatuses; ++s)
      h += "<li><button type=\"button\" class=\"chip s-" + std::string(statusKey(s)) + "\" data-filter=\"" +
           statusKey(s) + "\"><b id=\"count-status-" + statusKey(s) + "\">" + std::to_string(tree->counts[s]) +
           "</b> " + statusLabel(s) + "</button></li>";
    h += "</ul>\n</header>\n";
  }

  void outputs() {
    h += "<section id=\"outputs\"><h2>Outputs</h2>\n<table id=\"outputs-table\"><thead><tr><th>tensor</th>"
         "<th>verdict</th><th>detail</th></tr></thead><tbody>\n";
    for (auto &o : r.outputs) {
      const char *v = toString(o.verdict);
      h += "<tr data-tensor=\"" + esc(o.tensor) + "\" data-verdict=\"" + v + "\"><td><code>" + esc(o.tensor) +
           "</code></td><td><span class=\"verdict " + verdictClass(o.verdict) + "\">" + v + "</span></td><td>" +
           esc(o.detail) + "</td></tr>\n";
    }
    h += "</tbody></table></section>\n";
  }

  void moduleLink(const std::string &m) {
    h += "<a class=\"modlink\" href=\"#module=" + fragment(m) + "\"><code>" + esc(m) + "</code></a>";
  }

  // The numbers execution gave; with `ids`, the ones a test reads.
  void replayNumbers(const Counterexample &c, bool ids) {
    auto number = [&](const char *id, double v) {
      h += "<b class=\"num\"" + (ids ? " id=\"" + std::string(id) + "\"" : std::string()) + " data-value=\"" +
           num(v, "%.17g") + "\">" + num(v, "%.6g") + "</b>";
    };
    h += "reference ";
    number("replay-expected", c.expectedValue);
    h += ", implementation ";
    number("replay-actual", c.actualValue);
    h += " <span class=\"confirmed\">(confirmed by executing both sides";
    h += c.expectedByInterpreter ? "; the reference number from running its graph)" : ")";
    h += "</span>";
  }

  void counterexample(const Counterexample &c, bool ids) {
    std::string sizes = sizesOf(c), element = elementOf(c);
    h += "<dt>counterexample</dt><dd class=\"cex\"><span class=\"sizes\">" + esc(sizes) +
         "</span>" + (c.rank >= 0 ? ", rank <b class=\"rank\">" + std::to_string(c.rank) + "</b>" : std::string()) +
         ", <code class=\"element\">" + esc(element) + "</code>";
    if (!c.expected.empty() || !c.actual.empty())
      h += "<details class=\"symbolic\"><summary>both sides, symbolic</summary>expected (reference)<pre>" +
           esc(c.expected) + "</pre>actual (implementation)<pre>" + esc(c.actual) + "</pre></details>";
    h += "</dd>";
    if (c.replayed) {
      h += "<dt>replay</dt><dd class=\"replay\">";
      replayNumbers(c, ids);
      h += "</dd>";
    } else if (!c.replay.empty()) {
      h += "<dt>replay</dt><dd class=\"replay\">" + esc(c.replay) + "</dd>";
    }
    if (!c.intInputs.empty())
      h += "<dt>integer inputs</dt><dd>" + esc(c.intInputs) + "</dd>";
  }

  void failureFacts(const Failure &f, bool ids) {
    h += "<dl class=\"facts\"><dt>kind</dt><dd>" + std::string(kindLabel(f.kind)) + " <code>" + toString(f.kind) +
         "</code></dd>";
    if (f.bugClass != BugClass::None)
      h += "<dt>bug class</dt><dd><code class=\"bug-class\">" + std::string(toString(f.bugClass)) + "</code></dd>";
    if (!f.module.empty()) {
      h += "<dt>module</dt><dd>";
      moduleLink(f.module);
      h += "</dd>";
    }
    if (!f.refNode.empty())
      h += "<dt>reference node</dt><dd><code class=\"ref-node\">" + esc(f.refNode) + "</code>" +
           (f.refOp.empty() ? std::string() : " (" + esc(f.refOp) + ")") + "</dd>";
    if (!f.tensor.empty())
      h += "<dt>tensor</dt><dd><code>" + esc(f.tensor) + "</code></dd>";
    if (!f.rankNodes.empty()) {
      h += "<dt>rank nodes nearby</dt><dd><ul class=\"near\">";
      for (auto &n : f.rankNodes)
        h += "<li><code>" + esc(n) + "</code></li>";
      h += "</ul></dd>";
    }
    if (!f.sources.empty()) {
      h += "<dt>python</dt><dd><ul class=\"python\">";
      for (auto &site : f.sources)
        h += "<li><code>" + esc(site.loc.file + ":" + std::to_string(site.loc.line)) + "</code>" +
             (site.function.empty() ? std::string() : " in <code>" + esc(site.function) + "</code>") + " (" +
             esc(site.role) + ")</li>";
      h += "</ul></dd>";
    }
    if (f.cex)
      counterexample(*f.cex, ids);
    h += "</dl>\n";
  }

  void firstFailure() {
    if (r.failures.empty())
      return;
    const Failure &f = r.failures.front();
    h += "<section id=\"first-failure\" class=\"failure\" data-index=\"0\" data-kind=\"" +
         std::string(toString(f.kind)) + "\" data-module=\"" + esc(f.module) + "\">\n<h2>" +
         (r.verdict == Verdict::Refuted ? "First failing node" : "What stopped the proof") + "</h2>\n";
    h += "<p class=\"message\">" + esc(f.message) + "</p>\n";
    bool confirmed = f.cex && f.cex->replayed;
    failureFacts(f, confirmed);
    // The node's own counterexample may be symbolic only; the first one
    // execution confirmed is the number a reviewer trusts.
    if (!confirmed)
      for (size_t i = 1; i < r.failures.size(); ++i) {
        const Failure &g = r.failures[i];
        if (!g.cex || !g.cex->replayed)
          continue;
        h += "<div class=\"confirmed-by-execution\" data-index=\"" + std::to_string(i) +
             "\"><h3>Confirmed by execution</h3><p class=\"message\">" + esc(g.message) + "</p><dl class=\"facts\">";
        counterexample(*g.cex, true);
        h += "</dl></div>\n";
        break;
      }
    h += "</section>\n";
  }

  void otherFailures() {
    if (r.failures.size() < 2)
      return;
    h += "<section id=\"other-failures\"><h2>Other failures (" + std::to_string(r.failures.size() - 1) + ")</h2>\n";
    for (size_t i = 1; i < r.failures.size(); ++i) {
      const Failure &f = r.failures[i];
      h += "<details class=\"failure\" data-index=\"" + std::to_string(i) + "\" data-kind=\"" + toString(f.kind) +
           "\" data-module=\"" + esc(f.module) + "\"><summary class=\"message\">" + esc(f.message) + "</summary>";
      failureFacts(f, false);
      h += "</details>\n";
    }
    h += "</section>\n";
  }

  void notes() {
    if (r.notes.empty() && !r.sample)
      return;
    h += "<section id=\"notes\"><h2>Notes</h2><ul>";
    for (auto &n : r.notes)
      h += "<li>" + esc(n) + "</li>";
    if (r.sample)
      h += "<li>--sample: " + plural(r.sample->sizes, "size", "sizes") + " executed, " +
           std::to_string(r.sample->elements) + " output elements compared, " +
           plural(r.sample->disagreements.size(), "disagreement", "disagreements") + "</li>";
    h += "</ul></section>\n";
  }

  void strip(const std::array<unsigned, kStatuses> &counts) {
    std::string title;
    for (int s = 0; s < kStatuses; ++s)
      if (counts[s])
        title += (title.empty() ? "" : ", ") + std::to_string(counts[s]) + " " + statusLabel(s);
    h += "<span class=\"strip\" title=\"" + title + "\">";
    for (int s = 0; s < kStatuses; ++s)
      if (counts[s])
        h += "<i class=\"s-" + std::string(statusKey(s)) + "\" style=\"flex-grow:" + std::to_string(counts[s]) +
             "\"></i>";
    h += "</span>";
  }

  void rowsTable(const std::vector<size_t> &rows) {
    h += "<table class=\"rows\"><thead><tr><th>tensor</th><th>op</th><th>status</th><th>relation</th></tr>"
         "</thead><tbody>\n";
    for (size_t i : rows) {
      const RelationRow &row = r.rows[i];
      const char *key = statusKey(row.status);
      bool failing = !row.node.empty() && failingNodes.count(row.node);
      h += "<tr class=\"row s-" + std::string(key) + (failing ? " failing-row" : "") + "\" data-status=\"" + key +
           "\"><td><code>" + esc(row.tensor) + "</code></td><td>" + (row.op.empty() ? "\u2014" : esc(row.op)) +
           "</td><td><span class=\"st s-" + key + "\">" + statusLabel(row.status) +
           "</span></td><td><code class=\"rel\">" + esc(row.relation) + "</code></td></tr>\n";
    }
    h += "</tbody></table>";
  }

  void node(const ModNode &n) {
    bool open = !n.parent || n.holdsFirstFailure || n.leadsToLayers;
    std::string cls = "mod";
    if (!n.failures.empty())
      cls += " failing";
    else if (n.subtreeFailures)
      cls += " has-failing";
    if (n.layer >= 0)
      cls += " layer";
    if (n.sameAs)
      cls += " identical";
    h += "<details class=\"" + cls + "\" data-module=\"" + esc(n.path) + "\"";
    for (int s = 0; s < kStatuses; ++s)
      h += " data-" + std::string(statusKey(s)) + "=\"" + std::to_string(n.counts[s]) + "\"";
    h += " data-rows=\"" + std::to_string(n.total()) + "\"";
    if (n.layer >= 0)
      h += " data-layer=\"" + std::to_string(n.layer) + "\"";
    if (n.sameAs)
      h += " data-identical-to=\"" + std::to_string(n.sameAs->layer) + "\" data-identical-module=\"" +
           esc(n.sameAs->path) + "\"";
    if (!n.failures.empty())
      h += " data-failures=\"" + std::to_string(n.failures.size()) + "\"";
    if (n.firstFailure)
      h += " data-first-failure=\"true\"";
    h += open ? " open>" : ">";
    h += "<summary><span class=\"name\">" + esc(n.label()) + "</span>";
    strip(n.counts);
    h += "<span class=\"n\">" + plural(n.total(), "row", "rows") + "</span>";
    for (int s = 0; s < kStatuses; ++s)
      if (n.counts[s] && s != RelationRow::Matched)
        h += "<span class=\"c s-" + std::string(statusKey(s)) + "\">" + std::to_string(n.counts[s]) + " " +
             statusLabel(s) + "</span>";
    if (!n.subtreeCollectiveOps.empty())
      h += "<span class=\"badge coll\" title=\"collectives of the rank graphs in this module\">\u21c4 " +
           esc(opSummary(n.subtreeCollectiveOps)) + "</span>";
    if (!n.failures.empty())
      h += "<span class=\"badge fail\">" + plural(n.failures.size(), "failure", "failures") + "</span>";
    if (n.sameAs)
      h += "<span class=\"same\">identical to layer " + std::to_string(n.sameAs->layer) + ", proven once</span>";
    h += "</summary>\n";
    if (n.sameAs) {
      h += "<p class=\"same\">Same ops, statuses and relations as ";
      moduleLink(n.sameAs->path);
      h += " up to the layer number. Its rows are drawn when this layer is opened.</p><div class=\"lazy\" "
           "data-module=\"" +
           esc(n.path) + "\"></div></details>\n";
      return;
    }
    for (size_t i : n.failures)
      h += "<p class=\"message\">\u2716 " + esc(r.failures[i].message) + "</p>";
    if (!n.rows.empty()) {
      // Open where the first failure is: its module, and the rows holding its node.
      bool open = n.firstFailure || (!r.failures.empty() && !r.failures[0].refNode.empty() &&
                                     std::any_of(n.rows.begin(), n.rows.end(),
                                                 [&](size_t i) { return r.rows[i].node == r.failures[0].refNode; }));
      h += "<details class=\"rows\"" + std::string(open ? " open" : "") + "><summary>" +
           plural(n.rows.size(), "row", "rows") + " of " + esc(n.label()) + "</summary>";
      rowsTable(n.rows);
      h += "</details>\n";
    }
    for (auto &c : n.children)
      node(*c);
    h += "</details>\n";
  }

  void modules() {
    h += "<section id=\"modules\"><h2>Module tree</h2>\n<p class=\"n\">Rows of the relation table by module and "
         "status. Layers identical to an earlier one up to their number are folded. "
         "<button type=\"button\" id=\"expand-all\">expand all</button> "
         "<button type=\"button\" id=\"collapse-all\">collapse all</button></p>\n<div id=\"tree\">\n";
    node(*tree);
    h += "</div></section>\n";
  }

  // One column per rank, a bar joining the ranks each collective joins.
  void diagram(const CollectiveGroup &g) {
    auto n = [](long v) { return "\"" + std::to_string(v) + "\""; };
    int col = world <= 8 ? 72 : std::max(18, 576 / std::max(world, 1));
    int left = 8, top = 22, rowH = 26, labelW = 380;
    int width = left + world * col + 12 + labelW, height = top + static_cast<int>(g.bars.size()) * rowH + 6;
    auto x = [&](int rank) { return left + col / 2 + rank * col; };
    h += "<svg class=\"colls\" xmlns=\"http://www.w3.org/2000/svg\" width=" + n(width) + " height=" + n(height) +
         " viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" role=\"img\" aria-label=\"collectives of " + esc(g.unit) + "\">";
    for (int rk = 0; rk < world; ++rk) {
      h += "<text x=" + n(x(rk)) + " y=\"14\" text-anchor=\"middle\">" + (col >= 50 ? "rank " : "") +
           std::to_string(rk) + "</text>";
      h += "<line class=\"lane\" x1=" + n(x(rk)) + " y1=" + n(top) + " x2=" + n(x(rk)) + " y2=" + n(height - 4) + "/>";
    }
    for (size_t i = 0; i < g.bars.size(); ++i) {
      const CollectiveBar &b = g.bars[i];
      int y = top + rowH / 2 + static_cast<int>(i) * rowH;
      std::string ranks, names;
      for (size_t j = 0; j < b.ranks.size(); ++j) {
        ranks += (j ? "," : "") + std::to_string(b.ranks[j]);
        names += (j ? "\n" : "") + ("rank " + std::to_string(b.ranks[j]) + ": " + b.nodes[j]);
      }
      h += "<g class=\"collective op-" + esc(b.op) + "\" data-op=\"" + esc(b.op) + "\" data-ranks=\"" + ranks +
           "\" data-module=\"" + esc(b.module) + "\"><title>" + esc(names) + "</title>";
      h += "<line class=\"bar\" x1=" + n(x(b.ranks.front())) + " y1=" + n(y) + " x2=" + n(x(b.ranks.back())) +
           " y2=" + n(y) + "/>";
      for (int rk = 0; rk < world; ++rk) {
        bool in = std::binary_search(b.ranks.begin(), b.ranks.end(), rk);
        h += "<circle class=\"" + std::string(in ? "site" : "absent") + "\" data-rank=" + n(rk) + " cx=" + n(x(rk)) +
             " cy=" + n(y) + " r=\"6\"/>";
      }
      std::string label = b.op + (b.mixedOps ? " (ranks disagree on the op)" : "") + "  " +
                          (b.module.empty() ? "(top level)" : b.module);
      h += "<text x=" + n(left + world * col + 12) + " y=" + n(y + 4) + ">" + esc(label) + "</text></g>";
    }
    h += "</svg>\n";
  }

  void collectives() {
    size_t bars = 0;
    for (auto &g : groups)
      bars += g.bars.size();
    h += "<section id=\"collectives\"><h2>Collectives</h2>\n";
    h += "<p><b id=\"count-collective-bars\">" + std::to_string(bars) + "</b> collectives among the " +
         plural(world, "rank", "ranks") + " (<b id=\"count-collective-sites\">" +
         std::to_string(ctx.collectives.size()) +
         "</b> collective nodes in the rank graphs), by layer. The ranks form one process group: each collective "
         "should join ranks 0.." +
         std::to_string(std::max(world - 1, 0)) +
         "; the i-th collective of a module on one rank is matched with "
         "the i-th on the others.</p>\n";
    if (groups.empty())
      h += "<p id=\"no-collectives\">The rank graphs contain no collectives.</p>\n";
    unsigned opened = 0;
    for (auto &g : groups) {
      bool partial = std::any_of(g.bars.begin(), g.bars.end(),
                                 [&](const CollectiveBar &b) { return static_cast<int>(b.ranks.size()) != world; });
      bool open = g.sameAs < 0 && (opened < 8 || partial);
      opened += open;
      std::vector<std::string> ops;
      for (auto &b : g.bars)
        ops.push_back(b.op);
      h += "<details class=\"coll-group" + std::string(g.sameAs >= 0 ? " identical" : "") +
           (partial ? " partial" : "") + "\" data-unit=\"" + esc(g.unit) + "\" data-collectives=\"" +
           std::to_string(g.bars.size()) + "\"";
      if (g.sameAs >= 0)
        h += " data-same-as=\"" + esc(groups[g.sameAs].unit) + "\"";
      h += open ? " open>" : ">";
      h += "<summary><span class=\"name\">" + esc(g.unit.empty() ? "(top level)" : g.unit) + "</span> " +
           plural(g.bars.size(), "collective", "collectives") + ": " + esc(opSummary(ops));
      if (g.sameAs >= 0)
        h += "<span class=\"same\">same as " + esc(groups[g.sameAs].unit) + " up to the layer number</span>";
      if (partial)
        h += "<span class=\"badge fail\">not every rank takes part</span>";
      h += "</summary>\n";
      diagram(g);
      h += "<table class=\"coll-nodes\"><thead><tr><th>collective</th><th>module</th><th>rank nodes</th></tr>"
           "</thead><tbody>";
      for (auto &b : g.bars) {
        h += "<tr data-op=\"" + esc(b.op) + "\"><td>" + esc(b.op) + "</td><td><code>" +
             esc(b.module.empty() ? "(top level)" : b.module) + "</code></td><td>";
        bool sameName = std::all_of(b.nodes.begin(), b.nodes.end(), [&](auto &n) { return n == b.nodes[0]; });
        if (sameName && static_cast<int>(b.ranks.size()) == world)
          h += "every rank: <code>" + esc(b.nodes[0]) + "</code>";
        else
          for (size_t j = 0; j < b.ranks.size(); ++j)
            h += (j ? ", " : "") + ("rank " + std::to_string(b.ranks[j]) + ": <code>" + esc(b.nodes[j]) + "</code>");
        h += "</td></tr>";
      }
      h += "</tbody></table></details>\n";
    }
    h += "</section>\n";
  }

  void layersJson(const ModNode &n, json::Array &out) {
    if (n.layer >= 0) {
      json::Object o{{"module", utf8(n.path)}, {"layer", static_cast<int64_t>(n.layer)}};
      o["identical_to"] = n.sameAs ? json::Value(utf8(n.sameAs->path)) : json::Value(nullptr);
      out.push_back(std::move(o));
    }
    for (auto &c : n.children)
      layersJson(*c, out);
  }

  // The --json report, the collectives and the layers folded, for the script
  // and for tools. `<` is written as \u003c (and `>`, `&` likewise) so no
  // string can close the script.
  void dataBlock() {
    json::Object data;
    auto report = json::parse(toJson(r, ctx));
    if (report) {
      data["report"] = std::move(*report);
    } else {
      llvm::consumeError(report.takeError());
      data["report"] = json::Object{{"relations", json::Array{}}};
    }
    json::Array sites;
    for (auto &s : ctx.collectives)
      sites.push_back(
          json::Object{{"rank", s.rank}, {"node", utf8(s.node)}, {"op", utf8(s.op)}, {"module", utf8(s.module)}});
    data["collectives"] = std::move(sites);
    json::Array layers;
    layersJson(*tree, layers);
    data["layers"] = std::move(layers);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << json::Value(std::move(data));
    os.flush();
    h += "<script type=\"application/json\" id=\"shardproof-data\">";
    for (char c : text) {
      if (c == '<')
        h += "\\u003c";
      else if (c == '>')
        h += "\\u003e";
      else if (c == '&')
        h += "\\u0026";
      else
        h += c;
    }
    h += "</script>\n";
  }
};

} // namespace

std::string toHtml(const Result &r, const Context &ctx) { return Page(r, ctx).render(); }

} // namespace shardproof::report
