// Relation inference over the reference graph: each reference tensor's element
// term is built from its inputs' relations, then covered by rank classes.
#include "LayerCopy.h"
#include "Walk.h"

#include <llvm/ADT/ScopeExit.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

// A relation is "resolved" when it only moves, slices or sums rank tensors:
// what the relation language (concat, slice, pad, sum) can say.
static bool resolved(const Term &t) {
  switch (t->kind) {
  case TermKind::Const:
  case TermKind::Read:
    return true;
  case TermKind::Select:
    return resolved(t->args[0]) && resolved(t->args[1]);
  case TermKind::Apply:
    if (t->fn != Fn::Add)
      return false;
    for (auto &a : t->args)
      if (!resolved(a))
        return false;
    return true;
  case TermKind::Sum:
    return false;
  }
  return false;
}

// The first region of `t` that is still an unresolved computation.
static std::optional<std::pair<Expr, Term>> unresolvedRegion(const Term &t, const Expr &path) {
  if (t->kind == TermKind::Select) {
    if (auto r = unresolvedRegion(t->args[0], path && t->cond))
      return r;
    return unresolvedRegion(t->args[1], path && !t->cond);
  }
  if (resolved(t))
    return std::nullopt;
  return std::make_pair(path, t);
}

// An input whose relation is a sum of the ranks' tensors (a partial sum): when
// its consumer has no counterpart, the missing reduction is the likely bug.
std::optional<int> ReferenceWalk::unreducedInput(const Node &n) const {
  for (int id : n.inputs) {
    if (id < 0 || !refValues[id].term)
      continue;
    const Term &t = refValues[id].term;
    if (t->kind != TermKind::Apply || t->fn != Fn::Add)
      continue;
    std::set<int> ranks;
    bool reads = true;
    for (auto &a : t->args) {
      reads &= a->kind == TermKind::Read && core.classes[a->cls].rank >= 0;
      if (reads)
        ranks.insert(core.classes[a->cls].rank);
    }
    if (reads && static_cast<int>(ranks.size()) == core.worldSize())
      return id;
  }
  return std::nullopt;
}

// Whether rank r's node `n` reads one of the classes `reads`.
static bool readsAny(const std::vector<std::vector<ValueInfo>> &rankValues, PendingValues *pending, int r,
                     const Node &n, const std::vector<ClassId> &reads) {
  for (int id : n.inputs) {
    if (id < 0)
      continue;
    const ValueInfo &v = rankValue(rankValues, pending, r, id);
    if (!v.term)
      continue;
    std::vector<ClassId> in;
    collectReads(v.term, in);
    for (ClassId c : in)
      if (std::find(reads.begin(), reads.end(), c) != reads.end())
        return true;
  }
  return false;
}

// Rank nodes that read the classes a term reads: the place to look when the
// reference node finds no counterpart. Preferably of the same op; else of the
// same module (a LogSoftmax the ranks compute as max, exp-sum and log); else
// any node that reads them.
static std::vector<std::string> nearbyRankNodes(const CheckCore &core,
                                                const std::vector<std::vector<ValueInfo>> &rankValues,
                                                PendingValues *pending, const Term &t, const Node &refNode) {
  std::vector<ClassId> reads;
  collectReads(t, reads);
  auto find = [&](auto accept) {
    std::vector<std::string> out;
    for (int r = 0; r < core.worldSize(); ++r)
      for (const Node &n : core.ranks[r].nodes) {
        if (!accept(n) || !readsAny(rankValues, pending, r, n, reads))
          continue;
        out.push_back("rank " + std::to_string(r) + ": " + n.name + " (" + n.opType + ")");
        break;
      }
    return out;
  };
  auto out = find([&](const Node &n) { return n.opType == refNode.opType; });
  if (out.empty())
    out = find([&, module = refNode.modulePath()](const Node &n) { return n.inModule(module); });
  if (out.empty())
    out = find([](const Node &) { return true; });
  return out;
}

