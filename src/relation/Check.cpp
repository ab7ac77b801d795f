// The refinement check proper: obligations, reference outputs against the
// spec's relations, counterexamples, and the verdict.
#include "Session.h"

#include <algorithm>

#include <llvm/Support/FormatVariadic.h>

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

std::string Session::renderAt(const Term &t, const smt::Model &m) const {
  return Witness::renderWithModel([this](const Term &x) { return render(x); }, t, m);
}

Counterexample Session::makeCounterexample(const Expr &region, const std::string &tensor, int rank,
                                           const Shape &shape, const Term &expected, const Term &actual) {
  Counterexample cex;
  cex.tensor = tensor;
  cex.rank = rank;
  smt::CheckResult r = solver.check("cex.find", region);
  if (r.result != smt::Result::Sat)
    return cex;
  std::vector<std::string> order = symbolNames();
  for (size_t d = 0; d < shape.rank(); ++d)
    order.push_back("i!" + std::to_string(d));
  smt::Model m = solver.shrink("cex", region, r.model, order);
  for (auto &n : symbolNames())
    if (auto v = m.get(n))
      cex.sizes.push_back({n, *v});
  for (size_t d = 0; d < shape.rank(); ++d)
    cex.index.push_back(m.get("i!" + std::to_string(d)).value_or(0));
  if (expected)
    cex.expected = renderAt(expected, m);
  if (actual)
    cex.actual = renderAt(actual, m);
  return cex;
}

void Session::checkObligations() {
  // Obligations repeat (the same reshape or broadcast condition on every layer
  // and rank): each distinct formula is decided once. The map holds the
  // formulas alive, so an AST id cannot be recycled for another one.
  std::unordered_map<unsigned, std::pair<Expr, smt::Proof>> decided;
  std::vector<Expr> goals;
  for (auto &po : obligations)
    goals.push_back(po.obl.cond);
  result.stats.obligations = static_cast<unsigned>(obligations.size());
  {
    std::unordered_set<unsigned> ids; // `goals` holds the formulas alive
    for (auto &g : goals)
      if (g.isValid())
        ids.insert(g.id());
    result.stats.distinctObligations = static_cast<unsigned>(ids.size());
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
    if (p.proved())
      continue;
    Failure f{Failure::Obligation, "", po.node, "", po.module, "", {}, std::nullopt};
    std::string where = po.rank >= 0 ? "rank " + std::to_string(po.rank) : "reference";
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
      Counterexample cex;
      cex.rank = po.rank;
      smt::Model m = solver.shrink("obligation.cex", !po.obl.cond, p.counterexample, symbolNames());
      for (auto &n : symbolNames())
        if (auto v = m.get(n))
          cex.sizes.push_back({n, *v});
      // Confirmed by evaluation, not only by the solver's model.
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
      f.cex = cex;
      // The reference itself breaking means the spec admits sizes the model does
      // not support: we cannot judge the implementation there.
      f.refOp = po.rank == -1 && !po.node.empty() ? "reference" : "";
    }
    // A rank node's own obligation: that node is where to look.
    if (po.rank >= 0 && po.rank < worldSize() && !po.node.empty())
      for (const ir::Node &n : ranks[po.rank].nodes)
        if (n.name == po.node) {
          f.rankNodes.push_back("rank " + std::to_string(po.rank) + ": " + n.name + " (" + n.opType + ")");
          break;
        }
    result.failures.push_back(f);
  }
}

// The rank nodes that write an output of this name (on `rank`, or on every
// rank for -1): where an output that differs is computed.
static std::vector<std::string> outputProducers(const std::vector<ir::Graph> &ranks, const std::string &name,
                                                int rank) {
  std::vector<std::string> out;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    auto id = ranks[r].find(name);
    int p = id && (rank < 0 || rank == r) ? ranks[r].values[*id].producer : -1;
    if (p >= 0)
      out.push_back("rank " + std::to_string(r) + ": " + ranks[r].nodes[p].name + " (" + ranks[r].nodes[p].opType + ")");
  }
  return out;
}

