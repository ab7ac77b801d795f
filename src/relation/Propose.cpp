// Same-name proposals: a reference tensor the cover left without a rank
// counterpart is tried against the ranks' tensors of the same name. Captured
// ranks run the user's module code, so names line up; a tensor every rank
// computes (replicated, a partial sum, or a shard of it) is then proven like an
// output claim instead of showing as NO RELATION.
#include "Walk.h"

#include <algorithm>
#include <cmath>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

// Equal at every admissible size: decided by the simplifier when it can, else
// by one solver query (cached by the solver).
bool sameSize(smt::Solver &solver, const Expr &a, const Expr &b) {
  Expr eq = (a == b).simplify();
  if (auto v = eq.asBool())
    return *v;
  return solver.prove("propose.shape", eq).proved();
}

// Unfolding steps per proposal (each a node on every rank, Claims.cpp): a
// name that lines up usually meets the reference's term within a few layers
// (at most 8 in the captured training steps at TP4 and TP8); a proposal is a
// convenience, not a proof search.
constexpr unsigned kProposalSteps = 8;

// Term steps of one numeric probe, and the walk-wide pool probes draw on past
// them, per reference node. Class elements are kept between probes, so the
// pool pays once for evaluating what the proposals read at the smallest sizes,
// which grows with the depth: a fixed per-probe budget gave up on the LM
// end's tensors of a 4-layer TP8 step, whose proposals then spent 12 s
// unfolding to no match (the numbers, 0.6 s, tell them apart).
constexpr uint64_t kProbeSteps = 200'000;
constexpr uint64_t kProbePoolPerNode = 5'000;

} // namespace

std::optional<Term> ReferenceWalk::proposeByName(int id) {
  const ValueInfo &v = refValues[id];
  if (!v.term || !v.shape || core.solver.pastDeadline())
    return std::nullopt;
  const Shape &shape = *v.shape;
  Prover &prover = core.prover;
  const std::vector<spec::Placement> candidates = sameNamePlacements(id);
  Prover::Scope sc(prover, CheckCore::bounds(shape));
  for (const auto &cand : candidates) {
    auto sides = claims.sides(raised).ofClaim(core.ref.values[id].name, cand);
    if (!sides) {
      llvm::consumeError(sides.takeError());
      continue;
    }
    // Replicated: every rank's tensor must equal the reference's; the first
    // stands for them downstream.
    std::optional<Term> first;
    bool proven = true;
    for (auto &[rank, side] : *sides) {
      Term b = prover.normalize(side.first, 0);
      // In a refuted model most same-named tensors differ: numbers say so
      // before any unfolding (which took seconds on sp_no_reduce_scatter_tp2).
      if (differsOnNumbers(v.term, b, shape)) {
        proven = false;
        break;
      }
      auto d = prover.firstDifference(v.term, b, 0);
      if (d && claims.unfoldUntilEqual(v.term, b, *d, kProposalSteps)) {
        proven = false;
        break;
      }
      if (!first)
        first = b;
    }
    if (proven && first)
      return first;
  }
  return std::nullopt;
}

// The placements the ranks' tensors named like reference tensor `id` could
// have, from their sizes: replicated or partial when every axis has the
// reference's size, a shard when one axis differs and adds up; else none.
std::vector<spec::Placement> ReferenceWalk::sameNamePlacements(int id) {
  const std::string &name = core.ref.values[id].name;
  const Shape &shape = *refValues[id].shape;
  smt::Solver &solver = core.solver;
  const int P = core.worldSize();
  // Every rank must compute a tensor of this name with as many dims.
  std::vector<const Shape *> shapes;
  for (int r = 0; r < P; ++r) {
    auto rid = core.ranks[r].find(name);
    if (!rid || core.ranks[r].values[*rid].producer < 0)
      return {};
    const ValueInfo &rv = rankValues[r][*rid];
    if (!rv.term || !rv.shape || rv.shape->rank() != shape.rank())
      return {};
    shapes.push_back(&*rv.shape);
  }
  // The axes where some rank's size differs from the reference's: none means
  // replicated or partial; one means a shard of that axis; more, no proposal.
  std::vector<int> differing;
  for (size_t d = 0; d < shape.rank(); ++d)
    for (int r = 0; r < P; ++r)
      if (!sameSize(solver, shapes[r]->dims[d], shape.dims[d])) {
        differing.push_back(static_cast<int>(d));
        break;
      }
  std::vector<spec::Placement> candidates;
  spec::Placement pl;
  if (differing.empty()) {
    pl.kind = spec::Placement::Kind::Replicated;
    candidates.push_back(pl);
    pl.kind = spec::Placement::Kind::Partial;
    candidates.push_back(pl);
  } else if (differing.size() == 1) {
    Expr total = Expr::intConst(0);
    for (int r = 0; r < P; ++r)
      total = total + shapes[r]->dims[differing[0]];
    if (!sameSize(solver, total, shape.dims[differing[0]]))
      return {};
    pl.kind = spec::Placement::Kind::Shard;
    pl.axis = differing[0];
    candidates.push_back(pl);
  }
  return candidates;
}

bool ReferenceWalk::differsOnNumbers(const Term &a, const Term &b, const Shape &shape) {
  if (!smallestSizes) {
    smallestSizes.emplace();
    smt::CheckResult r = core.solver.check("propose.sizes", Expr::boolConst(true));
    if (r.result == smt::Result::Sat) {
      smt::Model m = core.solver.shrink("propose.sizes", Expr::boolConst(true), r.model, core.symbols);
      for (auto &n : core.symbols)
        if (auto v = m.get(n))
          (*smallestSizes)[n] = *v;
    }
  }
  const auto &sizes = *smallestSizes;
  auto env = [&](const std::string &n) -> std::optional<int64_t> {
    auto it = sizes.find(n);
    return it == sizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  std::vector<int64_t> last;
  for (auto &d : shape.dims) {
    auto v = d.eval(env);
    if (!v || *v <= 0 || *v > (int64_t{1} << 20))
      return false;
    last.push_back(*v - 1);
  }
  if (!probe)
    probe = std::make_unique<Replayer>(core.classes, sizes);
  if (!probePool)
    probePool = kProbePoolPerNode * core.ref.nodes.size();
  Replayer &rp = *probe;
  const uint64_t given = kProbeSteps + *probePool;
  rp.newProbe(given); // a probe, not a search: past this, no rejection
  bool differs = false;
  std::vector<int64_t> first(last.size(), 0), mid = last;
  for (auto &x : mid)
    x /= 2;
  for (const auto &idx : {first, mid, last}) {
    double x = rp.at(a, idx), y = rp.at(b, idx);
    if (!rp.complete())
      break;
    if (std::isfinite(x) && std::isfinite(y) && std::abs(x - y) > 1e-6 * (1 + std::abs(x) + std::abs(y))) {
      differs = true;
      break;
    }
  }
  uint64_t used = given - rp.budgetLeft();
  if (used > kProbeSteps)
    *probePool -= std::min(*probePool, used - kProbeSteps);
  return differs;
}

} // namespace shardproof::relation