llvm::Expected<WalkResult> ReferenceWalk::run() {
  const ir::Graph &ref = core.ref;
  for (int id : ref.inputs) {
    RelationRow row;
    row.tensor = ref.values[id].name;
    row.status = RelationRow::Input;
    row.relation = refValues[id].term ? core.render(refValues[id].term) : "?";
    core.result.rows.push_back(row);
  }
  auto marks = checkpoints();
  if (!marks)
    return marks.takeError();
  std::set<std::string> markNames;
  for (auto &[name, pl] : *marks)
    markNames.insert(name);
  // Whole layers taken as the layer below renamed (LayerCopy.h).
  ReferenceLayerCopy layers(core, nodes, refValues, raised, markNames, rankLayerMaps);
  claims.setPendingReference(layers.pending());
  auto walk = [&](const Node &n, bool evaluated) { return walkNode(n, *marks, evaluated); };
  for (size_t i = 0; i < ref.nodes.size();) {
    if (i == layers.stopAt()) {
      auto next = layers.atBoundary(walk);
      if (!next)
        return next.takeError();
      i = *next;
      continue;
    }
    const Node &n = ref.nodes[i++];
    if (core.solver.pastDeadline()) {
      stopAtDeadline(n);
      break;
    }
    if (auto e = walkNode(n, *marks))
      return std::move(e);
  }
  core.result.stats.refLayersCopied = layers.copied();
  return WalkResult{std::move(raised), std::move(explainNoRelation)};
}

// Checkpoints name reference tensors computed by some node.
llvm::Expected<ReferenceWalk::Checkpoints> ReferenceWalk::checkpoints() const {
  Checkpoints out;
  for (auto &[name, pl] : core.spec.layers) {
    auto id = core.ref.find(name);
    if (!id || core.ref.values[*id].producer < 0)
      return userError("spec layer '" + name + "' is not a tensor computed by the reference model" +
                           didYouMean(name, core.ref.valueNames()),
                       pl.loc);
    out[name] = &pl;
  }
  return out;
}

void ReferenceWalk::stopAtDeadline(const Node &n) {
  smt::Solver &solver = core.solver;
  std::string cut = solver.firstCutQuery().empty() ? "" : "; solver query '" + solver.firstCutQuery() + "' was cut short";
  core.result.failures.push_back({Failure::SolverUnknown,
                                  solver.budgetMessage() + " at reference node " + describe(n) +
                                      (n.modulePath().empty() ? "" : " in module " + n.modulePath()) + cut +
                                      "; it and the nodes after it were not checked",
                                  n.name, n.opType, n.modulePath(), "", {}, std::nullopt});
}

// Keeps the slowest nodes seen so far, slowest first (a short sorted list:
// one insertion per node that beats the last).
static void noteNodeTime(std::vector<NodeTime> &slowest, const Node &n, double seconds, double solverSeconds) {
  if (slowest.size() == Stats::kSlowestNodes && seconds <= slowest.back().seconds)
    return;
  auto at = std::find_if(slowest.begin(), slowest.end(), [&](const NodeTime &t) { return t.seconds < seconds; });
  slowest.insert(at, NodeTime{n.name, n.opType, n.modulePath(), seconds, solverSeconds});
  if (slowest.size() > Stats::kSlowestNodes)
    slowest.pop_back();
}

llvm::Error ReferenceWalk::walkNode(const Node &n, const Checkpoints &checkpoints, bool evaluated) {
  auto start = std::chrono::steady_clock::now();
  const double solverBefore = core.solver.totalSeconds();
  auto timed = llvm::make_scope_exit([&] {
    noteNodeTime(core.result.stats.slowestNodes, n,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 core.solver.totalSeconds() - solverBefore);
  });
  Stats &stats = core.result.stats;
  ++stats.refNodes;
  if (core.opts.progress && (stats.refNodes & 15) == 0)
    core.opts.progress("infer", stats.refNodes, core.ref.nodes.size());
  const unsigned unknownBefore = core.unknownQueries();
  if (const OpDef *d = opOf(n); d && d->cls == OpClass::Collective)
    return userError("reference model " + core.ref.path + " contains the collective " + describe(n) +
                     "; the reference must be the single-device model");
  if (!evaluated)
    if (auto e = nodes.eval(core.ref, n, refValues, -1, raised))
      return e;
  for (int o : n.outputs)
    if (auto e = relateOutput(n, o, unknownBefore, checkpoints))
      return e;
  return llvm::Error::success();
}