// Element term of the implementation side of an output for one placement.
llvm::Expected<std::vector<std::pair<int, std::pair<Term, Shape>>>>
outputSides(Session &S, const std::string &name, const spec::Placement &pl) {
  using K = spec::Placement::Kind;
  int P = S.worldSize();
  std::vector<std::pair<int, std::pair<Term, Shape>>> out;
  auto rankTensor = [&](int r) -> llvm::Expected<std::pair<Term, Shape>> {
    std::string rn = spec::Spec::rankName(name, pl, r);
    auto id = S.ranks[r].find(rn);
    if (!id)
      return userError("rank " + std::to_string(r) + " (" + S.ranks[r].path + ") has no tensor '" + rn +
                           "' for spec output '" + name + "'" + didYouMean(rn, S.ranks[r].valueNames()),
                       pl.loc);
    const ValueInfo &v = S.rankValues[r][*id];
    if (!v.term)
      return unsupportedError("rank " + std::to_string(r) + " tensor '" + rn + "': " +
                              (v.unsupported.empty() ? "no element map" : v.unsupported));
    return std::make_pair(v.term, *v.shape);
  };
  if (pl.kind == K::Relation) {
    auto rel = S.compileRelation(*pl.relation);
    if (!rel)
      return rel.takeError();
    out.push_back({-1, *rel});
    return out;
  }
  std::vector<std::pair<Term, Shape>> parts;
  for (int r = 0; r < P; ++r) {
    auto t = rankTensor(r);
    if (!t)
      return t.takeError();
    parts.push_back(*t);
  }
  if (pl.kind == K::Replicated) {
    for (int r = 0; r < P; ++r)
      out.push_back({r, parts[r]});
    return out;
  }
  if (pl.kind == K::Partial) {
    std::vector<Term> ts;
    for (auto &p : parts)
      ts.push_back(p.first);
    out.push_back({-1, {mkAdd(ts), parts[0].second}});
    return out;
  }
  // Shard: concatenation along the axis.
  const Shape &s0 = parts[0].second;
  int64_t axis = pl.axis < 0 ? pl.axis + static_cast<int64_t>(s0.rank()) : pl.axis;
  if (axis < 0 || axis >= static_cast<int64_t>(s0.rank()))
    return userError("spec output '" + name + "': shard axis out of range", pl.loc);
  IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
  auto [t, total] = concatAlong(
      P, axis, iv, [&](size_t r) { return parts[r].second.dims[axis]; },
      [&](size_t r, const IndexVec &src) { return instantiate(parts[r].first, iv, src, 0); });
  Shape os = s0;
  os.dims[axis] = total;
  if (pl.split == spec::Placement::Split::PadToMultiple) {
    // Rows past the reference's length are pad: when the shards hold exactly
    // the padded length, the claim is about the first n rows only; any other
    // length stays a shape mismatch.
    auto refId = S.ref.find(name);
    if (refId && S.refValues[*refId].shape && S.refValues[*refId].shape->rank() == os.rank()) {
      Expr n = S.refValues[*refId].shape->dims[axis];
      os.dims[axis] = ite(total == paddedLength(pl, n), n, total).simplify();
    }
  }
  out.push_back({-1, {t, os}});
  return out;
}

