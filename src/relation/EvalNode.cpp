// One node through the op table: its inputs gathered, shapes and side
// conditions inferred, element maps built and normalized; reused from the
// same node one layer up when NodeMemo has it (NodeMemo.h).
#include "NodeEval.h"

#include "shardproof/ir/ConstantMask.h"

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

llvm::Error NodeEvaluator::eval(const Graph &g, const Node &n, std::vector<ValueInfo> &values, int rank,
                                std::vector<PendingObligation> &raised) {
  const Step s{g, n, values, rank, raised};
  const OpDef *def = opOf(n);
  if (!def) {
    originUnsupported(s, "unsupported operator " + (n.domain.empty() ? n.opType : n.domain + "::" + n.opType));
    return llvm::Error::success();
  }
  std::string why;
  auto gathered = core.ops.gather(g, n, values, why);
  if (!gathered) {
    markUnsupported(s, why);
    return llvm::Error::success();
  }
  OpInputs &in = *gathered;
  // The same node one layer up read renamed classes: reuse what it derived
  // (shapes, side conditions, element maps). Constants make classes.
  const bool isConstant = n.opType == "Constant" && n.domain.empty();
  std::optional<MemoKey> key;
  if (core.opts.memo && core.prover.pathDepth() == 0 && !isConstant) {
    key = nodeKey(n, values, in, core.classes);
    if (reuseFromLayerBelow(s, *key))
      return llvm::Error::success();
  }
  MemoRecording rec(core, std::move(key));
  // Keeps what this node derived for the next layer; `elements` false: the
  // node has no element maps (shape data, collectives).
  auto remember = [&](const OpResult &r, bool elements, std::vector<Term> terms) {
    if (!rec.reusable())
      return;
    for (auto &t : terms)
      if (!t)
        return; // an output without an element map: its reason names this node
    NodeMemo::Result m;
    m.op = r;
    m.node = describe(n);
    m.elements = elements;
    m.terms = std::move(terms);
    rec.store(std::move(m));
  };
  auto res = inferNode(*def, in);
  if (!res)
    return inferFailed(s, res.takeError());
  for (auto &o : res->obligations)
    raised.push_back({o, rank, n.name, n.modulePath()});
  // Shape arithmetic the op itself does not fold: follow the integer values.
  if (res->values.empty() || !res->values[0])
    if (auto v = foldIntValues(in, *res, 0)) {
      res->values.resize(std::max<size_t>(res->values.size(), 1));
      res->values[0] = v;
    }
  applyResult(s, *res);
  if (def->cls == OpClass::ShapeOnly || def->cls == OpClass::Collective) {
    remember(*res, false, {});
    return llvm::Error::success();
  }
  if (isConstant) {
    constantOutput(s);
    return llvm::Error::success();
  }
  if (onlyShapeData(s, *res)) {
    remember(*res, false, {});
    return llvm::Error::success();
  }
  buildElementMaps(s, *def, in, *res);
  std::vector<Term> terms;
  for (size_t o = 0; o < std::min(n.outputs.size(), res->shapes.size()); ++o)
    terms.push_back(values[n.outputs[o]].term);
  remember(*res, true, std::move(terms));
  return llvm::Error::success();
}

void NodeEvaluator::markUnsupported(const Step &s, const std::string &why) {
  for (int o : s.n.outputs)
    s.values[o].unsupported = why;
}

// Where reasoning stops on a rank: reported once per node, as the reason for UNKNOWN.
void NodeEvaluator::originUnsupported(const Step &s, const std::string &why) {
  markUnsupported(s, why);
  const Node &n = s.n;
  if (s.rank < 0 || !reportedRankNodes.insert(n.name).second)
    return;
  // No reference node: the message names the rank node.
  core.result.failures.push_back({Failure::Unsupported,
                                  "rank " + std::to_string(s.rank) + " node " + describe(n) + ": " + why, "",
                                  n.opType, n.modulePath(), n.outputs.empty() ? "" : s.g.values[n.outputs[0]].name,
                                  {}, std::nullopt});
}

// The op cannot run on these inputs: unsupported (UNKNOWN), the user's
// reference model at fault, or a broken rank graph (REFUTED with sizes).
llvm::Error NodeEvaluator::inferFailed(const Step &s, llvm::Error e) {
  auto taken = takeError(std::move(e));
  if (taken.kind == ErrorKind::Unsupported) {
    originUnsupported(s, taken.text);
    return llvm::Error::success();
  }
  if (s.rank < 0)
    return userError("reference model " + s.g.path + ": " + taken.message, taken.loc);
  // A rank graph that cannot run at any admissible size is a broken
  // implementation (a collective on the wrong axis makes the next MatMul
  // mismatch): an obligation that always fails, so REFUTED with sizes.
  const Node &n = s.n;
  s.raised.push_back({{taken.text, Expr::boolConst(false)}, s.rank, n.name, n.modulePath()});
  markUnsupported(s, "rank " + std::to_string(s.rank) + " node " + describe(n) + " cannot run: " + taken.text);
  return llvm::Error::success();
}

