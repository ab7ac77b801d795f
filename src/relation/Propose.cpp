// Same-name proposals: a reference tensor the cover left without a rank
// counterpart is tried against the ranks' tensors of the same name. Captured
// ranks run the user's module code, so names line up; a tensor every rank
// computes (replicated, a partial sum, or a shard of it) is then proven like an
// output claim instead of showing as NO RELATION.
#include "MemoKeys.h"
#include "Walk.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

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
// Steps tried before the numeric probe (a weight gradient's reduction meets
// the ranks' all-reduced gradient within two).
constexpr unsigned kQuickSteps = 2;

// Term steps of one full numeric probe (exact to the leaves), which confirms
// a shallow probe's difference or decides where that probe gives up. Class
// elements are kept between probes. A walk-wide pool of up to 2 M more steps
// (from before the shallow probe) was spent in full on the first LM-end
// tensor of the 126-layer forward and on nothing any probe then decided (80
// ms of its 0.5 s of inference); without it every example and bench case
// decides alike.
constexpr uint64_t kProbeSteps = 200'000;

// Class definitions below either side that the shallow probe evaluates
// exactly (the LM end's picked logits: the logits, the final norm, the last
// residual add, the last layer's output projection).
constexpr unsigned kShallowLevels = 4;
// Its term steps, for all of a tensor's candidates: the loss's reduction over
// every token's logits at the smallest sizes takes about 350,000 at tiny
// widths; one picked logit of the 405B-shaped LM at the bench's widths (its
// log-sum-exp reads 1024 logits of 256 products each) about 2.4 M, and
// rejecting its two candidates at 2 M left them to 8 s of unfolding.
constexpr uint64_t kShallowSteps = 3'000'000;

enum class Numbers { Same, Differ, Incomplete };

// Shallow probes a walk may see give up (Stats::probesGaveUp) before it
// stops trying them: past a bug, every tensor downstream is without a
// counterpart, and each probe of one spent its whole budget (3 M steps,
// 0.1 s) on the way to the unfolding it then left the proposal to anyway (126
// of them, 9 s of a six-layer GPT's 12 s). A probe that would have rejected
// costs its proposal that unfolding.
constexpr unsigned kShallowGiveUps = 8;

// Full probes a walk may see run out of steps before it stops trying them
// (then a shallow probe's difference stands unconfirmed, as it did when the
// full probe had given up on that tensor). The walk goes up the model: the
// tensors after one too deep to evaluate read it, and each of the 126-layer
// forward's LM-end tensors spent the whole 200,000 steps (0.2 G
// instructions) to no answer.
constexpr unsigned kFullGiveUps = 1;

// `a` and `b` at each point, in order, until one differs or the numbers run out.
Numbers differAt(Replayer &rp, const Term &a, const Term &b, const std::vector<std::vector<int64_t>> &points) {
  for (const std::vector<int64_t> &idx : points) {
    double x = rp.at(a, idx), y = rp.at(b, idx);
    if (!rp.complete())
      return Numbers::Incomplete;
    if (std::isfinite(x) && std::isfinite(y) && std::abs(x - y) > 1e-6 * (1 + std::abs(x) + std::abs(y)))
      return Numbers::Differ;
  }
  return Numbers::Same;
}

} // namespace

