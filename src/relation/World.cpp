// Input binding: the size symbols and every input and initializer of the
// reference and rank graphs, bound to the spec's placements.
#include "NodeEval.h"
#include "RankSides.h"
#include "Bind.h"

#include <map>
#include <set>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

llvm::Expected<BoundInputs> InputBinding::run() {
  if (auto e = bindRankSymbols())
    return std::move(e);
  core.symbols = symbolNames();
  if (auto e = setupSymbols())
    return std::move(e);
  if (auto e = bindInputs())
    return std::move(e);
  return BoundInputs{std::move(refValues), std::move(rankValues), std::move(obligations)};
}

std::vector<std::string> InputBinding::symbolNames() const {
  std::set<std::string> names;
  for (auto &s : spec.symbols)
    names.insert(s.name);
  // Only graph inputs bind symbols: the shapes exporters declare on outputs
  // carry invented names ("Addy_dim_2") that are derived, not free.
  for (int id : ref.inputs)
    if (auto &d = ref.values[id].declared)
      for (auto &dim : d->dims)
        for (auto &n : dim.vars())
          names.insert(n);
  // Rank graphs after their rank-only dims were bound (RankSymbols.cpp).
  for (int r = 0; r < worldSize(); ++r)
    for (int id : ranks[r].inputs)
      if (auto d = rankShapeOf(r, id))
        for (auto &dim : d->dims)
          for (auto &n : dim.vars())
            names.insert(n);
  return {names.begin(), names.end()};
}

llvm::Error InputBinding::setupSymbols() {
  std::set<std::string> declared;
  for (auto &s : spec.symbols) {
    declared.insert(s.name);
    Expr v = Expr::intVar(s.name);
    if (s.value) {
      solver.assume(v == Expr::intConst(*s.value));
      continue;
    }
    solver.assume(v >= Expr::intConst(s.min.value_or(1)));
    if (s.max)
      solver.assume(v <= Expr::intConst(*s.max));
  }
  for (auto &n : symbolNames()) {
    if (declared.count(n))
      continue;
    // Every dim must be a size; a symbol the spec does not bound is any size >= 1.
    solver.assume(Expr::intVar(n) >= Expr::intConst(1));
    result.notes.push_back("symbol '" + n + "' is not in the spec's symbols; assumed >= 1");
  }
  for (auto &c : spec.constraints)
    solver.assume(c.expr);
  smt::CheckResult r = solver.check("spec.satisfiable", Expr::boolConst(true));
  if (r.result == smt::Result::Unsat)
    return userError("the spec's symbol bounds and constraints admit no size at all", spec.referenceLoc);
  // Undecided is not satisfiable: were the constraints contradictory, every
  // proof below would hold vacuously. UNKNOWN, never VERIFIED.
  if (r.result != smt::Result::Sat)
    result.failures.push_back({Failure::SolverUnknown,
                               "could not decide that the spec's symbol bounds and constraints admit any size (" +
                                   r.reason + "); a proof under them could hold vacuously",
                               "", "", "", "", {}, std::nullopt});
  for (const ir::Graph *g : capturedGraphs())
    if (auto e = checkCapturedGuards(*g))
      return e;
  return checkCapturedSizes();
}

std::vector<const ir::Graph *> InputBinding::capturedGraphs() const {
  std::vector<const ir::Graph *> out{&ref};
  for (const auto &g : ranks)
    out.push_back(&g);
  return out;
}

// A solver query that came back undecided: UNKNOWN with its reason.
static Failure undecided(std::string text) {
  return {Failure::SolverUnknown, std::move(text), "", "", "", "", {}, std::nullopt};
}

// A graph whose capture relied on a guard holds only where it does: the
// spec's assumptions must imply it. An input error quoting the guard, or
// UNKNOWN when undecided.
llvm::Error InputBinding::checkCapturedGuards(const ir::Graph &g) {
  if (g.assumption.empty())
    return llvm::Error::success();
  spec::SymbolTable any;
  any.allowAny = true;
  auto cond = spec::parseConstraint(g.assumption, any);
  if (!cond)
    return userError(g.path + ": metadata shardproof.assume: " + takeError(cond.takeError()).text);
  smt::CheckResult r = solver.check("spec.captured_guards", !*cond);
  if (r.result == smt::Result::Sat)
    return userError("the spec admits sizes where " + g.path + " was not captured: torch traced it under `" +
                         g.assumption + "`; add that to the spec's constraints (shardproof init drafts it)",
                     spec.referenceLoc);
  if (r.result != smt::Result::Unsat)
    result.failures.push_back(
        undecided("could not decide that the spec keeps to " + g.path + "'s captured guard `" + g.assumption +
                  "` (" + r.reason + ")"));
  return llvm::Error::success();
}

