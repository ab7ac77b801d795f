// Where a refuted output departs from the reference. The failing element is
// evaluated again at its counterexample, recording which class elements each
// element reads. Rank tensors that some reference tensor's relation reads are
// proven equal to (part of) the reference's computation: checkpoints. The
// rank nodes between those checkpoints and the failing element (its cone, cut
// at the checkpoints) compute something else from equal inputs, so the
// departure lies among them. Among them, in graph order, the first whose value
// at the counterexample is none of the values the reference's relation for
// this element computes (its subterms over the same checkpoints) is where it
// departs; without one, the region is named. This only chooses what the
// failure names; the verdict rests on the replay.
#include "Claims.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace shardproof::relation {

using namespace ir;

namespace {

// Term steps for each of the two evaluations: localization only names the
// failure, so past this (a big reference term evaluated element by element
// took 30 s on gpt_mask_rank1_tp2) the old blame stays.
constexpr uint64_t kLocalizeSteps = 2'000'000;

// One rank node of the region, in graph order.
struct RegionNode {
  int index = 0; // position in its rank graph (topological)
  int rank = 0;
  const Node *node = nullptr;
  ClassId cls = 0;
  bool operator<(const RegionNode &o) const { return std::tie(index, rank) < std::tie(o.index, o.rank); }
  bool operator==(const RegionNode &o) const { return index == o.index && rank == o.rank; }
};

// The node writing class `c` on `preferred` rank (else on its first rank),
// from the members the class was interned with.
std::optional<RegionNode> nodeOf(const CheckCore &S, ClassId c, int preferred) {
  std::optional<RegionNode> first;
  for (const ClassInfo::Member &m : S.classes.peek(c).members) {
    int r = m.rank;
    if (r < 0 || r >= S.worldSize() || m.value < 0 || m.value >= static_cast<int>(S.ranks[r].values.size()))
      continue;
    int p = S.ranks[r].values[m.value].producer;
    if (p < 0)
      continue;
    RegionNode rn{p, r, &S.ranks[r].nodes[p], c};
    if (r == preferred)
      return rn;
    if (!first)
      first = rn;
  }
  return first;
}

std::string describeRankNode(const RegionNode &n) {
  return "rank " + std::to_string(n.rank) + ": " + n.node->name + " (" + n.node->opType + ")";
}

} // namespace

// Whether `v` is among the (sorted) values the reference computes. A zero is
// no evidence: masks and clamps produce it on both sides.
static bool implied(double v, const std::vector<double> &refValues) {
  if (!std::isfinite(v) || v == 0)
    return false;
  double tol = 1e-9 * (1 + std::abs(v));
  auto it = std::lower_bound(refValues.begin(), refValues.end(), v - tol);
  return it != refValues.end() && *it <= v + tol;
}

