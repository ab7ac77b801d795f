// Split policies, and the rank-only dims they define.
//
// A rank graph names the length of its shard with a dim of its own
// (`seq_local`), and under `chunk` or `tensor_split` that length differs from
// rank to rank. A dim that only the rank graphs use and the spec does not
// declare is therefore not a global symbol: on rank r it *is* the size the
// spec's placement gives that rank (its shard of the axis, or the reference's
// dim elsewhere), substituted wherever rank r's shapes mention it.
#include "Bind.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

Expr paddedLength(const spec::Placement &p, const Expr &n) {
  if (p.split == spec::Placement::Split::PadToMultiple && p.padMultiple)
    return ceilDiv(n, *p.padMultiple) * *p.padMultiple;
  return n;
}

std::optional<Expr> policySize(const spec::Placement &p, const Expr &n, int r, int world,
                               std::vector<ir::Obligation> &obl, const std::string &tensor) {
  Expr P = Expr::intConst(world);
  std::string axis = "axis " + std::to_string(p.axis) + " of '" + tensor + "'";
  using S = spec::Placement::Split;
  switch (p.split) {
  case S::Even:
    obl.push_back({axis + " divides evenly by world_size " + std::to_string(world) + " (split: even)",
                   mod(n, P) == Expr::intConst(0)});
    return floorDiv(n, P);
  case S::Chunk: {
    Expr c = ceilDiv(n, P);
    return max(Expr::intConst(0), min(c, n - c * r));
  }
  case S::TensorSplit:
    return floorDiv(n, P) + ite(Expr::intConst(r) < mod(n, P), Expr::intConst(1), Expr::intConst(0));
  case S::Sizes:
    if (r < static_cast<int>(p.sizes.size()))
      return p.sizes[r];
    return std::nullopt;
  case S::PadToMultiple: {
    Expr m = paddedLength(p, n);
    obl.push_back({axis + " padded to a multiple of " + p.padMultiple->str() + " divides evenly by world_size " +
                       std::to_string(world) + " (split: pad_to_multiple)",
                   mod(m, P) == Expr::intConst(0)});
    return floorDiv(m, P);
  }
  case S::Unspecified:
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Shape> declaredShape(const Graph &g, int id) {
  const Value &v = g.values[id];
  if (v.declared)
    return v.declared;
  if (v.init) {
    Shape s;
    for (auto d : v.init->dims)
      s.dims.push_back(Expr::intConst(d));
    return s;
  }
  return std::nullopt;
}

std::optional<Shape> InputBinding::rankShapeOf(int r, int id) const {
  auto s = declaredShape(ranks[r], id);
  if (!s || r >= static_cast<int>(rankDims.size()) || rankDims[r].empty())
    return s;
  std::vector<Expr> from, to;
  for (auto &[name, e] : rankDims[r]) {
    from.push_back(Expr::intVar(name));
    to.push_back(e);
  }
  for (auto &d : s->dims)
    d = d.substitute(from, to).simplify();
  return s;
}

llvm::Error InputBinding::bindRankSymbols() {
  int P = worldSize();
  rankDims.assign(P, {});
  std::set<std::string> global;
  for (auto &s : spec.symbols)
    global.insert(s.name);
  for (int id : ref.inputs)
    if (auto &d = ref.values[id].declared)
      for (auto &dim : d->dims)
        for (auto &n : dim.vars())
          global.insert(n);

  std::set<std::string> notedDims;
  std::vector<std::string> sources;
  for (int id : ref.inputs)
    sources.push_back(ref.values[id].name);
  for (int id : ref.initializers)
    sources.push_back(ref.values[id].name);
  auto expanded = expandPatterns(sources);
  if (!expanded)
    return expanded.takeError();
  for (auto &[name, pl] : *expanded) {
    using K = spec::Placement::Kind;
    auto refId = ref.find(name);
    if (pl.kind == K::Relation || !refId)
      continue; // bindInputs reports what is wrong
    auto refShape = declaredShape(ref, *refId);
    if (!refShape)
      continue;
    for (int r = 0; r < P; ++r) {
      auto id = ranks[r].find(spec::Spec::rankName(name, pl, r));
      if (!id)
        continue;
      auto s = declaredShape(ranks[r], *id);
      if (!s || s->rank() != refShape->rank())
        continue;
      int64_t axis = pl.axis < 0 ? pl.axis + static_cast<int64_t>(s->rank()) : pl.axis;
      for (size_t d = 0; d < s->rank(); ++d) {
        auto v = s->dims[d].asVar();
        if (!v || global.count(*v) || rankDims[r].count(*v))
          continue;
        std::optional<Expr> want = refShape->dims[d];
        if (static_cast<int64_t>(d) == axis && pl.kind != K::Replicated) {
          std::vector<Obligation> ignored; // bindInputs states them
          want = pl.kind == K::Shard ? policySize(pl, refShape->dims[d], r, P, ignored, name) : want;
        }
        if (!want)
          continue;
        auto used = want->vars();
        if (std::find(used.begin(), used.end(), *v) != used.end())
          continue;
        rankDims[r][*v] = *want;
        std::string how = static_cast<int64_t>(d) == axis && pl.kind == K::Shard
                              ? "each rank's shard of"
                              : "the reference's";
        if (notedDims.insert(*v).second)
          result.notes.push_back("dim '" + *v + "' of the rank graphs is " + how + " axis " + std::to_string(d) +
                                 " of '" + name + "' (from the spec's placement)");
      }
    }
  }
  return llvm::Error::success();
}

} // namespace shardproof::relation