std::optional<Term> ReferenceWalk::proposeByName(int id) {
  const ValueInfo &v = refValues[id];
  if (!v.term || !v.shape || core.solver.pastDeadline())
    return std::nullopt;
  const Shape &shape = *v.shape;
  Prover &prover = core.prover;
  const std::vector<spec::Placement> candidates = sameNamePlacements(id);
  if (candidates.empty())
    return std::nullopt;
  Prover::Scope sc(prover, CheckCore::bounds(shape));
  // Per candidate, the rank terms the reference's must equal: replicated, one
  // per rank (the first stands for them downstream); partial or a shard, one.
  std::vector<std::vector<Term>> sides;
  for (const auto &cand : candidates) {
    sides.emplace_back();
    auto s = claims.sides(raised).ofClaim(core.ref.values[id].name, cand);
    if (!s) {
      llvm::consumeError(s.takeError());
      continue;
    }
    for (auto &[rank, side] : *s) {
      Term t = prover.normalize(side.first, 0);
      // Ranks whose tensor is one class (a replicated loss after its
      // all-reduce: y@* on every rank) give the same side: one proof covers
      // them all (the 126-layer forward proved its loss eight times, 18 ms).
      auto &cur = sides.back();
      if (std::none_of(cur.begin(), cur.end(), [&](const Term &u) { return sameTerm(u, t); }))
        cur.push_back(std::move(t));
    }
  }
  // The same proposal one layer up (a weight gradient's reduction over the
  // sequence) is proven by the same unfoldings of renamed classes (NodeMemo.h).
  std::optional<MemoKey> key;
  if (core.opts.memo && prover.pathDepth() == 1) {
    key = proposalKey(v.term, shape, sides, core.classes);
    if (auto hit = core.memo.lookup(*key, core.classes))
      return sides[hit->first->extra].front();
  }
  MemoRecording rec(core, std::move(key));
  // One shallow probe for every candidate: they read the same rank classes
  // (replicated, each rank's tensor; partial, their sum), so the elements the
  // first evaluated serve the next, and where the region is too large the
  // tensor gives up once.
  std::vector<Term> allSides;
  for (auto &s : sides)
    allSides.insert(allSides.end(), s.begin(), s.end());
  ShallowUse shallow;
  for (size_t i = 0; i < sides.size(); ++i) {
    bool proven = !sides[i].empty();
    for (const Term &b : sides[i]) {
      // Equal within a couple of unfoldings: proven without numbers, which
      // for a deep tensor evaluate every layer below it (2.5 s for the first
      // layer's weight gradient in a 16-layer TP8 step, against 12 ms).
      const auto d0 = prover.firstDifference(v.term, b, 0);
      if (!d0 || !claims.unfoldUntilEqual(v.term, b, *d0, kQuickSteps))
        continue;
      // In a refuted model most same-named tensors differ: numbers say so
      // before a longer unfolding (which took seconds on sp_no_reduce_scatter_tp2).
      // They can only reject, so a reused proof does not rest on them.
      bool differs;
      {
        ClassTable::Unrecorded off(core.classes);
        differs = differsOnNumbers(v.term, b, shape, shallow, allSides,
                                   candidates[i].kind == spec::Placement::Kind::Shard);
      }
      if (differs || claims.unfoldUntilEqual(v.term, b, *d0, kProposalSteps)) {
        proven = false;
        break;
      }
    }
    if (!proven)
      continue;
    rec.store({{}, i});
    return sides[i].front();
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
    const ValueInfo &rv = rankValue(rankValues, pending, r, *rid);
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

bool ReferenceWalk::differsOnNumbers(const Term &a, const Term &b, const Shape &shape, ShallowUse &use,
                                     const std::vector<Term> &sides, bool shard) {
  // Full probes are over for this tensor, or for the walk.
  const bool fullOff = use.fullGaveUp || fullProbesGaveUp >= kFullGiveUps;
  // Both probes gave up on this tensor.
  if (use.gaveUp && fullOff)
    return false;
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
  std::vector<int64_t> mid = last;
  for (auto &x : mid)
    x /= 2;
  std::vector<std::vector<int64_t>> points = {std::vector<int64_t>(last.size(), 0), mid, last};
  // A shard: the three points above read three ranks' shards, so one rank's
  // bug elsewhere (its causal mask one diagonal off) went to the unfolding,
  // a minute on an 8-rank GPT block. Each rank's shard gets the point at the
  // middle of every axis's r-th P-th (indices equal across equal axes: on a
  // mask's diagonal), and its neighbour one further on the last axis.
  if (shard && !last.empty()) {
    const int64_t P = core.worldSize();
    for (int64_t r = 0; r < P; ++r) {
      std::vector<int64_t> at;
      for (int64_t l : last)
        at.push_back((2 * r + 1) * (l + 1) / (2 * P));
      points.push_back(at);
      if (at.back() < last.back()) {
        ++at.back();
        points.push_back(std::move(at));
      }
    }
  }
  // First cut short: a shallow probe, exact only a few class definitions
  // below either side and arbitrary numbers under that. Its cost does not
  // grow with the depth, where the full probe evaluates every layer below
  // (in a 16-layer TP8 step, 25 of 50 s went to rejecting the LM end's
  // picked logits that way, and 18 s to the replicated loss, which the
  // unfolding then proved). The same: the unfolding decides, as the numbers
  // could only have rejected (a difference below the cut costs that
  // unfolding, not a wrong answer). Different: only a hint, as two sides
  // that read different classes of equal value below the cut get different
  // arbitrary numbers there (a data-parallel gradient's all-reduce); the
  // full probe confirms it when it can finish. Run first, the shallow probe
  // spares the full one wherever it finds the sides the same (the
  // 126-layer forward's loss: 0.4 G instructions of its 4.4 G check); the
  // answer is the one the full probe gave first, but for a difference below
  // the cut, which the unfolding then finds instead.
  // One cut and one budget for every candidate and rank's side of the tensor:
  // they share what the first evaluated, and where the cut region itself is
  // too large the tensor gives up once, not once per rank (8 x 2 M steps cost
  // the one-layer TP8 step 7 s) or per candidate.
  bool hint = false; // the shallow probe saw a difference
  if (!use.gaveUp && core.result.stats.probesGaveUp < kShallowGiveUps) {
    if (!use.started) {
      std::set<ClassId> exact = shallowCut(core.classes, a, sides, kShallowLevels);
      // Elements one tensor's probe evaluated serve the next (the tensors
      // above the logits read them all) unless they read a class now exact as
      // cut; then a fresh replayer.
      if (!shallowProbe || !shallowProbe->widenCut(exact)) {
        shallowProbe = std::make_unique<Replayer>(core.classes, sizes);
        shallowProbe->cutBelow(std::move(exact));
      }
      shallowProbe->newProbe(kShallowSteps);
      use.started = true;
    }
    ++core.result.stats.probes;
    Numbers n = differAt(*shallowProbe, a, b, points);
    if (n == Numbers::Same)
      return false; // a probe, not a search: the same is no proof
    hint = n == Numbers::Differ;
    if (n == Numbers::Incomplete) {
      use.gaveUp = true;
      ++core.result.stats.probesGaveUp; // only shallow probes give up, only here
    }
  }
  // Exact to the leaves, within its own (smaller) budget: its answer when it
  // finishes, else the shallow probe's.
  if (fullOff)
    return hint;
  if (!probe)
    probe = std::make_unique<Replayer>(core.classes, sizes);
  Replayer &rp = *probe;
  rp.newProbe(kProbeSteps);
  ++core.result.stats.probes;
  Numbers n = differAt(rp, a, b, points);
  if (n == Numbers::Incomplete) {
    use.fullGaveUp = true;
    ++fullProbesGaveUp;
    return hint;
  }
  return n == Numbers::Differ;
}

} // namespace shardproof::relation