// One claim of the spec about a reference tensor (an output, or a `layers:`
// checkpoint): proven, refuted with a numeric witness, or unknown. Failures go
// to the result.
llvm::Expected<OutputResult> Session::checkClaim(int id, const spec::Placement &placement) {
  const std::string &name = ref.values[id].name;
  const spec::Placement *pl = &placement;
  OutputResult res;
  res.tensor = name;
  const ValueInfo &v = refValues[id];
  if (solver.pastDeadline()) {
    res.verdict = Verdict::Unknown;
    res.detail = solver.budgetMessage() + " before '" + name + "' was checked";
    return res;
  }
  if (!v.term) {
    res.verdict = Verdict::Unknown;
    res.detail = v.unsupported.empty() ? "no element map for the reference output" : v.unsupported;
    return res;
  }
  auto sides = outputSides(*this, name, *pl);
  if (!sides) {
    auto taken = takeError(sides.takeError());
    if (taken.kind == ErrorKind::User)
      return userError(taken.message, taken.loc);
    res.verdict = Verdict::Unknown;
    res.detail = taken.text;
    return res;
  }
  res.verdict = Verdict::Verified;
  for (auto &[rank, side] : *sides) {
    const Shape &shape = *v.shape;
    // Shapes first: the implementation must produce the reference's shape.
    bool shapeOk = side.second.rank() == shape.rank();
    std::optional<Counterexample> sizesCex;
    if (!shapeOk) {
      // A different number of dims is wrong at every size: show the smallest.
      res.verdict = Verdict::Refuted;
      res.detail = "the implementation has " + std::to_string(side.second.rank()) + " dims, the reference " +
                   std::to_string(shape.rank());
      smt::CheckResult any = solver.check("output.rank.cex", Expr::boolConst(true));
      if (any.result == smt::Result::Sat) {
        Counterexample cex;
        cex.tensor = name;
        cex.rank = rank;
        smt::Model m = solver.shrink("output.rank.cex", Expr::boolConst(true), any.model, symbolNames());
        for (auto &n : symbolNames())
          if (auto v = m.get(n))
            cex.sizes.push_back({n, *v});
        sizesCex = cex;
      }
    }
    for (size_t d = 0; shapeOk && d < shape.rank(); ++d) {
      Expr same = side.second.dims[d] == shape.dims[d];
      smt::Proof p = solver.prove("output.shape", same);
      if (!p.proved()) {
        shapeOk = false;
        res.verdict = p.status == smt::Proof::Refuted ? Verdict::Refuted : Verdict::Unknown;
        std::string impl = side.second.dims[d].str(), want = shape.dims[d].str();
        if (p.status == smt::Proof::Refuted) {
          // The smallest sizes where the shapes differ.
          Counterexample cex;
          cex.tensor = name;
          cex.rank = rank;
          smt::Model m = solver.shrink("output.shape.cex", !same, p.counterexample, symbolNames());
          for (auto &n : symbolNames())
            if (auto v = m.get(n))
              cex.sizes.push_back({n, *v});
          sizesCex = cex;
          // Long size formulas (clamped slice bounds) read better as numbers.
          auto env = [&](const std::string &n) { return m.get(n); };
          auto at = [&](const Expr &e, std::string &out) {
            if (out.size() <= 60)
              return;
            if (auto v = e.eval(env))
              out = std::to_string(*v) + " (at " + cex.str() + ")";
          };
          at(side.second.dims[d], impl);
          at(shape.dims[d], want);
          auto iv = side.second.dims[d].eval(env), rv = shape.dims[d].eval(env);
          if (iv && rv && *iv != *rv) {
            sizesCex->replayed = true;
            sizesCex->replay = "dim " + std::to_string(d) + " is " + std::to_string(*iv) +
                               " on the implementation, " + std::to_string(*rv) + " on the reference";
          }
        }
        res.detail = "dim " + std::to_string(d) + " is " + impl + " on the implementation, " + want + " on the reference";
      }
    }
    if (!shapeOk) {
      Failure f{Failure::OutputMismatch, "output '" + name + "': " + res.detail, "", "", "", name, {}, sizesCex};
      f.rankNodes = outputProducers(ranks, name, rank);
      result.failures.push_back(f);
      break;
    }
    Prover::Scope sc(prover, bounds(shape));
    const Term a0 = v.term, b0 = prover.normalize(side.first, 0);
    std::string who = rank >= 0 ? " on rank " + std::to_string(rank) : "";
    std::optional<Expr> diff = prover.firstDifference(a0, b0, 0);
    if (!diff)
      continue;
    // Numbers first: a confirmed difference needs no further proof attempts.
    Failure f{Failure::OutputMismatch, "", "", "", "", name, {}, std::nullopt};
    f.rankNodes = outputProducers(ranks, name, rank);
    if (auto w = witness().search(*diff, id, rank, shape, a0, b0)) {
      res.verdict = Verdict::Refuted;
      f.cex = w;
      f.message = "output '" + name + "'" + who + " differs from the reference";
      if (w->leakValue) {
        f.bugClass = BugClass::MaskLeak;
        f.message += llvm::formatv("; content the reference never reads (padding) reaches it: with only those "
                                   "elements changed it becomes {0}",
                                   *w->leakValue)
                         .str();
      }
      localizeDeparture(f, a0, b0);
    } else {
      // No difference on numbers: try to prove equality by unfolding rank
      // tensors into their definitions (Propose.cpp).
      diff = unfoldUntilEqual(a0, b0, *diff, opts.maxExpansion);
      if (!diff)
        continue;
      if (res.verdict != Verdict::Refuted)
        res.verdict = Verdict::Unknown;
      f.kind = Failure::SolverUnknown;
      f.cex = makeCounterexample(*diff, name, rank, shape, a0, b0);
      f.message = "could not prove output '" + name + "'" + who +
                  " equal to the reference, and found no numeric difference at the sizes tried" +
                  (prover.sawUnknown() ? " (" + prover.unknownReason() + ")" : "");
    }
    res.detail = f.message;
    result.failures.push_back(f);
    break; // one counterexample per output is enough
  }
  return res;
}

llvm::Error Session::checkOutputs() {
  std::vector<std::string> refOutputs;
  for (int id : ref.outputs)
    refOutputs.push_back(ref.values[id].name);
  for (auto &[name, pl] : spec.outputs)
    if (std::find(refOutputs.begin(), refOutputs.end(), name) == refOutputs.end())
      return userError("spec output '" + name + "' is not an output of the reference model" +
                           didYouMean(name, refOutputs),
                       pl.loc);
  for (int id : ref.outputs) {
    const std::string &name = ref.values[id].name;
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
    auto res = checkClaim(id, **pl);
    if (!res)
      return res.takeError();
    if (res->verdict == Verdict::Verified)
      labelProvenOutput(name, **pl);
    result.outputs.push_back(*res);
  }
  return llvm::Error::success();
}

