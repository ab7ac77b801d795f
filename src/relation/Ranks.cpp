// The rank graphs, walked in lock-step so that each collective sees the
// matching call on every rank; computed tensors become hash-consed classes.
#include "MemoKeys.h"
#include "RankWorld.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/StringExtras.h>

#include <algorithm>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

static bool isCollective(const Node &n) {
  const OpDef *d = opOf(n);
  return d && d->cls == OpClass::Collective;
}

// The tensor's own read of its class, with 0 on every axis its definition
// ignores (a quotient of an expanded tensor is the same along the expansion):
// the reference, matched to it at one index of that axis, and the rank's next
// node then read the same element instead of two the prover cannot tell
// equal. Sound because a read on a nonempty axis may take any index of it.
static IndexVec broadcastReadIndex(const Term &def, IndexVec iv) {
  for (unsigned d = 0; d < iv.size(); ++d)
    if (!mentionsVar(def, "u!" + std::to_string(d)))
      iv[d] = Expr::intConst(0);
  return iv;
}

// Turns the element term of a computed rank tensor into a class read.
// `evenIfPure`: a reduction's output is a class even when its term only
// selects elements (an all-reduce of masked lookups, whose masks leave one
// rank's row per token: a select on the token id; reduce-scattered under
// sequence parallelism, each rank's chunk of it), so the reference's lookup
// can be matched to it and the layers after it start from one class.
static void internValue(RankWorld &S, int r, const Node &n, int out, bool evenIfPure = false) {
  ValueInfo &v = S.rankValues[r][out];
  if (!v.term || (isPure(v.term) && !(evenIfPure && v.term->kind == TermKind::Select)))
    return; // views stay as index remaps of their inputs
  IndexVec iv = indexVars("i", static_cast<unsigned>(v.shape->rank()));
  IndexVec uv = indexVars("u", static_cast<unsigned>(v.shape->rank()));
  // Every layer renames the same index expressions: remember Z3's answers.
  Term def = mapExprs(v.term, [&](const Expr &e) {
    auto [it, fresh] = S.iToU.try_emplace(e.id());
    if (fresh || !it->second.first.same(e))
      it->second = {e, e.substitute({iv.begin(), iv.end()}, {uv.begin(), uv.end()})};
    return it->second.second;
  });
  // Most values are a class already (the same computation on every rank):
  // its names are built only for a new one.
  std::optional<ClassId> known = S.classes.find(def, *v.shape);
  ClassId c;
  if (known) {
    c = *known;
  } else {
    ClassInfo ci;
    ci.kind = ClassInfo::Compute;
    ci.def = std::move(def);
    ci.shape = *v.shape;
    ci.rank = r;
    ci.node = n.name;
    ci.label = rankLabel(S.ranks[r].values[out].name, r);
    c = S.classes.addNew(std::move(ci));
  }
  S.classes[c].join(r, out);
  if (S.layers)
    S.layers->noteMember(c, r, out);
  v.term = mkRead(c, broadcastReadIndex(S.classes[c].def, iv));
}

// What a collective node may carry, checked before anything reads it: one
// input and one output, the attributes its row reads and no others, a known
// reduction, axes inside the input's rank. Anything else is a graph
// shardproof cannot read the way the runtime would: bad input, never a guess.
// The group a collective runs over: every rank in rank order, or UNKNOWN
// naming the group. A sub-group read as the world would be a wrong graph.
static llvm::Error checkGroup(const Node &n, const std::string &where, int worldSize) {
  std::vector<int64_t> all(worldSize);
  for (int r = 0; r < worldSize; ++r)
    all[r] = r;
  if (const Attribute *g = n.attr("group_size"); g && (g->kind != Attribute::Kind::Int || g->i != worldSize))
    return unsupportedError(where + " runs over a group of " +
                            (g->kind == Attribute::Kind::Int ? std::to_string(g->i) : std::string("?")) + " of the " +
                            std::to_string(worldSize) + " ranks (sub-groups are not supported yet)");
  if (const Attribute *g = n.attr("group_ranks"); g && (g->kind != Attribute::Kind::Ints || g->ints != all)) {
    std::string ranks;
    for (int64_t r : g->ints)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return unsupportedError(where + " runs over the group of ranks [" + ranks + "] of the " +
                            std::to_string(worldSize) + " ranks (only the group of every rank in rank order is " +
                            "supported yet)");
  }
  return llvm::Error::success();
}

