// Relation inference over the reference graph: each reference tensor's element
// term is built from its inputs' relations, then covered by rank classes.
#include "Session.h"

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

// Does an index or condition of `t` depend on integer tensor data?
static bool readsData(const Term &t) {
  if (t->kind == TermKind::Read)
    for (auto &e : t->idx)
      if (e.hasApp())
        return true;
  if (t->kind == TermKind::Select && t->cond.hasApp())
    return true;
  for (auto &a : t->args)
    if (readsData(a))
      return true;
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
static std::optional<int> unreducedInput(const Session &S, const Node &n) {
  for (int id : n.inputs) {
    if (id < 0 || !S.refValues[id].term)
      continue;
    const Term &t = S.refValues[id].term;
    if (t->kind != TermKind::Apply || t->fn != Fn::Add)
      continue;
    std::set<int> ranks;
    bool reads = true;
    for (auto &a : t->args) {
      reads &= a->kind == TermKind::Read && S.classes[a->cls].rank >= 0;
      if (reads)
        ranks.insert(S.classes[a->cls].rank);
    }
    if (reads && static_cast<int>(ranks.size()) == S.worldSize())
      return id;
  }
  return std::nullopt;
}

// Whether rank r's node `n` reads one of the classes `reads`.
static bool readsAny(Session &S, int r, const Node &n, const std::vector<ClassId> &reads) {
  for (int id : n.inputs) {
    if (id < 0 || !S.rankValues[r][id].term)
      continue;
    std::vector<ClassId> in;
    collectReads(S.rankValues[r][id].term, in);
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
static std::vector<std::string> nearbyRankNodes(Session &S, const Term &t, const Node &refNode) {
  std::vector<ClassId> reads;
  collectReads(t, reads);
  auto find = [&](auto accept) {
    std::vector<std::string> out;
    for (int r = 0; r < S.worldSize(); ++r)
      for (const Node &n : S.ranks[r].nodes) {
        if (!accept(n) || !readsAny(S, r, n, reads))
          continue;
        out.push_back("rank " + std::to_string(r) + ": " + n.name + " (" + n.opType + ")");
        break;
      }
    return out;
  };
  auto out = find([&](const Node &n) { return n.opType == refNode.opType; });
  if (out.empty())
    out = find([&](const Node &n) { return n.modulePath() == refNode.modulePath(); });
  if (out.empty())
    out = find([](const Node &) { return true; });
  return out;
}

llvm::Error Session::inferReference(Claims &claims) {
  for (int id : ref.inputs) {
    RelationRow row;
    row.tensor = ref.values[id].name;
    row.status = RelationRow::Input;
    row.relation = refValues[id].term ? render(refValues[id].term) : "?";
    result.rows.push_back(row);
  }
  // Checkpoints name reference tensors computed by some node.
  std::map<std::string, const spec::Placement *> checkpoints;
  for (auto &[name, pl] : spec.layers) {
    auto id = ref.find(name);
    if (!id || ref.values[*id].producer < 0)
      return userError("spec layer '" + name + "' is not a tensor computed by the reference model" +
                           didYouMean(name, ref.valueNames()),
                       pl.loc);
    checkpoints[name] = &pl;
  }
  bool reportedUnresolved = false;
  for (const Node &n : ref.nodes) {
    if (solver.pastDeadline()) {
      std::string cut = solver.firstCutQuery().empty() ? "" : "; solver query '" + solver.firstCutQuery() + "' was cut short";
      result.failures.push_back({Failure::SolverUnknown,
                                 solver.budgetMessage() + " at reference node " + describe(n) +
                                     (n.modulePath().empty() ? "" : " in module " + n.modulePath()) + cut +
                                     "; it and the nodes after it were not checked",
                                 n.name, n.opType, n.modulePath(), "", {}, std::nullopt});
      break;
    }
    ++result.stats.refNodes;
    if (opts.progress && (result.stats.refNodes & 15) == 0)
      opts.progress("infer", result.stats.refNodes, ref.nodes.size());
    const unsigned unknownBefore = unknownQueries();
    if (const OpDef *d = lookupOp(n.domain, n.opType); d && d->cls == OpClass::Collective)
      return userError("reference model " + ref.path + " contains the collective " + describe(n) +
                       "; the reference must be the single-device model");
    if (auto e = evalNode(ref, n, refValues, -1))
      return e;
    const OpDef *def = lookupOp(n.domain, n.opType);
    for (int o : n.outputs) {
      ValueInfo &v = refValues[o];
      RelationRow row;
      row.tensor = ref.values[o].name;
      row.node = n.name;
      row.op = n.opType;
      row.module = n.modulePath();
      if (!v.term) {
        if (!v.unsupported.empty()) {
          row.status = RelationRow::Unsupported;
          row.relation = v.unsupported;
          // Report where it starts, not every node downstream that inherits it.
          bool inherited = false;
          for (int id : n.inputs)
            inherited |= id >= 0 && refValues[id].unsupported == v.unsupported;
          if (!inherited)
            result.failures.push_back({Failure::Unsupported, v.unsupported + " at node " + describe(n), n.name,
                                       n.opType, n.modulePath(), ref.values[o].name, {}, std::nullopt});
          result.rows.push_back(row);
        }
        continue; // shape data: no element relation needed
      }
      // A view at data-dependent positions (an embedding lookup) is, on the
      // ranks, a masked lookup and a reduction: it needs covering like a compute.
      if (((def && def->cls == OpClass::View) || isPure(v.term)) && !readsData(v.term)) {
        row.status = RelationRow::View;
      } else {
        Prover::Scope sc(prover, bounds(*v.shape));
        unsigned matches = 0;
        // Past an unrelated node, terms compose every layer below them; covering
        // them is a search that only gets slower. Unmatched is a safe answer: the
        // output check decides the verdict.
        if (termSize(v.term) <= opts.maxTermNodes)
          v.term = coverMemoized(v.term, *v.shape, matches);
        result.stats.matches += matches;
        // Matched: some rank tensor computes this node's result (a relation that
        // only re-adds earlier rank tensors, like `p@0 + p@1 + b`, has no counterpart).
        row.status = matches > 0 && resolved(v.term) ? RelationRow::Matched : RelationRow::Unmatched;
      }
      // No counterpart found by covering: the ranks' tensors of the same name,
      // proven (Propose.cpp).
      if (row.status == RelationRow::Unmatched && termSize(v.term) <= opts.maxTermNodes)
        if (auto t = proposeByName(o, claims)) {
          v.term = *t;
          row.status = RelationRow::Matched;
        }
      ++result.stats.relations;
      if (auto it = checkpoints.find(ref.values[o].name); it != checkpoints.end()) {
        // Prove the user's claim here; once proven, downstream nodes build on
        // it (the claim's form, not whatever the search found).
        auto claim = claims.check(o, *it->second);
        if (!claim)
          return claim.takeError();
        claim->tensor += " (layer checkpoint)";
        if (claim->verdict == Verdict::Verified) {
          auto sides = claims.sides().ofClaim(ref.values[o].name, *it->second);
          if (!sides)
            return sides.takeError();
          Prover::Scope sc(prover, bounds(*v.shape));
          v.term = prover.normalize(sides->front().second.first, 0);
          row.status = RelationRow::Matched;
        }
        result.outputs.push_back(*claim);
      }
      row.relation = render(v.term);
      if (row.status == RelationRow::Unmatched && !reportedUnresolved) {
        reportedUnresolved = true;
        Failure f{Failure::NoRelation, "", n.name, n.opType, n.modulePath(), ref.values[o].name, {}, std::nullopt};
        f.rankNodes = nearbyRankNodes(*this, v.term, n);
        auto region = unresolvedRegion(v.term, bounds(*v.shape));
        bool partial = region && !sameTerm(region->second, v.term);
        f.message = partial ? "rank tensors compute only part of reference tensor '" + ref.values[o].name + "' of " +
                                  describe(n) + "; the element below has no counterpart on any rank"
                            : "no rank tensor computes reference tensor '" + ref.values[o].name + "' of " +
                                  describe(n);
        // A solver limit here means the search may have missed the counterpart.
        if (unknownQueries() > unknownBefore)
          f.message += " (a solver query for this node was cut short: " + prover.unknownReason() + ")";
        if (region)
          f.cex = makeCounterexample(region->first, ref.values[o].name, -1, *v.shape, region->second, nullptr);
        if (partial)
          f.bugClass = BugClass::UncoveredElements;
        if (auto in = unreducedInput(*this, n)) {
          f.bugClass = BugClass::MissingReduction;
          f.message += "; its input '" + ref.values[*in].name + "' is a sum of the ranks' partial results (" +
                       render(refValues[*in].term) +
                       ") and no rank tensor holds that sum: the reduction is missing or reduces something else";
          // The missing (or misplaced) reduction belongs to the producer's module;
          // a graph input placed `partial` has no producer: the failure stays here.
          if (int p = ref.values[*in].producer; p >= 0)
            f.module = ref.nodes[p].modulePath();
        }
        result.failures.push_back(f);
      }
      if (row.status == RelationRow::Unmatched && termSize(v.term) > opts.maxTermNodes)
        v.term = abstractReference(o);
      result.rows.push_back(row);
    }
  }
  return llvm::Error::success();
}

// `prover.cover` under the tensor's bounds (already on the path), reused for a
// term identical up to class names (the same tensor one layer up).
Term Session::coverMemoized(const Term &t, const Shape &shape, unsigned &matches) {
  std::optional<MemoKey> key;
  if (opts.memo && prover.pathDepth() == 1) {
    key = coverKey(t, shape, opts.maxTermNodes);
    if (auto hit = memo.lookup(*key, classes)) {
      matches += static_cast<unsigned>(hit->first->extra);
      return hit->second.apply(hit->first->terms[0]);
    }
  }
  const unsigned unknownBefore = unknownQueries();
  unsigned found = 0;
  Term out;
  {
    std::optional<ClassTable::Recording> rec;
    if (key)
      rec.emplace(classes);
    out = prover.cover(t, 0, found);
    if (key && rec->reusable() && unknownQueries() == unknownBefore)
      memo.store(std::move(*key), rec->consulted(), {{out}, found});
  }
  matches += found;
  return out;
}

Term Session::abstractReference(int id) {
  const ValueInfo &v = refValues[id];
  ClassInfo ci;
  ci.kind = ClassInfo::Leaf;
  ci.label = ref.values[id].name + " (reference)";
  ci.shape = *v.shape;
  ci.abstractedReference = true;
  ClassId c = classes.add(std::move(ci));
  return mkRead(c, indexVars("i", static_cast<unsigned>(v.shape->rank())));
}

} // namespace shardproof::relation