// Under REFUTED, a reference node without a relation that feeds only outputs
// proven VERIFIED is a different decomposition, not the bug: it becomes a note
// so the headline names a node on the path of a refuted output.
void Session::demoteProvenBranches() {
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
  std::vector<Failure> keep;
  for (auto &f : result.failures) {
    auto id = f.kind == Failure::NoRelation ? ref.find(f.tensor) : std::nullopt;
    if (id && !reaches[*id])
      result.notes.push_back(f.message + " (every output it feeds is proven)");
    else
      keep.push_back(f);
  }
  result.failures = keep;
}

void Session::decide() {
  bool refuted = false, unknown = false;
  for (auto &o : result.outputs) {
    refuted |= o.verdict == Verdict::Refuted;
    unknown |= o.verdict == Verdict::Unknown;
  }
  for (auto &f : result.failures) {
    if (f.kind == Failure::Obligation && f.refOp != "reference")
      refuted = true;
    else if (f.kind == Failure::Obligation || f.kind == Failure::Unsupported || f.kind == Failure::SolverUnknown)
      unknown = true;
  }
  // A reference output the cover found no rank tensor for, but whose spec
  // claim is proven (a data-parallel loss against `mean(loss@*)`), has its
  // relation: not a failure to head a REFUTED report elsewhere.
  std::vector<Failure> kept;
  for (auto &f : result.failures) {
    bool proven = f.kind == Failure::NoRelation &&
                  std::any_of(result.outputs.begin(), result.outputs.end(), [&](const OutputResult &o) {
                    return o.tensor == f.tensor && o.verdict == Verdict::Verified;
                  });
    if (proven)
      result.notes.push_back(f.message + " (the output's placement is proven)");
    else
      kept.push_back(f);
  }
  result.failures = std::move(kept);
  if (refuted) {
    result.verdict = Verdict::Refuted;
    demoteProvenBranches();
  } else if (unknown || result.outputs.empty()) {
    result.verdict = Verdict::Unknown;
  } else {
    result.verdict = Verdict::Verified;
    // Every output is proven: a reference node without a rank counterpart was
    // only a different decomposition, not a bug.
    std::vector<Failure> keep;
    for (auto &f : result.failures)
      if (f.kind == Failure::NoRelation)
        result.notes.push_back(f.message + " (outputs proven regardless)");
      else
        keep.push_back(f);
    result.failures = keep;
  }
  // The failure to show first. REFUTED: a size obligation the implementation
  // breaks (the root cause when present), then an output whose replayed
  // difference starts in a module only the ranks have (the reference node
  // without a relation is then often only a different decomposition), then
  // the first reference node without a relation, then output mismatches.
  // UNKNOWN: what stopped the reasoning (an unsupported node, a solver limit);
  // the missing relations downstream of it are consequences.
  bool unknownFirst = result.verdict == Verdict::Unknown;
  std::stable_sort(result.failures.begin(), result.failures.end(), [&](const Failure &a, const Failure &b) {
    auto rankOf = [&](const Failure &f) {
      switch (f.kind) {
      case Failure::NoRelation: return unknownFirst ? 3 : 2;
      case Failure::Obligation: return unknownFirst ? 2 : (f.refOp == "reference" ? 4 : 0);
      case Failure::OutputMismatch:
        if (!unknownFirst && f.cex && f.cex->replayed && departsInRankOnlyModule.count(f.tensor))
          return 1;
        return unknownFirst ? 4 : 3;
      case Failure::Unsupported: return unknownFirst ? 0 : 4;
      case Failure::SolverUnknown: return unknownFirst ? 1 : 5;
      }
      return 6;
    };
    return rankOf(a) < rankOf(b);
  });
  if (result.verdict == Verdict::Verified) {
    result.reason = "every reference output is rebuilt from the ranks' outputs for all admissible sizes";
  } else if (!result.failures.empty()) {
    result.reason = result.failures.front().message;
  } else {
    result.reason = "no output could be checked";
  }
  attachSources(ref, ranks, result.failures);
  result.stats.solverQueries = solver.totalQueries();
  result.stats.cacheHits = prover.cacheHits() + solver.cacheHits();
  result.stats.rewriteSteps = prover.rewriteSteps();
  result.stats.memoStored = memo.stored();
  result.stats.memoHits = memo.hits();
}

} // namespace shardproof::relation
