// Entry point: runs the phases in order.
#include "Session.h"

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
  return os.str();
}

llvm::Expected<Result> verify(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, const spec::Spec &spec,
                              const Options &opts) {
  auto t0 = std::chrono::steady_clock::now();
  if (static_cast<int>(ranks.size()) != spec.worldSize)
    return userError("spec says world_size " + std::to_string(spec.worldSize) + " but " +
                     std::to_string(ranks.size()) + " rank models were given");
  Session S(ref, ranks, spec, opts);
  if (!opts.smtDumpDir.empty())
    S.solver.setDumpDir(opts.smtDumpDir);
  if (auto e = S.setupSymbols())
    return std::move(e);
  if (auto e = S.bindInputs())
    return std::move(e);
  if (auto e = S.buildRanks())
    return std::move(e);
  if (auto e = S.inferReference())
    return std::move(e);
  S.checkObligations();
  if (auto e = S.checkOutputs())
    return std::move(e);
  S.decide();
  S.result.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(S.result);
}

} // namespace shardproof::relation
