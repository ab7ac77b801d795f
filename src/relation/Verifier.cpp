// Entry point: runs the phases in order.
#include "Bind.h"
#include "Check.h"
#include "Claims.h"
#include "NodeEval.h"
#include "RankWorld.h"
#include "Sample.h"
#include "SizeMultiples.h"
#include "Walk.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
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

// The op table follows the default domain's opsets 13 to 17 (what torch 1.13
// exports); an operator's meaning may differ outside them: UNKNOWN, not a guess.
static void checkOpsets(CheckCore &core) {
  std::vector<const ir::Graph *> graphs{&core.ref};
  for (const ir::Graph &g : core.ranks)
    graphs.push_back(&g);
  for (const ir::Graph *g : graphs)
    if (auto it = g->opsets.find(""); it != g->opsets.end() && (it->second < 13 || it->second > 17))
      core.result.failures.push_back({Failure::Unsupported,
                                      g->path + " imports opset " + std::to_string(it->second) +
                                          " of the default ONNX domain; shardproof follows opsets 13 to 17, and "
                                          "operators may mean other things outside them (export with "
                                          "opset_version=17)",
                                      "", "", "", "", {}, std::nullopt});
}

// The solver's dump folder, memory limit and deadline (the time budget).
static void configureSolver(CheckCore &core, const Options &opts, Clock::time_point t0) {
  if (!opts.smtDumpDir.empty())
    core.solver.setDumpDir(opts.smtDumpDir);
  smt::Solver::setMemoryLimitMb(opts.solverMemoryMb);
  if (opts.timeBudgetSeconds) {
    std::ostringstream what;
    what << "time budget of " << *opts.timeBudgetSeconds << " s";
    auto budget = std::chrono::duration<double>(std::max(0.0, *opts.timeBudgetSeconds));
    core.solver.setDeadline(t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget),
                            what.str());
  }
}

namespace {

// The check on graphs and spec whose sizes are already written as the
// constraints' multiples (SizeMultiples.h).
llvm::Expected<Result> checkPrepared(const ir::Graph &ref, const std::vector<ir::Graph> &ranks,
                                     const spec::Spec &spec, const Options &opts, Clock::time_point t0) {
  if (static_cast<int>(ranks.size()) != spec.worldSize)
    return userError("spec says world_size " + std::to_string(spec.worldSize) + " but " +
                     std::to_string(ranks.size()) + " rank models were given");
  // Declared before the state, so it runs after the state is gone, on every
  // return path: the next check in this process starts with empty caches.
  struct ReleaseCaches {
    bool skip = false;
    ~ReleaseCaches() {
      if (!skip)
        smt::releaseCaches();
    }
  } release;
  // The check's state, on the heap so a caller that exits next can take it
  // instead of having it freed (Options::keepAtExit). Members are freed in
  // reverse order: what reads the core goes before it.
  struct State {
    explicit State(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec,
                   const Options &opts)
        : core(ref, ranks, spec, opts), nodes(core) {}
    CheckCore core;
    NodeEvaluator nodes;
    std::vector<std::vector<ValueInfo>> rankValues;
    std::vector<ValueInfo> refValues;
    std::unique_ptr<Claims> claims;
    std::vector<PendingObligation> obligations;
  };
  auto state = std::make_shared<State>(ref, ranks, spec, opts);
  CheckCore &core = state->core;
  Stats &st = core.result.stats;
  checkOpsets(core);
  configureSolver(core, opts, t0);
  // The phases up to the reference walk report input errors, so they run even
  // past the deadline (their solver queries then answer Unknown at once).
  auto bound = InputBinding(core).run();
  if (!bound)
    return bound.takeError();
  std::vector<PendingObligation> &obligations = state->obligations;
  obligations = std::move(bound->obligations);
  std::vector<std::vector<ValueInfo>> &rankValues = state->rankValues;
  rankValues = std::move(bound->rankValues);
  std::vector<ValueInfo> &refValues = state->refValues;
  refValues = std::move(bound->refValues);
  NodeEvaluator &nodes = state->nodes;
  RankWorld rankWorld(core, nodes, rankValues);
  auto world = rankWorld.build();
  if (!world)
    return world.takeError();
  obligations.insert(obligations.end(), world->begin(), world->end());
  st.worldSeconds = since(t0);
  auto t1 = Clock::now();
  // The spec's claims, checked at `layers:` checkpoints during the walk and on
  // the outputs after it.
  state->claims = std::make_unique<Claims>(core, refValues, rankValues, rankWorld.pending());
  Claims &claims = *state->claims;
  OutputCheck output(core, claims);
  // The obligations raised so far are decided before the walk: once one of
  // the implementation fails, the walk and the output check only explain it.
  auto te = Clock::now();
  output.decideEarly(obligations);
  const double earlySeconds = since(te); // counted with the output check's
  auto walked = ReferenceWalk(core, nodes, claims, refValues, rankValues, rankWorld.layerMaps, rankWorld.pending()).run();
  if (!walked)
    return walked.takeError();
  st.inferSeconds = since(t1) - earlySeconds;
  auto t2 = Clock::now();
  auto checked = output.run(walked->obligations, walked->explainNoRelation);
  if (!checked)
    return checked.takeError();
  Result result = std::move(*checked);
  result.stats.checkSeconds = earlySeconds + since(t2);
  if (opts.samples > 0 && result.verdict == Verdict::Verified) {
    std::vector<PendingObligation> unused; // --sample decides nothing
    result.sample = sampleOutputs(core, claims.allReferenceValues(), claims.sides(unused));
  }
  solverStats(core.solver, result.stats);
  if (opts.keepAtExit) {
    opts.keepAtExit(std::move(state));
    release.skip = true;
  }
  result.stats.seconds = since(t0);
  return result;
}

// Sizes the constraints make multiples, written as multiples in the graphs'
// input shapes (in place: a copy of a 126-layer step's graphs cost 1 s) and in
// a copy of the spec.
llvm::Expected<Result> checkWithMultiples(ir::Graph &ref, std::vector<ir::Graph> &ranks, const spec::Spec &spec,
                                          const SizeMultiples &multiples, const Options &opts,
                                          Clock::time_point t0) {
  multiples.apply(ref);
  for (ir::Graph &g : ranks)
    multiples.apply(g);
  spec::Spec specM = spec;
  multiples.apply(specM);
  return checkPrepared(ref, ranks, specM, opts, t0);
}

} // namespace

llvm::Expected<Result> verify(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec,
                              const Options &opts) {
  auto t0 = Clock::now();
  SizeMultiples multiples = SizeMultiples::fromSpec(spec);
  if (multiples.empty())
    return checkPrepared(ref, ranks, spec, opts, t0);
  ir::Graph refM = ref;
  std::vector<ir::Graph> ranksM = ranks;
  return checkWithMultiples(refM, ranksM, spec, multiples, opts, t0);
}

llvm::Expected<Result> verify(ir::Graph &&ref, std::vector<ir::Graph> &&ranks, const spec::Spec &spec,
                              const Options &opts) {
  auto t0 = Clock::now();
  SizeMultiples multiples = SizeMultiples::fromSpec(spec);
  if (multiples.empty())
    return checkPrepared(ref, ranks, spec, opts, t0);
  return checkWithMultiples(ref, ranks, spec, multiples, opts, t0);
}

} // namespace shardproof::relation