// A graph captured at symbolic sizes holds only from its sizeMins on (torch
// specializes 0 and 1): a spec admitting a smaller size would claim what no
// graph says. An input error naming the size, or UNKNOWN when undecided.
llvm::Error InputBinding::checkCapturedSizes() {
  auto check = [&](const ir::Graph &g, int id, const ir::Shape &shape) -> llvm::Error {
    const ir::Value &v = g.values[id];
    if (!v.declared)
      return llvm::Error::success();
    for (size_t a = 0; a < v.declared->dims.size() && a < shape.dims.size(); ++a) {
      auto vars = v.declared->dims[a].vars();
      if (vars.size() != 1)
        continue;
      auto m = g.sizeMins.find(*vars.begin());
      if (m == g.sizeMins.end())
        continue;
      Expr below = shape.dims[a] < Expr::intConst(m->second);
      smt::CheckResult r = solver.check("spec.captured_sizes", below);
      std::string what = "'" + m->first + "' (" + g.path + ", input '" + v.name + "' axis " + std::to_string(a) + ")";
      if (r.result == smt::Result::Sat)
        return userError("the spec admits " + what + " below " + std::to_string(m->second) +
                             ", but the graph was captured for sizes >= " + std::to_string(m->second) +
                             " only (torch.export specializes sizes 0 and 1): raise the symbol's min to " +
                             std::to_string(m->second) + " (for a rank's share, through the constraints)",
                         spec.referenceLoc);
      if (r.result != smt::Result::Unsat)
        result.failures.push_back(undecided("could not decide that the spec keeps " + what + " at or above " +
                                            std::to_string(m->second) + " (" + r.reason + ")"));
    }
    return llvm::Error::success();
  };
  for (int id : ref.inputs)
    if (ref.values[id].declared)
      if (auto e = check(ref, id, *ref.values[id].declared))
        return e;
  for (int r = 0; r < worldSize(); ++r)
    for (int id : ranks[r].inputs)
      if (auto d = rankShapeOf(r, id))
        if (auto e = check(ranks[r], id, *d))
          return e;
  return llvm::Error::success();
}



// `*` matches any run of characters (a layer number, a module path).
static bool globMatch(const char *p, const char *s) {
  if (*p == '\0')
    return *s == '\0';
  if (*p == '*')
    return globMatch(p + 1, s) || (*s && globMatch(p, s + 1));
  return *s && *p == *s && globMatch(p + 1, s + 1);
}

// Spec input names with `*` stand for every reference input or initializer
// they match (`blocks.*.attn.q_proj.weight`), so a stack of identical layers
// needs one line per weight, not one per layer. A name given exactly wins over
// a pattern; a pattern that matches nothing, or two patterns claiming the same
// tensor, is an input error.
llvm::Expected<std::vector<std::pair<std::string, spec::Placement>>>
InputBinding::expandPatterns(const std::vector<std::string> &sources) const {
  std::vector<std::pair<std::string, spec::Placement>> out;
  std::set<std::string> exact;
  for (auto &[name, pl] : spec.inputs)
    if (name.find('*') == std::string::npos) {
      exact.insert(name);
      out.push_back({name, pl});
    }
  std::map<std::string, std::string> claimedBy;
  for (auto &[pattern, pl] : spec.inputs) {
    if (pattern.find('*') == std::string::npos)
      continue;
    if (!pl.as.empty())
      return userError("spec input pattern '" + pattern + "' cannot be combined with 'as'", pl.loc);
    unsigned hits = 0;
    for (auto &src : sources) {
      if (!globMatch(pattern.c_str(), src.c_str()) || exact.count(src))
        continue;
      ++hits;
      if (auto [it, fresh] = claimedBy.emplace(src, pattern); !fresh)
        return userError("reference input '" + src + "' matches both '" + it->second + "' and '" + pattern +
                             "'; name it exactly to choose",
                         pl.loc);
      out.push_back({src, pl});
    }
    if (hits == 0)
      return userError("spec input pattern '" + pattern + "' matches no input or initializer of the reference model " +
                           ref.path,
                       pl.loc);
  }
  return out;
}