// Output `o` of reference node `n`: its row in the relation table, the claim
// at a checkpoint, the failure when no rank tensor computes it.
llvm::Error ReferenceWalk::relateOutput(const Node &n, int o, unsigned unknownBefore,
                                        const Checkpoints &checkpoints) {
  const ir::Graph &ref = core.ref;
  const Options &opts = core.opts;
  ValueInfo &v = refValues[o];
  RelationRow row;
  row.tensor = ref.values[o].name;
  row.node = n.name;
  row.op = n.opType;
  row.module = n.modulePath();
  if (!v.term) {
    if (!v.unsupported.empty())
      reportUnsupported(n, o, row);
    return llvm::Error::success(); // shape data: no element relation needed
  }
  row.status = coverOrView(n, v);
  // No counterpart found by covering: the ranks' tensors of the same name,
  // proven (Propose.cpp).
  if (row.status == RelationRow::Unmatched && termSize(v.term) <= opts.maxTermNodes)
    if (auto t = proposeByName(o)) {
      v.term = *t;
      row.status = RelationRow::Matched;
    }
  ++core.result.stats.relations;
  if (auto it = checkpoints.find(ref.values[o].name); it != checkpoints.end())
    if (auto e = proveCheckpoint(o, *it->second, row))
      return e;
  row.relation = core.render(v.term);
  if (row.status == RelationRow::Unmatched && !reportedUnresolved) {
    reportedUnresolved = true;
    core.result.failures.push_back(noRelation(n, o, unknownBefore));
  }
  if (row.status == RelationRow::Unmatched && termSize(v.term) > opts.maxTermNodes)
    v.term = abstractReference(o);
  core.result.rows.push_back(row);
  return llvm::Error::success();
}

// A tensor without an element map: reported where it starts, not at every
// node downstream that inherits it.
void ReferenceWalk::reportUnsupported(const Node &n, int o, RelationRow &row) {
  const ValueInfo &v = refValues[o];
  row.status = RelationRow::Unsupported;
  row.relation = v.unsupported;
  bool inherited = false;
  for (int id : n.inputs)
    inherited |= id >= 0 && refValues[id].unsupported == v.unsupported;
  if (!inherited)
    core.result.failures.push_back({Failure::Unsupported, v.unsupported + " at node " + describe(n), n.name,
                                    n.opType, n.modulePath(), core.ref.values[o].name, {}, std::nullopt});
  core.result.rows.push_back(row);
}

// A view only moves elements; anything else is covered by the ranks' classes.
// Matched: some rank tensor computes this node's result (a relation that only
// re-adds earlier rank tensors, like `p@0 + p@1 + b`, has no counterpart).
RelationRow::Status ReferenceWalk::coverOrView(const Node &n, ValueInfo &v) {
  // A view at data-dependent positions (an embedding lookup) is, on the
  // ranks, a masked lookup and a reduction: it needs covering like a compute.
  const OpDef *def = opOf(n);
  if (((def && def->cls == OpClass::View) || isPure(v.term)) && !readsData(v.term))
    return RelationRow::View;
  Prover::Scope sc(core.prover, CheckCore::bounds(*v.shape));
  unsigned matches = 0;
  // Past an unrelated node, terms compose every layer below them; covering
  // them is a search that only gets slower. Unmatched is a safe answer: the
  // output check decides the verdict.
  if (termSize(v.term) <= core.opts.maxTermNodes)
    v.term = coverMemoized(v.term, *v.shape, matches);
  core.result.stats.matches += matches;
  return matches > 0 && resolved(v.term) ? RelationRow::Matched : RelationRow::Unmatched;
}

