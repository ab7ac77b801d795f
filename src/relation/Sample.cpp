// check --sample: the reference graph and every output's rank side executed
// on numbers at random admissible sizes, element by element (the interpreter
// and replay of the witness phase, Witness.h), as a second opinion beside the
// proof.
#include "Sample.h"

#include <algorithm>
#include <random>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

// Admissible sizes near the bottom of the range, drawn at random: each symbol
// gets a target in [min, min + 7] (or its fixed value); targets the
// constraints reject are dropped one by one until the solver finds sizes.
static std::optional<std::map<std::string, int64_t>> drawSizes(CheckCore &core, std::mt19937_64 &rng) {
  std::vector<std::string> syms = core.symbols;
  std::shuffle(syms.begin(), syms.end(), rng);
  std::vector<Expr> targets;
  for (auto &n : syms) {
    int64_t lo = 1, hi = 8;
    for (auto &s : core.spec.symbols)
      if (s.name == n) {
        lo = s.value.value_or(s.min.value_or(1));
        hi = s.value ? lo : s.max ? std::min(*s.max, lo + 7) : lo + 7;
      }
    std::uniform_int_distribution<int64_t> pick(lo, std::max(lo, hi));
    targets.push_back(Expr::intVar(n) == Expr::intConst(pick(rng)));
  }
  while (true) {
    smt::CheckResult r = core.solver.check("sample.sizes", smt::conj(targets));
    if (r.result == smt::Result::Sat) {
      std::map<std::string, int64_t> sizes;
      for (auto &n : core.symbols)
        if (auto v = r.model.get(n))
          sizes[n] = *v;
      return sizes;
    }
    if (targets.empty())
      return std::nullopt;
    targets.pop_back();
  }
}

SampleResult sampleOutputs(CheckCore &core, const std::vector<ValueInfo> &refValues, RankSides sides) {
  const Options &opts = core.opts;
  SampleResult sr;
  std::mt19937_64 rng(opts.sampleSeed);
  std::set<std::map<std::string, int64_t>> seen;
  for (unsigned tries = 0; sr.sizes < opts.samples && tries < 20 * opts.samples; ++tries) {
    auto drawn = drawSizes(core, rng);
    if (!drawn)
      break;
    if (!seen.insert(*drawn).second)
      continue;
    const auto &sizes = *drawn;
    std::string at;
    for (auto &[n, v] : sizes)
      at += (at.empty() ? "" : ", ") + n + "=" + std::to_string(v);
    ++sr.sizes;
    sr.sizesTried.push_back(at);
    for (auto &[name, pl] : core.spec.outputs) {
      auto id = core.ref.find(name);
      if (!id || !refValues[*id].shape)
        continue;
      auto claimed = sides.ofClaim(name, pl);
      if (!claimed) {
        llvm::consumeError(claimed.takeError());
        continue;
      }
      auto refDims = dimsAt(*refValues[*id].shape, sizes);
      auto refData = core.witness(refValues).runReference(*id, sizes);
      if (!refDims || !refData) {
        sr.skipped.push_back("'" + name + "' at " + at + ": the reference graph cannot be run there (too large or "
                             "an op without numbers)");
        continue;
      }
      for (auto &[rank, side] : *claimed) {
        std::string who = "output '" + name + "'" + (rank >= 0 ? " on rank " + std::to_string(rank) : "");
        auto dims = dimsAt(side.second, sizes);
        if (!dims || *dims != *refDims) {
          sr.disagreements.push_back(who + " at " + at + ": proven to have the reference's shape, but its shape "
                                     "evaluates differently");
          continue;
        }
        Replayer rp(core.classes, sizes);
        std::vector<int64_t> idx(dims->size(), 0);
        size_t flat = 0;
        bool any = std::all_of(dims->begin(), dims->end(), [](int64_t d) { return d > 0; });
        while (any) {
          double b = rp.at(side.first, idx);
          if (!rp.complete()) {
            sr.skipped.push_back(who + " at " + at + ": out of evaluation budget");
            break;
          }
          double a = (*refData)[flat++];
          ++sr.elements;
          if (!sameNumber(a, b)) {
            std::string where;
            for (auto i : idx)
              where += (where.empty() ? "" : ", ") + std::to_string(i);
            sr.disagreements.push_back(who + " at " + at + ", index [" + where + "]: reference graph = " +
                                       std::to_string(a) + ", rank graphs = " + std::to_string(b));
            break;
          }
          if (!nextIndex(idx, *dims))
            break;
        }
      }
    }
  }
  return sr;
}

} // namespace shardproof::relation