void NodeEvaluator::applyResult(const Step &s, const OpResult &r) {
  for (size_t o = 0; o < s.n.outputs.size() && o < r.shapes.size(); ++o) {
    ValueInfo &out = s.values[s.n.outputs[o]];
    out.shape = r.shapes[o];
    out.dtype = o < r.dtypes.size() ? r.dtypes[o] : DType::Other;
    if (o < r.values.size())
      out.value = r.values[o];
  }
}

// What the same node one layer up derived, renamed to this one's classes.
bool NodeEvaluator::reuseFromLayerBelow(const Step &s, const MemoKey &key) {
  auto hit = core.memo.lookup(key, core.classes);
  if (!hit)
    return false;
  const NodeMemo::Result &m = *hit->first;
  const Node &n = s.n;
  if (!m.op->obligations.empty()) { // most reused nodes raise none: no description to build
    const std::string was = m.node, now = describe(n);
    for (const Obligation &o : m.op->obligations)
      s.raised.push_back({{retarget(o.what, was, now), o.cond}, s.rank, n.name, n.modulePath()});
  }
  applyResult(s, *m.op);
  if (m.elements)
    for (size_t o = 0; o < m.terms.size(); ++o)
      s.values[n.outputs[o]].term = hit->second.apply(m.terms[o]);
  return true;
}

// Shape arithmetic (Gather/Unsqueeze/Concat on Shape outputs): the values are
// known symbolically, and an input known only as such needs no element map.
bool NodeEvaluator::onlyShapeData(const Step &s, const OpResult &r) {
  bool shapeData = true;
  for (size_t o = 0; o < s.n.outputs.size(); ++o)
    shapeData &= o < r.values.size() && r.values[o].has_value();
  for (int id : s.n.inputs)
    if (shapeData && id >= 0 && !s.values[id].term)
      return true;
  return false;
}

void NodeEvaluator::constantOutput(const Step &s) {
  const Attribute *a = s.n.attr("value");
  if (!a || !a->tensor)
    return;
  const int out = s.n.outputs[0];
  ValueInfo cv = constantValue(core.classes, s.n.name.empty() ? s.g.values[out].name : s.n.name, a->tensor);
  s.values[out].term = cv.term;
  s.values[out].data = a->tensor;
}

// Each output's element map from the op's, over its inputs' terms; a read of
// a tensor without one poisons the output (its reason names the input).
void NodeEvaluator::buildElementMaps(const Step &s, const OpDef &def, const OpInputs &in, const OpResult &r) {
  const Node &n = s.n;
  ReadFn read = [&](unsigned input, const IndexVec &idx, int level) -> Term {
    const ValueInfo &v = s.values[n.inputs[input]];
    if (!v.term && v.value)
      return shapeValueTerm(*v.value, idx, level);
    if (!v.term)
      return nullptr;
    return exposeMask(instantiate(v.term, indexVars("i", static_cast<unsigned>(v.shape->rank())), idx, level));
  };
  const size_t nout = std::min(n.outputs.size(), r.shapes.size());
  for (size_t o = 0; o < nout; ++o) {
    const Shape &os = r.shapes[o];
    IndexVec iv = indexVars("i", static_cast<unsigned>(os.rank()));
    bool missing = false;
    std::string missingName;
    ReadFn guarded = [&](unsigned input, const IndexVec &idx, int level) -> Term {
      Term x = read(input, idx, level);
      if (!x) {
        missing = true;
        missingName = s.g.values[n.inputs[input]].name;
        return mkConst(0);
      }
      return x;
    };
    Term t = def.element(in, r, static_cast<unsigned>(o), iv, guarded, 0);
    if (missing || !t) {
      s.values[n.outputs[o]].unsupported =
          missing ? describe(n) + " reads elements of '" + missingName + "', which is only known as shape data"
                  : "no element map for output " + std::to_string(o) + " of " + describe(n);
      continue;
    }
    Prover::Scope sc(core.prover, CheckCore::bounds(os));
    // A huge term only arises below a node no rank computes; normalizing it
    // (case splits multiply) serves matching that will not succeed. It stays
    // exact either way.
    s.values[n.outputs[o]].term = termSize(t) <= core.opts.maxTermNodes ? core.prover.normalize(t, 0) : t;
  }
}

// The values of an integer tensor whose elements are all numerals (a Range
// or a mask folded from Python ints); nullopt if any is symbolic.
static std::optional<std::vector<double>> numerals(const IntTensor &v) {
  std::vector<double> data;
  for (auto &e : v.vals) {
    auto c = e.asInt();
    if (!c)
      return std::nullopt;
    data.push_back(static_cast<double>(*c));
  }
  return data;
}