llvm::Error InputBinding::bindRelationLeaves(const spec::RelExpr &e) {
  if (e.kind == spec::RelExpr::Kind::Call) {
    for (auto &a : e.args)
      if (auto err = bindRelationLeaves(a))
        return err;
    return llvm::Error::success();
  }
  if (e.rank < 0 || e.rank >= worldSize())
    return llvm::Error::success(); // compileRelation names the error
  auto id = ranks[e.rank].find(e.name);
  if (!id || !ranks[e.rank].isSource(*id) || rankValues[e.rank][*id].term)
    return llvm::Error::success(); // unknown names too: compileRelation
  auto s = rankShapeOf(e.rank, *id);
  if (!s)
    return userError("rank " + std::to_string(e.rank) + ": input '" + e.name + "' has no declared shape", e.loc);
  ClassInfo ci;
  ci.kind = ClassInfo::Leaf;
  ci.label = rankLabel(e.name, e.rank);
  ci.shape = *s;
  ci.rank = e.rank;
  ClassId c = classes.add(ci);
  ValueInfo &v = rankValues[e.rank][*id];
  v.term = mkRead(c, indexVars("i", static_cast<unsigned>(s->rank())));
  v.shape = s;
  v.dtype = ranks[e.rank].values[*id].dtype;
  return llvm::Error::success();
}

std::vector<std::string> InputBinding::referenceSources() const {
  std::vector<std::string> out;
  for (int id : ref.inputs)
    out.push_back(ref.values[id].name);
  for (int id : ref.initializers)
    out.push_back(ref.values[id].name);
  return out;
}

llvm::Error InputBinding::bindInputs() {
  int P = worldSize();
  rankValues.assign(P, {});
  for (int r = 0; r < P; ++r)
    rankValues[r].resize(ranks[r].values.size());
  refValues.resize(ref.values.size());
  std::set<std::string> bound;
  auto expanded = expandPatterns(referenceSources());
  if (!expanded)
    return expanded.takeError();
  for (auto &[name, pl] : *expanded) {
    if (!ref.find(name) && pl.valueBinding) {
      // A size passed as data to the ranks only (seq_len, lengths).
      if (auto e = bindRankOnlyValue(name, pl))
        return e;
      continue;
    }
    auto placed = locate(name, pl);
    if (!placed)
      return placed.takeError();
    bound.insert(name);
    if (auto e = bindPlaced(*placed))
      return e;
  }
  if (auto e = bindUnplacedReferenceSources(bound))
    return e;
  return bindUnplacedRankSources();
}

// The reference input and, unless a relation names its own rank tensors, each
// rank's input of the placement's name, with their declared shapes.
llvm::Expected<InputBinding::Placed> InputBinding::locate(const std::string &name, const spec::Placement &pl) {
  int P = worldSize();
  auto refId = ref.find(name);
  if (!refId || !ref.isSource(*refId))
    return userError("spec input '" + name + "' is not an input or initializer of the reference model " + ref.path +
                         didYouMean(name, referenceSources()),
                     pl.loc);
  auto refShape = declaredShape(ref, *refId);
  if (!refShape)
    return userError("reference input '" + name + "' has no declared shape", pl.loc);
  Placed in{name, pl, *refId, *refShape, std::vector<int>(P), std::vector<Shape>(P)};
  // A relation names its rank tensors itself (x1 = slice(x@0, ...)).
  if (pl.kind == spec::Placement::Kind::Relation)
    return in;
  for (int r = 0; r < P; ++r) {
    std::string rn = spec::Spec::rankName(name, pl, r);
    auto id = ranks[r].find(rn);
    if (!id || !ranks[r].isSource(*id))
      return userError("rank " + std::to_string(r) + " (" + ranks[r].path + ") has no input or initializer '" + rn +
                           "' for spec input '" + name + "'" + didYouMean(rn, ranks[r].valueNames()),
                       pl.loc);
    auto s = rankShapeOf(r, *id);
    if (!s)
      return userError("rank " + std::to_string(r) + ": input '" + rn + "' has no declared shape", pl.loc);
    in.rankIds[r] = *id;
    in.rankShapes[r] = *s;
    rankValues[r][*id].shape = s;
    rankValues[r][*id].dtype = ranks[r].values[*id].dtype;
  }
  return in;
}

