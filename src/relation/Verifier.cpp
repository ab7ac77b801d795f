// Entry point: runs the phases in order.
#include "Check.h"
#include "Claims.h"
#include "Sample.h"
#include "Session.h"
#include "Walk.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace shardproof::relation {

std::string Counterexample::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < sizes.size(); ++i)
    os << (i ? ", " : "") << sizes[i].first << "=" << sizes[i].second;
  if (rank >= 0)
    os << (sizes.empty() ? "" : ", ") << "rank " << rank;
  if (!index.empty()) {
    os << (sizes.empty() && rank < 0 ? "" : ", ") << tensor << "[";
    for (size_t i = 0; i < index.size(); ++i)
      os << (i ? ", " : "") << index[i];
    os << "]";
  }
  if (!intInputs.empty())
    os << " (" << intInputs << ")";
  return os.str();
}

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The solver's per-kind figures, largest total time first.
void solverStats(const smt::Solver &solver, Stats &st) {
  for (auto &[name, q] : solver.stats()) {
    unsigned n = q.unsat + q.sat + q.unknown + q.error + q.trivial + q.cached;
    st.queries.push_back({name, n, q.seconds});
    st.solverSeconds += q.seconds;
  }
  std::stable_sort(st.queries.begin(), st.queries.end(),
                   [](const QueryKindStats &a, const QueryKindStats &b) { return a.seconds > b.seconds; });
}

} // namespace

llvm::Expected<Result> verify(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec,
                              const Options &opts) {
  auto t0 = Clock::now();
  if (static_cast<int>(ranks.size()) != spec.worldSize)
    return userError("spec says world_size " + std::to_string(spec.worldSize) + " but " +
                     std::to_string(ranks.size()) + " rank models were given");
  // Declared before the session, so it runs after the session is gone, on
  // every return path: the next check in this process starts with empty caches.
  struct ReleaseCaches {
    ~ReleaseCaches() { smt::releaseCaches(); }
  } release;
  Session S(ref, ranks, spec, opts);
  Stats &st = S.result.stats;
  // The op table follows the default domain's opsets 13 to 17 (what torch 1.13
  // exports); an operator's meaning may differ outside them: UNKNOWN, not a guess.
  std::vector<const ir::Graph *> graphs{&ref};
  for (const ir::Graph &g : ranks)
    graphs.push_back(&g);
  for (const ir::Graph *g : graphs)
    if (auto it = g->opsets.find(""); it != g->opsets.end() && (it->second < 13 || it->second > 17))
      S.result.failures.push_back({Failure::Unsupported,
                                   g->path + " imports opset " + std::to_string(it->second) +
                                       " of the default ONNX domain; shardproof follows opsets 13 to 17, and "
                                       "operators may mean other things outside them (export with opset_version=17)",
                                   "", "", "", "", {}, std::nullopt});
  if (!opts.smtDumpDir.empty())
    S.solver.setDumpDir(opts.smtDumpDir);
  smt::Solver::setMemoryLimitMb(opts.solverMemoryMb);
  if (opts.timeBudgetSeconds) {
    std::ostringstream what;
    what << "time budget of " << *opts.timeBudgetSeconds << " s";
    auto budget = std::chrono::duration<double>(std::max(0.0, *opts.timeBudgetSeconds));
    S.solver.setDeadline(t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget), what.str());
  }
  // The phases up to the reference walk report input errors, so they run even
  // past the deadline (their solver queries then answer Unknown at once).
  if (auto e = S.bindRankSymbols())
    return std::move(e);
  S.symbols = S.symbolNames();
  if (auto e = S.setupSymbols())
    return std::move(e);
  if (auto e = S.bindInputs())
    return std::move(e);
  NodeEvaluator nodes(S);
  if (auto e = S.buildRanks(nodes))
    return std::move(e);
  st.worldSeconds = since(t0);
  auto t1 = Clock::now();
  // The spec's claims, checked at `layers:` checkpoints during the walk and on
  // the outputs after it.
  Claims claims(S, S.refValues, S.rankValues);
  auto walked = ReferenceWalk(S, nodes, claims, S.refValues, S.rankValues).run();
  if (!walked)
    return walked.takeError();
  S.obligations.insert(S.obligations.end(), walked->begin(), walked->end());
  st.inferSeconds = since(t1);
  auto t2 = Clock::now();
  auto checked = OutputCheck(S, claims).run(S.obligations);
  if (!checked)
    return checked.takeError();
  Result result = std::move(*checked);
  result.stats.checkSeconds = since(t2);
  if (opts.samples > 0 && result.verdict == Verdict::Verified) {
    std::vector<PendingObligation> unused; // --sample decides nothing
    result.sample = sampleOutputs(S, S.refValues, claims.sides(unused));
  }
  solverStats(S.solver, result.stats);
  result.stats.seconds = since(t0);
  return result;
}

} // namespace shardproof::relation