// Shape arithmetic used as data (arange(n) < x.shape[1]): the element term of
// a small integer tensor known symbolically. A constant is a number; a value
// that is >= 0 at every admissible size (a size) is sum(k in [0, E): 1), the
// index-valued form Range uses; anything else has no term (nullptr).
Term NodeEvaluator::shapeValueTerm(const IntTensor &v, const IndexVec &idx, int level) {
  if (idx.size() != v.dims.size())
    return nullptr;
  auto elem = [&](const Expr &e) -> Term {
    Expr x = e.simplify();
    if (auto c = x.asInt())
      return mkConst(static_cast<double>(*c));
    if (!core.ints.knownNonNegative(x)) {
      if (!core.prover.implies(x >= Expr::intConst(0), "shape.value.nonnegative"))
        return nullptr;
      core.ints.provenNonNegative.push_back(x);
    }
    return mkSum(level, Expr::intConst(0), x, mkConst(1));
  };
  // arange(c0, c0 + d*n, d) (a Range over a vocabulary, the columns of a
  // one-hot) is c0 + d*i: one comparison with the index instead of a select
  // chain as long as the vocabulary.
  auto data = v.size() >= 2 ? numerals(v) : std::nullopt;
  auto ap = data && v.dims.size() == 1 ? arithmeticProgression(*data) : std::nullopt;
  if (ap && ap->first >= 0 && ap->second >= 0 && idx.size() == 1 && core.ints.knownNonNegative(idx[0])) {
    Expr x = (Expr::intConst(ap->first) + Expr::intConst(ap->second) * idx[0]).simplify();
    if (!x.asInt())
      core.ints.provenNonNegative.push_back(x); // c0, d and the index are all >= 0
    return elem(x);
  }
  // A mask of numerals (arange(first, first + per) >= vocab, folded by the
  // export: the pad columns of a rank's vocab shard) is the index condition
  // it equals, as constant tensors are: one select, not a chain per column.
  if (auto mask = data ? recogniseConstantCondition(v.dims, *data) : std::nullopt) {
    IndexVec u = indexVars("u", static_cast<unsigned>(idx.size()));
    Expr cond = mask->cond.substitute({u.begin(), u.end()}, {idx.begin(), idx.end()}).simplify();
    return mkSelect(cond, mkConst(mask->onTrue), mkConst(mask->onFalse));
  }
  // Select chain over the flat position of idx.
  Expr flat = Expr::intConst(0);
  for (size_t d = 0; d < idx.size(); ++d)
    flat = flat * Expr::intConst(v.dims[d]) + idx[d];
  Term t;
  for (size_t f = v.size(); f-- > 0;) {
    Term e = elem(v.vals[f]);
    if (!e)
      return nullptr;
    t = t ? mkSelect(flat == Expr::intConst(static_cast<int64_t>(f)), e, t) : e;
  }
  return t;
}

// A read of a masked tensor (a softmax whose masked columns are exp(-inf) = 0,
// a product with a 0/1 mask) shows its mask to the reader: c[idx] ? k : t[idx]
// where the class is the constant k on condition c. A sum over the sequence
// reading it then splits where the mask switches, so pad rows that are zero
// by the mask drop out of a padded reduction (masked pooling, attention times
// V), exactly, not by value.
Term NodeEvaluator::exposeMask(const Term &t) const {
  if (!t || t->kind != TermKind::Read)
    return t;
  const ClassInfo &ci = core.classes[t->cls];
  if (ci.kind != ClassInfo::Compute || !ci.def || ci.def->kind != TermKind::Select)
    return t;
  const Term &d = ci.def;
  int constBranch = d->args[0]->kind == TermKind::Const ? 0 : d->args[1]->kind == TermKind::Const ? 1 : -1;
  if (constBranch < 0 || d->cond.hasApp())
    return t;
  IndexVec uv = indexVars("u", static_cast<unsigned>(ci.shape.rank()));
  Expr cond = d->cond.substitute({uv.begin(), uv.end()}, {t->idx.begin(), t->idx.end()});
  return constBranch == 0 ? mkSelect(cond, d->args[0], t) : mkSelect(cond, t, d->args[1]);
}

ValueInfo constantValue(ClassTable &classes, const std::string &name,
                        const std::shared_ptr<const TensorData> &data) {
  ValueInfo v;
  v.data = data;
  v.dtype = data->dtype;
  Shape s;
  for (auto d : data->dims)
    s.dims.push_back(Expr::intConst(d));
  v.shape = s;
  if (!isFloating(data->dtype)) {
    IntTensor it;
    it.dims = data->dims;
    for (auto x : data->ints)
      it.vals.push_back(Expr::intConst(x));
    v.value = it;
  }
  if (data->numElements() == 1) {
    v.term = mkConst(data->at(0));
  } else {
    std::vector<double> vals;
    for (int64_t i = 0; i < data->numElements(); ++i)
      vals.push_back(data->at(i));
    ClassId c = classes.constant("const:" + name, data->dims, vals);
    v.term = mkRead(c, indexVars("i", static_cast<unsigned>(data->dims.size())));
  }
  return v;
}

} // namespace shardproof::relation