llvm::Error InputBinding::sameRankAs(const Placed &in, int r) const {
  const Shape &s = in.rankShapes[r];
  if (s.rank() != in.refShape.rank())
    return userError("rank " + std::to_string(r) + ": '" + in.name + "' has rank " + std::to_string(s.rank()) +
                         " but the reference's has rank " + std::to_string(in.refShape.rank()),
                     in.pl.loc);
  return llvm::Error::success();
}

llvm::Error InputBinding::bindPlaced(const Placed &in) {
  ValueInfo &rv = refValues[in.refId];
  rv.shape = in.refShape;
  rv.dtype = ref.values[in.refId].dtype;
  using K = spec::Placement::Kind;
  switch (in.pl.kind) {
  case K::Replicated:
    return bindReplicated(in);
  case K::Partial:
  case K::Shard:
    return bindSplit(in);
  case K::Relation:
    return bindRelation(in);
  }
  return llvm::Error::success();
}

// One leaf every rank reads; each rank's shape must be the reference's.
llvm::Error InputBinding::bindReplicated(const Placed &in) {
  const std::string &name = in.name;
  const spec::Placement &pl = in.pl;
  const Shape &refShape = in.refShape;
  ValueInfo &rv = refValues[in.refId];
  if (auto e = checkElementCount(name, refShape, pl))
    return e;
  rv.term = boundLeaf(name, refShape, pl);
  if (pl.valueBinding) {
    if (isFloating(rv.dtype))
      return userError("spec input '" + name + "': '" + std::string(pl.exactValue ? "value" : "each") +
                           "' binds an integer tensor, but '" + name + "' has a floating type",
                       pl.loc);
    rv.value = exactValues(refShape, pl);
  }
  for (int r = 0; r < worldSize(); ++r) {
    ValueInfo &v = rankValues[r][in.rankIds[r]];
    v.value = rv.value;
    if (auto e = sameRankAs(in, r))
      return e;
    for (size_t d = 0; d < refShape.rank(); ++d)
      obligations.push_back({{"rank " + std::to_string(r) + "'s '" + name + "' has the reference's dim " +
                                  std::to_string(d) + " (replicated)",
                              in.rankShapes[r].dims[d] == refShape.dims[d]},
                             r, "", ""});
    v.term = rv.term;
  }
  return llvm::Error::success();
}

// A leaf per rank: the reference is their sum (partial) or their
// concatenation along the shard axis, each shard sized by the split policy.
llvm::Error InputBinding::bindSplit(const Placed &in) {
  const std::string &name = in.name;
  const spec::Placement &pl = in.pl;
  const Shape &refShape = in.refShape;
  const int P = worldSize();
  const bool shard = pl.kind == spec::Placement::Kind::Shard;
  int64_t axis = pl.axis;
  if (shard) {
    auto a = normAxis(Node{}, axis, refShape.rank());
    if (!a)
      return userError("spec input '" + name + "': shard axis " + std::to_string(pl.axis) +
                           " out of range for rank " + std::to_string(refShape.rank()),
                       pl.loc);
    axis = *a;
  }
  IndexVec iv = indexVars("i", static_cast<unsigned>(refShape.rank()));
  Expr off = Expr::intConst(0);
  for (int r = 0; r < P; ++r) {
    if (auto e = sameRankAs(in, r))
      return e;
    const Shape &rs = in.rankShapes[r];
    ClassInfo ci;
    ci.kind = ClassInfo::Leaf;
    ci.label = rankLabel(name, r);
    ci.shape = rs;
    ci.rank = r;
    ClassId c = classes.add(ci);
    boundValues(c, pl);
    rankValues[r][in.rankIds[r]].term = mkRead(c, iv);
    for (size_t d = 0; d < refShape.rank(); ++d) {
      if (shard && static_cast<int64_t>(d) == axis)
        continue;
      obligations.push_back({{"rank " + std::to_string(r) + "'s '" + name + "' matches the reference in dim " +
                                  std::to_string(d),
                              rs.dims[d] == refShape.dims[d]},
                             r, "", ""});
    }
    if (shard) {
      std::vector<Obligation> pol;
      if (auto want = policySize(pl, refShape.dims[axis], r, P, pol, name))
        pol.push_back({"rank " + std::to_string(r) + "'s shard of '" + name + "' has the size its split policy "
                                                                            "gives (the policy gives " +
                           want->simplify().str() + " on axis " + std::to_string(axis) + ", the graph has " +
                           rs.dims[axis].str() + ")",
                       rs.dims[axis] == *want});
      for (auto &o : pol)
        obligations.push_back({o, r, "", ""});
      off = (off + rs.dims[axis]).simplify();
    }
  }
  ValueInfo &rv = refValues[in.refId];
  if (!shard) {
    std::vector<Term> parts;
    for (int r = 0; r < P; ++r)
      parts.push_back(rankValues[r][in.rankIds[r]].term);
    rv.term = mkAdd(parts);
    return llvm::Error::success();
  }
  // Under pad_to_multiple the shards hold the padded length; rows past the
  // reference's are pad, which no reference element reads.
  Expr whole = paddedLength(pl, refShape.dims[axis]);
  obligations.push_back({{"the shards of '" + name + "' add up to its reference size along axis " +
                              std::to_string(axis) +
                              (pl.split == spec::Placement::Split::PadToMultiple ? " (padded)" : "") +
                              " (they add up to " + off.simplify().str() + ", the reference has " +
                              whole.simplify().str() + ")",
                          off == whole},
                         -1, "", ""});
  rv.term = concatAlong(
                P, axis, iv, [&](size_t r) { return in.rankShapes[r].dims[axis]; },
                [&](size_t r, const IndexVec &src) {
                  return instantiate(rankValues[r][in.rankIds[r]].term, iv, src, 0);
                })
                .first;
  return llvm::Error::success();
}

