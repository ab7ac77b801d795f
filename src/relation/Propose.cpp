// Same-name proposals: a reference tensor the cover left without a rank
// counterpart is tried against the ranks' tensors of the same name. Captured
// ranks run the user's module code, so names line up; a tensor every rank
// computes (replicated, a partial sum, or a shard of it) is then proven like an
// output claim instead of showing as NO RELATION.
#include "Session.h"

#include <algorithm>
#include <cmath>
#include <iterator>

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

// Unfoldings per proposal: a name that lines up usually meets the reference's
// term within a few layers; a proposal is a convenience, not a proof search.
constexpr unsigned kProposalSteps = 16;

// The class to unfold next: the highest computed class either side reads, or
// with `oneSidedFirst` the highest that only one side reads (a data-parallel
// rank's loss class against the reference's split sum, which already reads
// the classes that loss is computed from). A class both sides read is a
// subterm they share; unfolding it grows both without bringing them closer.
ClassId nextToUnfold(const Term &a, const Term &b, const ClassTable &classes, bool oneSidedFirst) {
  ClassId none = static_cast<ClassId>(-1);
  ClassId ca = Prover::highestComputed(a, classes), cb = Prover::highestComputed(b, classes);
  ClassId highest = ca == none ? cb : cb == none ? ca : std::max(ca, cb);
  if (!oneSidedFirst)
    return highest;
  std::vector<ClassId> ra, rb;
  collectReads(a, ra);
  collectReads(b, rb);
  std::sort(ra.begin(), ra.end());
  std::sort(rb.begin(), rb.end());
  std::vector<ClassId> oneSided;
  std::set_symmetric_difference(ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(oneSided));
  for (auto it = oneSided.rbegin(); it != oneSided.rend(); ++it)
    if (classes[*it].kind == ClassInfo::Compute)
      return *it;
  return highest;
}

} // namespace

std::optional<Expr> Session::unfoldUntilEqual(Term a0, Term b0, Expr diff, unsigned maxSteps) {
  std::optional<Expr> d = diff;
  // The highest class first; where that does not meet, again with the classes
  // only one side reads first (a data-parallel loss, Prover::equal's sizes).
  for (bool oneSidedFirst : {false, true}) {
    Term a = a0, b = b0;
    d = diff;
    unsigned expansions = 0;
    bool undecided = false;
    while (d) {
      ClassId none = static_cast<ClassId>(-1);
      ClassId c = nextToUnfold(a, b, classes, oneSidedFirst);
      if (c == none || ++expansions > maxSteps)
        break;
      // A step whose comparison the solver could not decide is not unfolded
      // further: without those facts the terms only grow (with
      // --solver-timeout 0, 64 such steps took a minute on one GPT block), and
      // the answer is UNKNOWN with the solver's reason either way.
      const unsigned undecidedBefore = solver.undecided();
      a = prover.expandClass(a, c, 0);
      b = prover.expandClass(b, c, 0);
      d = prover.firstDifference(a, b, 0);
      undecided = d && solver.undecided() != undecidedBefore;
      if (undecided)
        break;
    }
    if (!d || undecided)
      break;
  }
  return d;
}

std::optional<Term> Session::proposeByName(int id) {
  const std::string &name = ref.values[id].name;
  const ValueInfo &v = refValues[id];
  if (!v.term || !v.shape || solver.pastDeadline())
    return std::nullopt;
  const Shape &shape = *v.shape;
  const int P = worldSize();
  // Every rank must compute a tensor of this name with as many dims.
  std::vector<const Shape *> shapes;
  for (int r = 0; r < P; ++r) {
    auto rid = ranks[r].find(name);
    if (!rid || ranks[r].values[*rid].producer < 0)
      return std::nullopt;
    const ValueInfo &rv = rankValues[r][*rid];
    if (!rv.term || !rv.shape || rv.shape->rank() != shape.rank())
      return std::nullopt;
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
      return std::nullopt;
    pl.kind = spec::Placement::Kind::Shard;
    pl.axis = differing[0];
    candidates.push_back(pl);
  }
  Prover::Scope sc(prover, bounds(shape));
  for (const auto &cand : candidates) {
    auto sides = outputSides(*this, name, cand);
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
      if (d && unfoldUntilEqual(v.term, b, *d, kProposalSteps)) {
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

bool Session::differsOnNumbers(const Term &a, const Term &b, const Shape &shape) {
  if (!smallestSizes) {
    smallestSizes.emplace();
    smt::CheckResult r = solver.check("propose.sizes", Expr::boolConst(true));
    if (r.result == smt::Result::Sat) {
      smt::Model m = solver.shrink("propose.sizes", Expr::boolConst(true), r.model, symbolNames());
      for (auto &n : symbolNames())
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
  Replayer rp(classes, sizes);
  rp.setBudget(200'000); // a probe, not a search: past this, no rejection
  std::vector<int64_t> first(last.size(), 0), mid = last;
  for (auto &x : mid)
    x /= 2;
  for (const auto &idx : {first, mid, last}) {
    double x = rp.at(a, idx), y = rp.at(b, idx);
    if (!rp.complete())
      return false;
    if (std::isfinite(x) && std::isfinite(y) && std::abs(x - y) > 1e-6 * (1 + std::abs(x) + std::abs(y)))
      return true;
  }
  return false;
}

// A proven output is a relation whatever the cover found: its row says so,
// with the spec's claim in the relation language.
void Session::labelProvenOutput(const std::string &name, const spec::Placement &pl) {
  auto row = std::find_if(result.rows.begin(), result.rows.end(),
                          [&](const RelationRow &r) { return r.tensor == name; });
  if (row == result.rows.end() || row->status != RelationRow::Unmatched)
    return;
  using K = spec::Placement::Kind;
  const int P = worldSize();
  std::string rel;
  if (pl.kind == K::Replicated || pl.kind == K::Partial) {
    std::string each = spec::Spec::rankName(name, pl, 0);
    bool same = true;
    for (int r = 1; r < P; ++r)
      same &= spec::Spec::rankName(name, pl, r) == each;
    rel = same ? each + "@*" : each + "@0";
    if (pl.kind == K::Partial)
      rel = "sum(" + rel + ")";
  } else if (pl.kind == K::Shard) {
    rel = "concat(";
    for (int r = 0; r < P; ++r)
      rel += spec::Spec::rankName(name, pl, r) + "@" + std::to_string(r) + ", ";
    rel += "axis=" + std::to_string(pl.axis) + ")";
  } else {
    rel = pl.relation ? pl.relation->str() : "the spec's relation";
  }
  row->status = RelationRow::Matched;
  row->relation = rel + " (output, proven)";
}

} // namespace shardproof::relation

