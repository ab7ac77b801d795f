#include "shardproof/report/Report.h"

#include <llvm/Support/JSON.h>

namespace shardproof::report {

using namespace relation;
namespace json = llvm::json;

static json::Value cexJson(const Counterexample &c) {
  json::Object sizes;
  for (auto &[n, v] : c.sizes)
    sizes[n] = v;
  json::Array index;
  for (auto i : c.index)
    index.push_back(i);
  json::Object o{{"sizes", std::move(sizes)}, {"tensor", c.tensor}, {"index", std::move(index)},
                 {"expected", c.expected}, {"actual", c.actual}, {"replayed", c.replayed}};
  if (c.rank >= 0)
    o["rank"] = c.rank;
  if (c.leakValue)
    o["leak_value"] = *c.leakValue;
  if (!c.replay.empty())
    o["replay"] = c.replay;
  else if (c.replayed) {
    o["expected_value"] = c.expectedValue;
    o["actual_value"] = c.actualValue;
  }
  return o;
}

// The report streams its rows (21,508 of them for a 126-layer model): a DOM
// of them, sorted key by key on printing, cost 0.3 s and 130 MB there. Keys
// are written in sorted order, as llvm::json prints an Object, so the text is
// the same as a DOM's; the small parts are still built as values.
std::string toJson(const Result &r, const Context &ctx) {
  const char *status[] = {"input", "matched", "view", "unmatched", "unsupported"};
  json::Array fails;
  for (auto &f : r.failures) {
    json::Array near;
    for (auto &n : f.rankNodes)
      near.push_back(n);
    json::Object o{{"kind", toString(f.kind)}, {"message", f.message}, {"node", f.refNode},
                   {"module", f.module}, {"tensor", f.tensor}, {"rank_nodes", std::move(near)}};
    if (f.cex)
      o["counterexample"] = cexJson(*f.cex);
    if (f.bugClass != BugClass::None)
      o["bug_class"] = toString(f.bugClass);
    json::Array sources;
    for (auto &site : f.sources)
      sources.push_back(json::Object{{"role", site.role}, {"file", site.loc.file}, {"line", site.loc.line},
                                     {"function", site.function}});
    if (!sources.empty())
      o["sources"] = std::move(sources);
    fails.push_back(std::move(o));
  }
  json::Array notes;
  for (auto &n : r.notes)
    notes.push_back(n);
  json::Array ranks;
  for (auto &p : ctx.rankPaths)
    ranks.push_back(p);
  const Stats &st = r.stats;
  json::Array queries;
  for (auto &q : st.queries)
    queries.push_back(json::Object{{"name", q.name}, {"count", q.count}, {"seconds", q.seconds}});
  json::Array slowest;
  for (auto &t : st.slowestNodes)
    slowest.push_back(json::Object{{"node", t.node}, {"op", t.op}, {"module", t.module}, {"seconds", t.seconds},
                                   {"solver_seconds", t.solverSeconds}});
  json::Object phases{{"load", st.loadSeconds},   {"build_world", st.worldSeconds},
                      {"inference", st.inferSeconds}, {"output_check", st.checkSeconds},
                      {"report", st.reportSeconds}};
  json::Object stats{{"reference_nodes", st.refNodes},     {"rank_nodes", st.rankNodes},
                     {"classes", st.classes},              {"relations", st.relations},
                     {"matches", st.matches},              {"solver_queries", st.solverQueries},
                     {"cache_hits", st.cacheHits},         {"witnessed", st.witnessed},
                     {"by_intervals", st.byIntervals},
                     {"solver_seconds", st.solverSeconds},
                     {"rewrite_steps", static_cast<int64_t>(st.rewriteSteps)},
                     {"memo_hits", st.memoHits},           {"memo_stored", st.memoStored},
                     {"layers_copied", st.layersCopied},   {"reference_layers_copied", st.refLayersCopied},
                     {"numeric_probes", st.probes},        {"numeric_probes_gave_up", st.probesGaveUp},
                     {"obligations", st.obligations},      {"distinct_obligations", st.distinctObligations},
                     {"seconds", st.seconds},              {"phase_seconds", std::move(phases)},
                     {"peak_rss_kib", static_cast<int64_t>(st.peakRssKiB)},
                     {"solver_queries_by_kind", std::move(queries)},
                     {"slowest_reference_nodes", std::move(slowest)}};
  // A string value without a copy (StringRef values are kept by reference).
  auto str = [](const std::string &s) { return json::Value(llvm::StringRef(s)); };
  std::string s;
  llvm::raw_string_ostream os(s);
  {
    json::OStream out(os, 2);
    out.object([&] {
      out.attribute("failures", std::move(fails));
      out.attribute("notes", std::move(notes));
      out.attributeArray("outputs", [&] {
        for (auto &o : r.outputs)
          out.object([&] {
            out.attribute("detail", str(o.detail));
            out.attribute("tensor", str(o.tensor));
            out.attribute("verdict", toString(o.verdict));
          });
      });
      out.attribute("ranks", std::move(ranks));
      out.attribute("reason", str(r.reason));
      out.attribute("reference", str(ctx.reference));
      out.attributeArray("relations", [&] {
        for (auto &row : r.rows)
          out.object([&] {
            out.attribute("module", str(row.module));
            out.attribute("node", str(row.node));
            out.attribute("op", str(row.op));
            out.attribute("relation", str(row.relation));
            out.attribute("status", status[row.status]);
            out.attribute("tensor", str(row.tensor));
          });
      });
      out.attribute("spec", str(ctx.specPath));
      out.attribute("stats", std::move(stats));
      out.attribute("verdict", toString(r.verdict));
    });
  }
  os.flush();
  return s + "\n";
}

} // namespace shardproof::report