static llvm::Error checkCollectiveNode(const Node &n, const CollectiveDef &c, int rank, size_t inputRank,
                                       int worldSize) {
  std::string where = "rank " + std::to_string(rank) + ": collective " + describe(n);
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return userError(where + " has " + std::to_string(n.inputs.size()) + " inputs and " +
                     std::to_string(n.outputs.size()) + " outputs; a collective takes one tensor and gives one");
  std::vector<std::string> allowed{"group_size", "group_ranks"};
  if (c.readsOp)
    allowed.push_back("op");
  allowed.insert(allowed.end(), c.axes.begin(), c.axes.end());
  for (auto &[name, a] : n.attrs)
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
      return userError(where + " has attribute '" + name + "', which shardproof does not read (it reads: " +
                       llvm::join(allowed, ", ") + ")");
  if (auto e = checkGroup(n, where, worldSize))
    return e;
  if (const Attribute *op = n.attr("op")) {
    if (op->kind != Attribute::Kind::String || (op->s != "sum" && op->s != "max" && op->s != "min"))
      return userError(where + ": reduction op '" + (op->kind == Attribute::Kind::String ? op->s : "?") +
                       "' is not one of sum, max, min");
  }
  for (const char *axisName : c.axes)
    if (const Attribute *a = n.attr(axisName)) {
      int64_t r = static_cast<int64_t>(inputRank);
      if (a->kind != Attribute::Kind::Int || a->i < -r || a->i >= r)
        return userError(where + ": " + axisName + " " +
                         (a->kind == Attribute::Kind::Int ? std::to_string(a->i) : std::string("(not an integer)")) +
                         " is out of range for an input of rank " + std::to_string(r));
    }
  return llvm::Error::success();
}

