// One node through the op table: its inputs gathered, shapes and side
// conditions inferred, element maps built and normalized; reused from the
// same node one layer up when NodeMemo has it (NodeMemo.h).
#include "Session.h"

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

// A side condition's text names its node ("inner dims of '/l.0/fc/MatMul'
// (MatMul) agree"); reused for another node, it names that one.
static std::string retarget(const std::string &what, const std::string &was, const std::string &now) {
  std::string out;
  size_t at = 0;
  for (size_t hit; !was.empty() && (hit = what.find(was, at)) != std::string::npos; at = hit + was.size())
    out += what.substr(at, hit - at) + now;
  return out + what.substr(at);
}

llvm::Error Session::evalNode(const Graph &g, const Node &n, std::vector<ValueInfo> &values, int rank) {
  auto markUnsupported = [&](const std::string &why) {
    for (int o : n.outputs)
      values[o].unsupported = why;
  };
  // Where reasoning stops on a rank: reported once per node, as the reason for UNKNOWN.
  auto originUnsupported = [&](const std::string &why) {
    markUnsupported(why);
    if (rank < 0 || !reportedRankNodes.insert(n.name).second)
      return;
    // No reference node: the message names the rank node.
    result.failures.push_back({Failure::Unsupported, "rank " + std::to_string(rank) + " node " + describe(n) + ": " + why,
                               "", n.opType, n.modulePath(), n.outputs.empty() ? "" : g.values[n.outputs[0]].name,
                               {}, std::nullopt});
  };
  const OpDef *def = lookupOp(n.domain, n.opType);
  if (!def) {
    originUnsupported("unsupported operator " + (n.domain.empty() ? n.opType : n.domain + "::" + n.opType));
    return llvm::Error::success();
  }
  std::string why;
  auto gathered = gatherInputs(g, n, values, why);
  if (!gathered) {
    markUnsupported(why);
    return llvm::Error::success();
  }
  OpInputs &in = *gathered;
  auto apply = [&](const OpResult &r) {
    for (size_t s = 0; s < n.outputs.size() && s < r.shapes.size(); ++s) {
      ValueInfo &out = values[n.outputs[s]];
      out.shape = r.shapes[s];
      out.dtype = s < r.dtypes.size() ? r.dtypes[s] : DType::Other;
      if (s < r.values.size())
        out.value = r.values[s];
    }
  };
  // The same node one layer up read renamed classes: reuse what it derived
  // (shapes, side conditions, element maps). Constants make classes.
  const bool isConstant = n.opType == "Constant" && n.domain.empty();
  std::optional<MemoKey> key;
  if (opts.memo && prover.pathDepth() == 0 && !isConstant) {
    key = nodeKey(n, values, in);
    if (auto hit = memo.lookup(*key, classes)) {
      const NodeMemo::Result &m = *hit->first;
      const std::string was = m.node, now = describe(n);
      for (const Obligation &o : m.op->obligations)
        obligations.push_back({{retarget(o.what, was, now), o.cond}, rank, n.name, n.modulePath()});
      apply(*m.op);
      if (m.elements)
        for (size_t s = 0; s < m.terms.size(); ++s)
          values[n.outputs[s]].term = hit->second.apply(m.terms[s]);
      return llvm::Error::success();
    }
  }
  const unsigned unknownBefore = unknownQueries();
  std::optional<ClassTable::Recording> rec;
  if (key)
    rec.emplace(classes);
  // Keeps what this node derived for the next layer; `elements` false: the
  // node has no element maps (shape data, collectives).
  auto remember = [&](const OpResult &r, bool elements, std::vector<Term> terms) {
    if (!key || !rec->reusable() || unknownQueries() != unknownBefore)
      return;
    for (auto &t : terms)
      if (!t)
        return; // an output without an element map: its reason names this node
    NodeMemo::Result m;
    m.op = r;
    m.node = describe(n);
    m.elements = elements;
    m.terms = std::move(terms);
    memo.store(std::move(*key), rec->consulted(), std::move(m));
  };
  auto res = def->infer(in);
  if (!res) {
    auto taken = takeError(res.takeError());
    if (taken.kind == ErrorKind::Unsupported) {
      originUnsupported(taken.text);
      return llvm::Error::success();
    }
    if (rank < 0)
      return userError("reference model " + g.path + ": " + taken.message, taken.loc);
    // A rank graph that cannot run at any admissible size is a broken
    // implementation (a collective on the wrong axis makes the next MatMul
    // mismatch): an obligation that always fails, so REFUTED with sizes.
    obligations.push_back({{taken.text, Expr::boolConst(false)}, rank, n.name, n.modulePath()});
    markUnsupported("rank " + std::to_string(rank) + " node " + describe(n) + " cannot run: " + taken.text);
    return llvm::Error::success();
  }
  for (auto &o : res->obligations)
    obligations.push_back({o, rank, n.name, n.modulePath()});
  // Shape arithmetic the op itself does not fold: follow the integer values.
  if (res->values.empty() || !res->values[0])
    if (auto v = foldIntValues(in, *res, 0)) {
      res->values.resize(std::max<size_t>(res->values.size(), 1));
      res->values[0] = v;
    }
  apply(*res);
  if (def->cls == OpClass::ShapeOnly || def->cls == OpClass::Collective) {
    remember(*res, false, {});
    return llvm::Error::success();
  }
  if (isConstant) {
    const Attribute *a = n.attr("value");
    if (a && a->tensor) {
      ValueInfo cv = constantValue(n.name.empty() ? g.values[n.outputs[0]].name : n.name, a->tensor);
      values[n.outputs[0]].term = cv.term;
      values[n.outputs[0]].data = a->tensor;
    }
    return llvm::Error::success();
  }
  ReadFn read = [&](unsigned input, const IndexVec &idx, int level) -> Term {
    const ValueInfo &v = values[n.inputs[input]];
    if (!v.term && v.value)
      return shapeValueTerm(*v.value, idx, level);
    if (!v.term)
      return nullptr;
    return exposeMask(instantiate(v.term, indexVars("i", static_cast<unsigned>(v.shape->rank())), idx, level));
  };
  // Shape arithmetic (Gather/Unsqueeze/Concat on Shape outputs): the values
  // are known symbolically, no element map is needed.
  bool shapeData = true;
  for (size_t s = 0; s < n.outputs.size(); ++s)
    shapeData &= s < res->values.size() && res->values[s].has_value();
  for (int id : n.inputs)
    if (shapeData && id >= 0 && !values[id].term) {
      remember(*res, false, {});
      return llvm::Error::success();
    }
  const size_t nout = std::min(n.outputs.size(), res->shapes.size());
  for (size_t s = 0; s < nout; ++s) {
    const Shape &os = res->shapes[s];
    IndexVec iv = indexVars("i", static_cast<unsigned>(os.rank()));
    Term t;
    {
      // A read of a tensor without an element map poisons the result.
      bool missing = false;
      std::string missingName;
      ReadFn guarded = [&](unsigned input, const IndexVec &idx, int level) -> Term {
        Term x = read(input, idx, level);
        if (!x) {
          missing = true;
          missingName = g.values[n.inputs[input]].name;
          return mkConst(0);
        }
        return x;
      };
      t = def->element(in, *res, static_cast<unsigned>(s), iv, guarded, 0);
      if (missing || !t) {
        values[n.outputs[s]].unsupported =
            missing ? describe(n) + " reads elements of '" + missingName + "', which is only known as shape data"
                    : "no element map for output " + std::to_string(s) + " of " + describe(n);
        continue;
      }
    }
    Prover::Scope sc(prover, bounds(os));
    // A huge term only arises below a node no rank computes; normalizing it
    // (case splits multiply) serves matching that will not succeed. It stays
    // exact either way.
    values[n.outputs[s]].term = termSize(t) <= opts.maxTermNodes ? prover.normalize(t, 0) : t;
  }
  std::vector<Term> terms;
  for (size_t s = 0; s < nout; ++s)
    terms.push_back(values[n.outputs[s]].term);
  remember(*res, true, std::move(terms));
  return llvm::Error::success();
}

} // namespace shardproof::relation