void Claims::localizeDeparture(Failure &f, const Term &expected, const Term &actual) {
  const ClassTable &classes = core.classes;
  if (!f.cex || !f.cex->replayed || !actual)
    return;
  const Counterexample &cex = *f.cex;
  std::map<std::string, int64_t> sizes(cex.sizes.begin(), cex.sizes.end());
  Replayer::ElementReads reads;
  Replayer rp(classes, sizes, cex.intOffset);
  rp.setBudget(kLocalizeSteps);
  rp.recordElementReads(&reads);
  rp.at(actual, cex.index);
  if (!rp.complete() || !rp.recordedAllReads())
    return; // a partial cone could miss the departure

  // Checkpoints: every class a reference relation reads (covers are proofs).
  std::set<ClassId> proven;
  for (const ValueInfo &v : refValues)
    if (v.term) {
      std::vector<ClassId> cs;
      collectReads(v.term, cs);
      proven.insert(cs.begin(), cs.end());
    }
  auto isCheckpoint = [&](ClassId c) { return classes.peek(c).kind != ClassInfo::Compute || proven.count(c); };

  // The cone of the failing element, not entered past a checkpoint.
  std::set<ClassId> border;
  std::map<ClassId, std::vector<std::vector<int64_t>>> region; // class -> its elements in the cone
  std::set<Replayer::Element> seen;
  std::vector<Replayer::Element> todo{{Replayer::kRoot, {}}};
  while (!todo.empty()) {
    Replayer::Element e = todo.back();
    todo.pop_back();
    auto it = reads.find(e);
    if (it == reads.end())
      continue;
    for (const Replayer::Element &in : it->second) {
      if (!seen.insert(in).second)
        continue;
      if (isCheckpoint(in.first)) {
        if (classes.peek(in.first).kind == ClassInfo::Compute)
          border.insert(in.first);
        continue;
      }
      region[in.first].push_back(in.second);
      todo.push_back(in);
    }
  }

  std::vector<RegionNode> nodes;
  for (auto &[c, _] : region)
    if (auto n = nodeOf(core, c, cex.rank))
      nodes.push_back(*n);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (nodes.empty())
    return;

  std::set<std::string> refModules;
  for (const Node &n : core.ref.nodes)
    refModules.insert(n.modulePath());
  // What the reference computes for this element, over the same checkpoints.
  std::vector<double> refVals;
  {
    Replayer rq(classes, sizes, cex.intOffset);
    rq.setBudget(kLocalizeSteps);
    rq.recordValues(&refVals);
    rq.at(expected, cex.index);
    if (!rq.complete())
      refVals.clear();
    std::sort(refVals.begin(), refVals.end());
  }
  // The first node with an element the reference does not compute.
  const RegionNode *departs = nullptr;
  for (const RegionNode &n : nodes) {
    for (auto &idx : region[n.cls]) {
      auto v = rp.element({n.cls, idx});
      if (v && !refVals.empty() && !implied(*v, refVals)) {
        departs = &n;
        break;
      }
    }
    if (departs)
      break;
  }
  const RegionNode &start = departs ? *departs : nodes.front();
  const std::string module = start.node->modulePath();
  const bool rankOnly = !module.empty() && !refModules.count(module);

  // The node named first, then the rest of the region in graph order.
  std::vector<std::string> shown{describeRankNode(start)};
  for (const RegionNode &n : nodes)
    if (shown.size() < 8 && !(n == start))
      shown.push_back(describeRankNode(n));
  for (const std::string &p : f.rankNodes) // the nodes writing the output stay
    if (std::find(shown.begin(), shown.end(), p) == shown.end())
      shown.push_back(p);
  f.rankNodes = shown;

  std::string from;
  unsigned listed = 0;
  for (ClassId c : border)
    if (listed++ < 3)
      from += (from.empty() ? "" : ", ") + classes.peek(c).label;
  if (border.size() > 3)
    from += ", ...";
  const std::string where = "rank " + std::to_string(start.rank) + " node " + start.node->name + " (" +
                            start.node->opType + ")" +
                            (module.empty() ? "" : rankOnly ? " in module " + module + ", which only the ranks have"
                                                            : " in module " + module);
  const std::string between = "between " + (from.empty() ? std::string("the inputs")
                                                          : "rank tensors proven equal to the reference's (" + from + ")") +
                              " and this element";
  const std::string count = std::to_string(nodes.size()) + " rank node" + (nodes.size() == 1 ? "" : "s");
  if (departs)
    f.message += "; it departs from the reference at " + where + ": of the " + count + " " + between +
                 ", it is the first whose value there is none the reference computes from them";
  else if (nodes.size() == 1)
    f.message += "; it departs from the reference at " + where + ", the only rank node " + between;
  else
    f.message += "; it departs from the reference in the " + count + " " + between + ", starting at " + where;
  // A module the reference has is already named by its node without a
  // relation; one only the ranks have becomes the failure's module (and the
  // headline's, see OutputCheck::orderFailures).
  if (rankOnly) {
    f.module = module;
    departsInRankOnlyModule.insert(f.tensor);
  }
}

} // namespace shardproof::relation
