// The size limits the reference itself needs, for `shardproof init`: a rotary
// cache of 64 rows sliced to the sequence needs seq <= 64; a cache of
// max_pos rows needs seq <= max_pos. The reference is ill-defined outside
// them, so a spec without them could only fail there. Found by evaluating the
// reference's own side conditions on a grid of sizes (no solver): a guess
// the draft states with its reason, which the check then relies on.
#include "DraftGuess.h"

#include <algorithm>

namespace shardproof::spec::draft {

namespace {

const int64_t kGrid[] = {1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 64, 100, 128, 1000, 4096, 65536, int64_t(1) << 20};

struct Probe {
  const smt::Expr &cond;
  std::map<std::string, int64_t> at;
  // True/false where the condition evaluates; nullopt where it does not.
  std::optional<bool> holds() const {
    auto v = cond.eval([&](const std::string &n) -> std::optional<int64_t> {
      auto it = at.find(n);
      return it == at.end() ? std::nullopt : std::optional<int64_t>(it->second);
    });
    if (!v)
      return std::nullopt;
    return *v != 0;
  }
};

// `a <= b` explains the condition: it holds wherever a <= b on the grid and
// fails somewhere a > b (the others at 1).
bool explainedByOrder(Probe &p, const std::string &a, const std::string &b) {
  bool failsAbove = false;
  for (int64_t x : kGrid)
    for (int64_t y : kGrid) {
      p.at[a] = x;
      p.at[b] = y;
      auto h = p.holds();
      if (!h)
        return false;
      if (x <= y && !*h)
        return false;
      failsAbove = failsAbove || (x > y && !*h);
    }
  return failsAbove;
}

// The largest value of `s` the condition allows (it holds up to it and fails
// at every grid value above), or nullopt.
std::optional<int64_t> upperBound(Probe &p, const std::string &s) {
  std::optional<int64_t> lastOk, firstBad;
  for (int64_t x : kGrid) {
    p.at[s] = x;
    auto h = p.holds();
    if (!h)
      return std::nullopt;
    if (*h && firstBad)
      return std::nullopt; // not monotone: not a plain bound
    if (*h)
      lastOk = x;
    else if (!firstBad)
      firstBad = x;
  }
  if (!lastOk || !firstBad)
    return std::nullopt;
  int64_t lo = *lastOk, hi = *firstBad; // holds at lo, fails at hi
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    p.at[s] = mid;
    auto h = p.holds();
    if (!h)
      return std::nullopt;
    (*h ? lo : hi) = mid;
  }
  return lo;
}

} // namespace

Limits referenceLimits(const std::vector<ir::Obligation> &obligations, const std::vector<std::string> &symbols) {
  Limits out;
  for (const ir::Obligation &o : obligations) {
    std::vector<std::string> vars = o.cond.vars();
    if (vars.empty() || vars.size() > 4 || std::any_of(vars.begin(), vars.end(), [&](const std::string &v) {
          return std::find(symbols.begin(), symbols.end(), v) == symbols.end();
        }))
      continue;
    Probe p{o.cond, {}};
    for (const auto &v : vars)
      p.at[v] = 1;
    if (p.holds() != std::optional<bool>(true))
      continue; // already false at the smallest sizes: not a limit to guess
    bool explained = false;
    for (size_t i = 0; i < vars.size() && !explained; ++i)
      for (size_t j = 0; j < vars.size() && !explained; ++j) {
        if (i == j)
          continue;
        Probe q{o.cond, p.at};
        if (explainedByOrder(q, vars[i], vars[j])) {
          std::string c = vars[i] + " <= " + vars[j];
          if (std::find(out.constraints.begin(), out.constraints.end(), c) == out.constraints.end()) {
            out.constraints.push_back(c);
            out.reasons.push_back(o.what);
          }
          explained = true;
        }
      }
    for (size_t i = 0; i < vars.size() && !explained; ++i) {
      Probe q{o.cond, p.at};
      if (auto bound = upperBound(q, vars[i])) {
        auto it = out.max.find(vars[i]);
        if (it == out.max.end() || *bound < it->second.first)
          out.max[vars[i]] = {*bound, o.what};
        explained = true;
      }
    }
  }
  return out;
}

} // namespace shardproof::spec::draft