// Prove the user's claim here; once proven, downstream nodes build on it (the
// claim's form, not whatever the search found).
llvm::Error ReferenceWalk::proveCheckpoint(int o, const spec::Placement &pl, RelationRow &row) {
  ValueInfo &v = refValues[o];
  auto claim = claims.check(o, pl, raised);
  if (!claim)
    return claim.takeError();
  claim->tensor += " (layer checkpoint)";
  if (claim->verdict == Verdict::Verified) {
    auto sides = claims.sides(raised).ofClaim(core.ref.values[o].name, pl);
    if (!sides)
      return sides.takeError();
    Prover::Scope sc(core.prover, CheckCore::bounds(*v.shape));
    v.term = core.prover.normalize(sides->front().second.first, 0);
    row.status = RelationRow::Matched;
  }
  core.result.outputs.push_back(*claim);
  return llvm::Error::success();
}

// The first reference tensor no rank tensor computes: where the ranks stop
// following the reference, with the rank nodes nearby, the element without a
// counterpart, and the bug it suggests (a missing reduction).
Failure ReferenceWalk::noRelation(const Node &n, int o, unsigned unknownBefore) {
  const ir::Graph &ref = core.ref;
  const ValueInfo &v = refValues[o];
  Failure f{Failure::NoRelation, "", n.name, n.opType, n.modulePath(), ref.values[o].name, {}, std::nullopt};
  auto region = unresolvedRegion(v.term, CheckCore::bounds(*v.shape));
  bool partial = region && !sameTerm(region->second, v.term);
  f.message = partial ? "rank tensors compute only part of reference tensor '" + ref.values[o].name + "' of " +
                            describe(n) + "; the element below has no counterpart on any rank"
                      : "no rank tensor computes reference tensor '" + ref.values[o].name + "' of " + describe(n);
  // A solver limit here means the search may have missed the counterpart.
  if (core.unknownQueries() > unknownBefore)
    f.message += " (a solver query for this node was cut short: " + core.prover.unknownReason() + ")";
  explainNoRelation = [&core = core, &rankValues = rankValues, pending = pending, &n, tensor = ref.values[o].name,
                       term = v.term, shape = *v.shape, region](Failure &f) {
    if (f.kind != Failure::NoRelation || f.tensor != tensor)
      return;
    f.rankNodes = nearbyRankNodes(core, rankValues, pending, term, n);
    if (region)
      f.cex = core.makeCounterexample(region->first, tensor, -1, shape, region->second, nullptr);
  };
  if (partial)
    f.bugClass = BugClass::UncoveredElements;
  if (auto in = unreducedInput(n)) {
    f.bugClass = BugClass::MissingReduction;
    f.message += "; its input '" + ref.values[*in].name + "' is a sum of the ranks' partial results (" +
                 core.render(refValues[*in].term) +
                 ") and no rank tensor holds that sum: the reduction is missing or reduces something else";
    // The missing (or misplaced) reduction belongs to the producer's module;
    // a graph input placed `partial` has no producer: the failure stays here.
    if (int p = ref.values[*in].producer; p >= 0)
      f.module = ref.nodes[p].modulePath();
  }
  return f;
}

Term ReferenceWalk::coverMemoized(const Term &t, const Shape &shape, unsigned &matches) {
  const Options &opts = core.opts;
  std::optional<MemoKey> key;
  if (opts.memo && core.prover.pathDepth() == 1) {
    key = coverKey(t, shape, opts.maxTermNodes, core.classes);
    if (auto hit = core.memo.lookup(*key, core.classes)) {
      matches += static_cast<unsigned>(hit->first->extra);
      return hit->second.apply(hit->first->terms[0]);
    }
  }
  unsigned found = 0;
  Term out;
  {
    MemoRecording rec(core, std::move(key));
    out = core.prover.cover(t, 0, found);
    rec.store({{out}, found});
  }
  matches += found;
  return out;
}

Term ReferenceWalk::abstractReference(int id) {
  const ValueInfo &v = refValues[id];
  ClassInfo ci;
  ci.kind = ClassInfo::Leaf;
  ci.label = core.ref.values[id].name + " (reference)";
  ci.shape = *v.shape;
  ci.abstractedReference = true;
  ClassId c = core.classes.add(std::move(ci));
  return mkRead(c, indexVars("i", static_cast<unsigned>(v.shape->rank())));
}

} // namespace shardproof::relation