// Every rank input the relation names is a leaf, bound once: several reference
// inputs may be parts of one rank tensor (packed sequences: x1 = slice(x@0,
// ...), x2 = slice(x@0, ...)).
llvm::Error InputBinding::bindRelation(const Placed &in) {
  if (auto e = bindRelationLeaves(*in.pl.relation))
    return e;
  RankSides sides(ref, refValues, ranks, rankValues, obligations);
  auto rel = sides.compileRelation(*in.pl.relation);
  if (!rel)
    return rel.takeError();
  refValues[in.refId].term = rel->first;
  for (size_t d = 0; d < in.refShape.rank() && d < rel->second.rank(); ++d)
    obligations.push_back({{"relation of '" + in.name + "' has the reference's dim " + std::to_string(d),
                            rel->second.dims[d] == in.refShape.dims[d]},
                           -1, "", ""});
  return llvm::Error::success();
}

// Every reference graph input must be placed; initializers not in the spec are
// constants (shared with the ranks by content).
llvm::Error InputBinding::bindUnplacedReferenceSources(const std::set<std::string> &bound) {
  for (int id : ref.inputs)
    if (!bound.count(ref.values[id].name))
      return userError("reference input '" + ref.values[id].name + "' has no placement in the spec's inputs:",
                       spec.referenceLoc);
  for (int id : ref.initializers)
    if (!bound.count(ref.values[id].name))
      refValues[id] = constantValue(classes, ref.values[id].name, ref.values[id].init);
  return llvm::Error::success();
}

// Rank sources the spec does not bind: constants, or free per-rank inputs.
llvm::Error InputBinding::bindUnplacedRankSources() {
  for (int r = 0; r < worldSize(); ++r) {
    const Graph &g = ranks[r];
    for (int id : g.initializers)
      if (!rankValues[r][id].term)
        rankValues[r][id] = constantValue(classes, g.values[id].name, g.values[id].init);
    for (int id : g.inputs) {
      if (rankValues[r][id].term)
        continue;
      auto s = rankShapeOf(r, id);
      if (!s)
        return userError("rank " + std::to_string(r) + ": input '" + g.values[id].name + "' has no declared shape",
                         spec.ranksLoc);
      ClassInfo ci;
      ci.kind = ClassInfo::Leaf;
      ci.label = rankLabel(g.values[id].name, r);
      ci.shape = *s;
      ci.rank = r;
      ClassId c = classes.add(ci);
      rankValues[r][id].term = mkRead(c, indexVars("i", static_cast<unsigned>(s->rank())));
      rankValues[r][id].shape = s;
      rankValues[r][id].dtype = g.values[id].dtype;
      result.notes.push_back("rank " + std::to_string(r) + " input '" + g.values[id].name +
                             "' is not in the spec: treated as an arbitrary tensor");
    }
  }
  return llvm::Error::success();
}

} // namespace shardproof::relation
