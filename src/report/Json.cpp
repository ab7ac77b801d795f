#include "shardproof/report/Report.h"

#include <llvm/Support/JSON.h>

#include <algorithm>

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
                     {"load_cpu_seconds", st.loadCpuSeconds},
                     {"peak_rss_kib", static_cast<int64_t>(st.peakRssKiB)},
                     {"solver_queries_by_kind", std::move(queries)},
                     {"slowest_reference_nodes", std::move(slowest)}};
  std::string s;
  llvm::raw_string_ostream os(s);
  // Buffered: unbuffered, as raw_string_ostream starts, every escaped
  // character of 10 MB of rows was a call down to std::string::append.
  os.SetBufferSize(1 << 16);
  {
    json::OStream out(os, 2);
    // A string value as llvm::json writes it. Most (names, relations) hold
    // nothing to escape and are written whole; the rest go through Value,
    // which escapes and repairs invalid UTF-8.
    auto str = [&out](const std::string &v) {
      bool plain = std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
      if (plain)
        out.rawValue([&](llvm::raw_ostream &o) { o << '"' << v << '"'; });
      else
        out.value(json::Value(llvm::StringRef(v)));
    };
    auto field = [&](llvm::StringRef key, const std::string &v) { out.attributeBegin(key), str(v), out.attributeEnd(); };
    out.object([&] {
      out.attribute("failures", std::move(fails));
      out.attribute("notes", std::move(notes));
      out.attributeArray("outputs", [&] {
        for (auto &o : r.outputs)
          out.object([&] {
            field("detail", o.detail);
            field("tensor", o.tensor);
            out.attribute("verdict", toString(o.verdict));
          });
      });
      out.attribute("ranks", std::move(ranks));
      field("reason", r.reason);
      field("reference", ctx.reference);
      out.attributeArray("relations", [&] {
        for (auto &row : r.rows)
          out.object([&] {
            field("module", row.module);
            field("node", row.node);
            field("op", row.op);
            field("relation", row.relation);
            out.attribute("status", status[row.status]);
            field("tensor", row.tensor);
          });
      });
      field("spec", ctx.specPath);
      out.attribute("stats", std::move(stats));
      out.attribute("verdict", toString(r.verdict));
    });
  }
  os << "\n";
  os.flush();
  return s;
}

} // namespace shardproof::report