// The k-th collective call of every rank, resolved together from its op-table
// row: each rank's output shape and element term in terms of every rank's input.
static llvm::Error buildCollective(RankWorld &S, const std::vector<const Node *> &calls) {
  int P = S.worldSize();
  const Node &n0 = *calls[0];
  std::string kind = collectiveCall(n0);
  for (int r = 1; r < P; ++r)
    if (collectiveCall(*calls[r]) != kind)
      return userError("collectives differ across ranks: rank 0 calls " + kind + " at " + describe(n0) +
                       " but rank " + std::to_string(r) + " calls " + collectiveCall(*calls[r]) + " at " +
                       describe(*calls[r]) + " (the ranks would deadlock)");
  const OpDef *def = opOf(n0);
  const CollectiveDef *coll = def ? def->collective : nullptr;
  // Shapes (per rank) via the op table, and each rank's input term.
  std::vector<Term> ins(P);
  std::vector<Shape> shapes(P);
  for (int r = 0; r < P; ++r) {
    const Node &n = *calls[r];
    if (auto e = S.nodes.eval(S.ranks[r], n, S.rankValues[r], r, S.obligations))
      return e;
    if (n.inputs.empty() || n.inputs[0] < 0)
      return userError("rank " + std::to_string(r) + ": collective " + describe(n) + " has no input");
    const ValueInfo &v = S.rankValues[r][n.inputs[0]];
    if (v.shape && coll)
      if (auto e = checkCollectiveNode(n, *coll, r, v.shape->rank(), S.worldSize()))
        return e;
    if (!v.term || !v.shape) {
      for (int o : n.outputs)
        S.rankValues[r][o].unsupported = v.unsupported.empty() ? "input of " + describe(n) + " unknown" : v.unsupported;
      return llvm::Error::success();
    }
    ins[r] = v.term;
    shapes[r] = *v.shape;
  }
  const Shape &s0 = shapes[0];
  for (int r = 1; r < P; ++r) {
    if (shapes[r].rank() != s0.rank())
      return userError("collective " + describe(n0) + ": ranks pass tensors of different rank");
  }
  if (!coll) {
    for (int r = 0; r < P; ++r)
      for (int o : calls[r]->outputs)
        S.rankValues[r][o].unsupported = "unsupported collective " + describe(*calls[r]);
    return llvm::Error::success();
  }
  std::vector<RankObligation> obligations;
  if (coll->obligations)
    coll->obligations(n0, shapes, obligations);
  for (RankObligation &o : obligations)
    S.obligations.push_back({std::move(o.obligation), o.rank, calls[o.rank]->name, calls[o.rank]->modulePath()});
  std::vector<Shape> outShapes;
  for (int r = 0; r < P; ++r)
    outShapes.push_back(coll->shape(n0, shapes, r));
  // The same call one layer up read renamed classes: its outputs' terms,
  // renamed (NodeMemo.h); 900 calls a rank at 126 layers.
  std::vector<Term> outs(P);
  std::optional<MemoKey> key;
  bool reused = false;
  if (S.core.opts.memo && S.prover.pathDepth() == 0) {
    key = collectiveKey(n0, shapes, ins, S.classes);
    if (auto hit = S.core.memo.lookup(*key, S.classes)) {
      for (int r = 0; r < P; ++r)
        outs[r] = hit->second.apply(hit->first->terms[r]);
      reused = true;
    }
  }
  if (!reused) {
    MemoRecording rec(S.core, std::move(key));
    IndexVec iv = indexVars("i", static_cast<unsigned>(s0.rank()));
    RankReadFn readRank = [&](int q, const IndexVec &idx) { return instantiate(ins[q], iv, idx, 0); };
    for (int r = 0; r < P; ++r) {
      Term t = coll->element(n0, shapes, r, iv, readRank);
      Prover::Scope sc(S.prover, CheckCore::bounds(outShapes[r]));
      outs[r] = S.prover.normalize(t, 0);
    }
    rec.store({outs, 0, ""});
  }
  for (int r = 0; r < P; ++r) {
    int out = calls[r]->outputs[0];
    S.rankValues[r][out].term = outs[r];
    S.rankValues[r][out].shape = outShapes[r];
    if (coll->reduces)
      internValue(S, r, *calls[r], out, /*evenIfPure=*/true);
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<PendingObligation>> RankWorld::build() {
  int P = worldSize();
  copier_ = std::make_unique<LayerCopy>(core, nodes, rankValues, obligations);
  LayerCopy &copier = *copier_;
  layers = &copier;
  auto detach = llvm::make_scope_exit([&] { layers = nullptr; });
  std::vector<size_t> at(P, 0);
  while (true) {
    for (int r = 0; r < P; ++r) {
      const Graph &g = ranks[r];
      const size_t stop = copier.stopAt(r);
      while (at[r] < g.nodes.size() && at[r] != stop && !isCollective(g.nodes[at[r]])) {
        const Node &n = g.nodes[at[r]];
        if (auto e = nodes.eval(g, n, rankValues[r], r, obligations))
          return std::move(e);
        for (int o : n.outputs)
          internValue(*this, r, n, o);
        ++core.result.stats.rankNodes;
        ++at[r];
        if (core.opts.progress && (core.result.stats.rankNodes & 255) == 0) {
          size_t total = 0;
          for (auto &rg : ranks)
            total += rg.nodes.size();
          core.opts.progress("world", core.result.stats.rankNodes, total);
        }
      }
    }
    // Layer boundaries: every rank waits at the next layer's first node, so
    // a layer is evaluated (or copied) as a whole on all ranks.
    if (copier.active()) {
      int waiting = 0;
      for (int r = 0; r < P; ++r)
        waiting += at[r] == copier.stopAt(r);
      if (waiting == P) {
        at = copier.atBoundary();
        continue;
      }
      if (waiting > 0) {
        copier.abandon(); // some rank's collectives fall across the boundary
        continue;
      }
    }
    int done = 0;
    for (int r = 0; r < P; ++r)
      done += at[r] == ranks[r].nodes.size();
    if (done == P)
      break;
    if (done > 0) {
      int waiting = 0, finished = 0;
      for (int r = 0; r < P; ++r)
        (at[r] == ranks[r].nodes.size() ? finished : waiting) = r;
      return userError("rank " + std::to_string(waiting) + " calls collective " +
                       describe(ranks[waiting].nodes[at[waiting]]) + " but rank " + std::to_string(finished) +
                       " makes no further collective call (the ranks would deadlock)");
    }
    std::vector<const Node *> calls;
    for (int r = 0; r < P; ++r)
      calls.push_back(&ranks[r].nodes[at[r]]);
    if (auto e = buildCollective(*this, calls))
      return std::move(e);
    for (int r = 0; r < P; ++r) {
      ++core.result.stats.rankNodes;
      ++at[r];
    }
  }
  core.result.stats.classes = static_cast<unsigned>(classes.size());
  core.result.stats.layersCopied = copier.copied();
  layerMaps = copier.takeMaps();
  return std::move(obligations);
}

} // namespace shardproof::relation
