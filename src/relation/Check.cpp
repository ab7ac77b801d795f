// The output check: obligations, reference outputs against the spec's
// relations, and the verdict with the failure shown first.
#include "Check.h"
#include "Sources.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

const char *toString(Verdict v) {
  switch (v) {
  case Verdict::Verified: return "VERIFIED";
  case Verdict::Refuted: return "REFUTED";
  case Verdict::Unknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

// Once the implementation is refuted, the relation table and the outputs'
// comparisons only explain the failure, and no answer can change the verdict:
// a query that runs longer than this is left undecided (a mutant spent 200 s
// in queries timing out at 10 s each).
constexpr unsigned kExplainTimeoutMs = 1000;

// A size obligation of the implementation that fails: REFUTED by itself (the
// reference's own is UNKNOWN: the spec admits sizes the model does not take).
static bool refutesImplementation(const Failure &f) {
  return f.kind == Failure::Obligation && f.refOp != "reference";
}

void OutputCheck::explainOnlyIfRefuted() {
  for (const Failure &f : core.result.failures)
    if (refutesImplementation(f)) {
      claims.alreadyRefuted(f.message);
      core.solver.setTimeout(std::min(core.opts.solverTimeoutMs, kExplainTimeoutMs));
      return;
    }
}

void OutputCheck::decideEarly(const std::vector<PendingObligation> &obligations) {
  if (!core.solver.pastDeadline())
    checkObligations(obligations);
  explainOnlyIfRefuted();
}

llvm::Expected<Result> OutputCheck::run(const std::vector<PendingObligation> &obligations,
                                        const std::function<void(Failure &)> &explainNoRelation) {
  decideEarly(obligations); // the walk's, as decideEarly took binding's and the world's
  std::vector<PendingObligation> fromRelations;
  if (auto e = checkOutputs(fromRelations))
    return std::move(e);
  // The size conditions of the spec's output relations (slice bounds, reshape
  // element counts) arrive with the claims; they are decided like the rest
  // (they were once left undecided: a relation slicing past its tensor).
  if (!fromRelations.empty() && !core.solver.pastDeadline())
    checkObligations(fromRelations);
  decide(explainNoRelation);
  if (core.result.verdict == Verdict::Unknown && core.solver.pastDeadline())
    blameTheBudget();
  return std::move(core.result);
}

void OutputCheck::checkObligations(const std::vector<PendingObligation> &obligations) {
  smt::Solver &solver = core.solver;
  const Options &opts = core.opts;
  // Obligations repeat (the same reshape or broadcast condition on every layer
  // and rank): each distinct formula is decided once. The map holds the
  // formulas alive, so an AST id cannot be recycled for another one.
  std::unordered_map<unsigned, std::pair<Expr, smt::Proof>> decided;
  std::vector<Expr> goals;
  for (auto &po : obligations)
    goals.push_back(po.obl.cond);
  core.result.stats.obligations += static_cast<unsigned>(obligations.size());
  {
    std::unordered_set<unsigned> ids; // `goals` holds the formulas alive
    for (auto &g : goals)
      if (g.isValid())
        ids.insert(g.id());
    core.result.stats.distinctObligations += static_cast<unsigned>(ids.size());
  }
  solver.provePrefetch("obligation", goals, opts.jobs);
  size_t done = 0;
  for (auto &po : obligations) {
    if (opts.progress && (++done & 255) == 0)
      opts.progress("obligations", done, obligations.size());
    const Expr &cond = po.obl.cond;
    smt::Proof p;
    auto it = opts.memo && cond.isValid() ? decided.find(cond.id()) : decided.end();
    if (it != decided.end() && it->second.first.same(cond)) {
      p = it->second.second;
    } else {
      p = solver.prove("obligation", cond);
      if (opts.memo && cond.isValid())
        decided[cond.id()] = {cond, p};
    }
    if (!p.proved())
      core.result.failures.push_back(obligationFailure(po, p));
  }
}

// An obligation not proven: undecided (the formula shown, for the user to
// restate as a constraint) or refuted at the smallest sizes.
Failure OutputCheck::obligationFailure(const PendingObligation &po, const smt::Proof &p) {
  Failure f{Failure::Obligation, "", po.node, "", po.module, "", {}, std::nullopt};
  std::string where = po.rank >= 0 ? "rank " + std::to_string(po.rank) : "reference";
  const Expr &cond = po.obl.cond;
  if (p.status == smt::Proof::Unknown) {
    f.kind = Failure::SolverUnknown;
    // The formula itself: a nonlinear one the user can restate as a constraint.
    std::string formula = cond.isValid() ? cond.simplify().str() : "";
    if (formula.size() > 300)
      formula = formula.substr(0, 297) + "...";
    f.message = "could not decide that " + po.obl.what + " (" + where + "): " + p.reason +
                (formula.empty() ? "" : "; the obligation: " + formula);
  } else {
    f.message = po.obl.what + " fails (" + where + ")";
    f.cex = obligationCounterexample(po, p);
    // The reference itself breaking means the spec admits sizes the model does
    // not support: we cannot judge the implementation there.
    f.refOp = po.rank == -1 && !po.node.empty() ? "reference" : "";
  }
  // A rank node's own obligation: that node is where to look.
  if (po.rank >= 0 && po.rank < core.worldSize() && !po.node.empty())
    for (const ir::Node &n : core.ranks[po.rank].nodes)
      if (n.name == po.node) {
        f.rankNodes.push_back("rank " + std::to_string(po.rank) + ": " + n.name + " (" + n.opType + ")");
        break;
      }
  return f;
}

// The smallest sizes breaking a refuted obligation, confirmed by evaluating the
// condition there, not only by the solver's model.
Counterexample OutputCheck::obligationCounterexample(const PendingObligation &po, const smt::Proof &p) {
  Counterexample cex;
  cex.rank = po.rank;
  smt::Model m = core.solver.shrink("obligation.cex", !po.obl.cond, p.counterexample, core.symbols);
  core.addSizes(cex, m);
  std::string data; // data values (token ids) the condition read
  auto apps = [&](const std::string &fn, const std::vector<int64_t> &args) {
    auto v = m.apply(fn, args);
    if (v) {
      std::string at;
      for (auto a : args)
        at += (at.empty() ? "" : ", ") + std::to_string(a);
      std::string shown = fn.rfind("val:", 0) == 0 ? fn.substr(4) : fn;
      std::string item = shown + "[" + at + "] = " + std::to_string(*v);
      if (data.find(item) == std::string::npos)
        data += (data.empty() ? " where " : ", ") + item;
    }
    return v;
  };
  if (po.obl.cond.eval([&](const std::string &n) { return m.get(n); }, apps) == std::optional<int64_t>(0)) {
    cex.replayed = true;
    std::string cond = po.obl.cond.str();
    // A condition that folded to false says nothing by itself: the
    // obligation's text carries the two sides.
    cex.replay = cond == "false" ? "false at every size (the two sides are constants that differ)"
                                 : (cond.size() <= 100 ? "'" + cond + "'" : std::string("the condition")) +
                                       " evaluates to false" + data;
  }
  return cex;
}

llvm::Error OutputCheck::checkOutputs(std::vector<PendingObligation> &fromRelations) {
  const ir::Graph &ref = core.ref;
  std::vector<std::string> refOutputs;
  for (int id : ref.outputs)
    refOutputs.push_back(ref.values[id].name);
  for (auto &[name, pl] : core.spec.outputs)
    if (std::find(refOutputs.begin(), refOutputs.end(), name) == refOutputs.end())
      return userError("spec output '" + name + "' is not an output of the reference model" +
                           didYouMean(name, refOutputs),
                       pl.loc);
  for (int id : ref.outputs) {
    const std::string &name = ref.values[id].name;
    auto pl = placementOf(name);
    if (!pl)
      return pl.takeError();
    auto res = claims.check(id, *pl, fromRelations);
    if (!res)
      return res.takeError();
    if (res->verdict == Verdict::Verified)
      labelProvenOutput(name, *pl);
    core.result.outputs.push_back(*res);
  }
  return llvm::Error::success();
}

// Every reference output needs a placement in the spec.
llvm::Expected<spec::Placement> OutputCheck::placementOf(const std::string &name) {
  const spec::Spec &spec = core.spec;
  auto pl = spec.outputPlacement(name);
  if (!pl)
    return pl.takeError();
  if (!*pl)
    return userError("reference output '" + name + "' has no placement in the spec's outputs" +
                         (name.rfind("grad:", 0) == 0 && !spec.gradsLikeParams
                              ? " (a training step's gradients can be placed like their parameters with "
                                "'grads: like_params')"
                              : "") + ":",
                     spec.referenceLoc);
  return **pl;
}

// A proven output is a relation whatever the cover found: its row says so,
// with the spec's claim in the relation language.
void OutputCheck::labelProvenOutput(const std::string &name, const spec::Placement &pl) {
  auto &rows = core.result.rows;
  if (rowOf.empty())
    for (size_t i = 0; i < rows.size(); ++i)
      rowOf.try_emplace(rows[i].tensor, i);
  auto it = rowOf.find(name);
  if (it == rowOf.end() || it->second >= rows.size() || rows[it->second].tensor != name)
    return;
  RelationRow *row = &rows[it->second];
  if (row->status != RelationRow::Unmatched)
    return;
  using K = spec::Placement::Kind;
  const int P = core.worldSize();
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

// Under REFUTED, a reference node without a relation that feeds only outputs
// proven VERIFIED is a different decomposition, not the bug: it becomes a note
// so the headline names a node on the path of a refuted output.
void OutputCheck::demoteProvenBranches() {
  const ir::Graph &ref = core.ref;
  Result &result = core.result;
  std::vector<char> reaches(ref.values.size(), 0); // reaches an output not VERIFIED
  for (auto &o : result.outputs)
    if (o.verdict != Verdict::Verified)
      if (auto id = ref.find(o.tensor))
        reaches[*id] = 1;
  for (int n = static_cast<int>(ref.nodes.size()) - 1; n >= 0; --n) {
    bool any = false;
    for (int out : ref.nodes[n].outputs)
      any |= out >= 0 && reaches[out];
    if (any)
      for (int in : ref.nodes[n].inputs)
        if (in >= 0)
          reaches[in] = 1;
  }
  moveToNotes(
      [&](const Failure &f) {
        auto id = f.kind == Failure::NoRelation ? ref.find(f.tensor) : std::nullopt;
        return id && !reaches[*id];
      },
      " (every output it feeds is proven)");
}

// The failures `isNote` picks become notes, their message followed by `why`.
void OutputCheck::moveToNotes(const std::function<bool(const Failure &)> &isNote, const std::string &why) {
  Result &result = core.result;
  std::vector<Failure> keep;
  for (auto &f : result.failures)
    if (isNote(f))
      result.notes.push_back(f.message + why);
    else
      keep.push_back(f);
  result.failures = keep;
}

void OutputCheck::decide(const std::function<void(Failure &)> &explainNoRelation) {
  Result &result = core.result;
  bool refuted = false, unknown = false;
  for (auto &o : result.outputs) {
    refuted |= o.verdict == Verdict::Refuted;
    unknown |= o.verdict == Verdict::Unknown;
  }
  for (auto &f : result.failures) {
    if (refutesImplementation(f))
      refuted = true;
    else if (f.kind == Failure::Obligation || f.kind == Failure::Unsupported || f.kind == Failure::SolverUnknown)
      unknown = true;
  }
  // A reference output the cover found no rank tensor for, but whose spec
  // claim is proven (a data-parallel loss against `mean(loss@*)`), has its
  // relation: not a failure to head a REFUTED report elsewhere.
  moveToNotes(
      [&](const Failure &f) {
        return f.kind == Failure::NoRelation &&
               std::any_of(result.outputs.begin(), result.outputs.end(), [&](const OutputResult &o) {
                 return o.tensor == f.tensor && o.verdict == Verdict::Verified;
               });
      },
      " (the output's placement is proven)");
  if (refuted) {
    result.verdict = Verdict::Refuted;
    demoteProvenBranches();
  } else if (unknown || result.outputs.empty()) {
    result.verdict = Verdict::Unknown;
  } else {
    result.verdict = Verdict::Verified;
    // Every output is proven: a reference node without a rank counterpart was
    // only a different decomposition, not a bug.
    moveToNotes([](const Failure &f) { return f.kind == Failure::NoRelation; }, " (outputs proven regardless)");
  }
  if (explainNoRelation)
    for (Failure &f : result.failures)
      explainNoRelation(f);
  orderFailures();
  if (result.verdict == Verdict::Verified) {
    result.reason = "every reference output is rebuilt from the ranks' outputs for all admissible sizes";
  } else if (!result.failures.empty()) {
    result.reason = result.failures.front().message;
  } else {
    result.reason = "no output could be checked";
  }
  attachSources(core.ref, core.ranks, result.failures);
  result.stats.solverQueries = core.solver.totalQueries();
  result.stats.cacheHits = core.prover.cacheHits() + core.solver.cacheHits();
  result.stats.witnessed = core.solver.witnessed();
  result.stats.byIntervals = core.solver.byIntervals();
  result.stats.rewriteSteps = core.prover.rewriteSteps();
  result.stats.memoStored = core.memo.stored();
  result.stats.memoHits = core.memo.hits();
}

// The failure to show first. REFUTED: a size obligation the implementation
// breaks (the root cause when present), then an output whose replayed
// difference starts in a module only the ranks have (the reference node
// without a relation is then often only a different decomposition), then
// the first reference node without a relation, then output mismatches.
// UNKNOWN: what stopped the reasoning (an unsupported node, a solver limit);
// the missing relations downstream of it are consequences.
void OutputCheck::orderFailures() {
  Result &result = core.result;
  const std::set<std::string> &rankOnly = claims.departingInRankOnlyModule();
  bool unknownFirst = result.verdict == Verdict::Unknown;
  std::stable_sort(result.failures.begin(), result.failures.end(), [&](const Failure &a, const Failure &b) {
    auto rankOf = [&](const Failure &f) {
      switch (f.kind) {
      case Failure::NoRelation: return unknownFirst ? 3 : 2;
      case Failure::Obligation: return unknownFirst ? 2 : (refutesImplementation(f) ? 0 : 4);
      case Failure::OutputMismatch:
        if (!unknownFirst && f.cex && f.cex->replayed && rankOnly.count(f.tensor))
          return 1;
        return unknownFirst ? 4 : 3;
      case Failure::Unsupported: return unknownFirst ? 0 : 4;
      case Failure::SolverUnknown: return unknownFirst ? 1 : 5;
      }
      return 6;
    };
    return rankOf(a) < rankOf(b);
  });
}

// UNKNOWN past the time budget: the budget is why. It is said first, with
// what it cut short.
void OutputCheck::blameTheBudget() {
  Result &result = core.result;
  const std::string budget = core.solver.budgetMessage();
  auto byBudget = [&](const Failure &f) { return f.message.find(budget) != std::string::npos; };
  if (std::none_of(result.failures.begin(), result.failures.end(), byBudget))
    result.failures.push_back({Failure::SolverUnknown, budget + " before the check finished", "", "", "", "", {},
                               std::nullopt});
  std::stable_partition(result.failures.begin(), result.failures.end(), byBudget);
  result.reason = result.failures.front().message;
}

} // namespace shardproof::relation
