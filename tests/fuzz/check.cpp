// Fuzz target: the whole check on small generated cases. The bytes describe a
// tiny program (a few ops over x, w, v, b), how each input and the output are
// placed on 2 ranks, and edits that only the ranks get (collectives, a changed
// or dropped op, a wrong arity, an unknown op). From that come a reference
// graph, two rank graphs and the spec text, which go through parseSpec and
// verify exactly as the CLI's would.
//
// Properties: never a crash or an internal error; and when both ranks are the
// reference itself with everything replicated, never REFUTED (except by an
// obligation of the reference, which is about the spec's sizes).
#include "FuzzUtil.h"

#include "../unit/relation/GraphBuilder.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/spec/Spec.h"

using namespace shardproof;
using testing::DimSpec;
using testing::GraphBuilder;

namespace {

constexpr int kWorld = 2;

struct Input {
  std::string name;
  std::vector<DimSpec> dims;
  unsigned placement = 0; // 0 replicated, 1 shard axis 0, 2 shard axis 1, 3 partial
};

struct Step {
  unsigned op = 0;
  unsigned a = 0, b = 0; // operands: indexes into the tensors made before this step
  unsigned attr = 0;     // axis / keepdims / slice end, depending on op
};

// What only the ranks get, applied after step `at`.
struct Edit {
  enum Kind { None, AllReduce, AllGather, ChangeOp, DropOp, OneInput, UnknownOp } kind = None;
  unsigned at = 0;
  int rank = -1; // -1: both ranks
  unsigned attr = 0;
};

const char *kBinary[] = {"Add", "Sub", "Mul", "Max"};
const char *kUnary[] = {"Tanh", "Relu", "Exp", "Neg", "Identity", "Sigmoid"};
enum Op { MatMul, Binary, Unary, Transpose, ReduceSum, Softmax, Concat, Slice, Reshape, kOps };

struct Case {
  std::vector<Input> inputs;
  std::vector<Step> steps;
  std::vector<Edit> edits;
  unsigned outPlacement = 0; // 0 replicated, 1 partial, 2 shard 0, 3 shard 1, 4 relation
  bool twoOutputs = false;
  // Bounds of `batch`: 0 the usual {min: 1}, else sizes near int64's end
  // (issue 17: a symbol fixed at 2^60 aborted replay). Drawn last, so older
  // regression inputs, which end before it, decode as before.
  unsigned sizes = 0;

  bool ranksAreReference() const {
    for (auto &e : edits)
      if (e.kind != Edit::None)
        return false;
    for (auto &i : inputs)
      if (i.placement != 0)
        return false;
    return outPlacement == 0;
  }
};

// The generator tracks the reference's shapes (dims as text, "" unknown) so
// that most second operands fit: ill-typed programs only reach the first
// shape obligation, and each costs solver time. One choice in eight still
// takes any tensor, so shape errors stay covered.
using Dims = std::vector<std::string>;

std::string dimText(const DimSpec &d) {
  return std::holds_alternative<int64_t>(d) ? std::to_string(std::get<int64_t>(d)) : std::get<std::string>(d);
}

bool known(const Dims &d) {
  for (auto &x : d)
    if (x.empty())
      return false;
  return !d.empty();
}

bool fits(const Step &st, const Dims &a, const Dims &b) {
  if (!known(a) || !known(b))
    return false;
  switch (st.op) {
  case MatMul: return a.size() == 2 && b.size() == 2 && a[1] == b[0];
  case Binary: return a == b || (b.size() == 1 && b[0] == a.back());
  case Concat: {
    unsigned axis = st.attr % 2;
    if (a.size() != b.size() || axis >= a.size())
      return false;
    for (size_t d = 0; d < a.size(); ++d)
      if (d != axis && a[d] != b[d])
        return false;
    return true;
  }
  default: return true; // unary ops ignore b
  }
}

unsigned secondOperand(const Step &st, const std::vector<Dims> &shapes) {
  if ((st.b & 0xe0) == 0xe0)
    return st.b % shapes.size();
  std::vector<unsigned> ok;
  for (unsigned i = 0; i < shapes.size(); ++i)
    if (fits(st, shapes[st.a], shapes[i]))
      ok.push_back(i);
  return ok.empty() ? st.b % shapes.size() : ok[st.b % ok.size()];
}

Dims resultShape(const Step &st, const Dims &a, const Dims &b) {
  if (!fits(st, a, b))
    return {};
  unsigned axis = st.attr % 2;
  switch (st.op) {
  case MatMul: return {a[0], b[1]};
  case Transpose: return a.size() == 2 ? Dims{a[1], a[0]} : Dims{};
  case ReduceSum: {
    if (axis >= a.size())
      return {};
    Dims r = a;
    if ((st.attr >> 1) & 1)
      r[axis] = "1";
    else
      r.erase(r.begin() + axis);
    return r.empty() ? Dims{} : r;
  }
  case Concat: {
    Dims r = a;
    r[axis] = "(" + a[axis] + "+" + b[axis] + ")";
    return r;
  }
  case Slice: {
    unsigned sa = (st.attr >> 2) % 2;
    if (sa >= a.size())
      return {};
    Dims r = a;
    r[sa] = "slice" + std::to_string(1 + st.attr % 3) + "(" + a[sa] + ")";
    return r;
  }
  case Reshape: return a.size() == 1 ? Dims{a[0], "1"} : a.size() == 2 ? a : Dims{};
  default: return a; // elementwise, softmax
  }
}

Case decode(fuzz::Choices &c) {
  Case k;
  const int64_t D = c.flag() ? 4 : 2, H = 2 << c.pick(3);
  k.inputs = {{"x", {std::string("batch"), D}}, {"w", {D, H}}, {"v", {H, D}}, {"b", {D}}};
  for (auto &in : k.inputs)
    in.placement = c.pick(4);
  unsigned n = 1 + c.pick(6);
  std::vector<Dims> shapes;
  for (auto &in : k.inputs) {
    shapes.emplace_back();
    for (auto &d : in.dims)
      shapes.back().push_back(dimText(d));
  }
  for (unsigned s = 0; s < n; ++s) {
    Step st{c.pick(kOps), c.byte(), c.byte(), c.byte()};
    st.a %= shapes.size();
    st.b = secondOperand(st, shapes);
    shapes.push_back(resultShape(st, shapes[st.a], shapes[st.b]));
    k.steps.push_back(st);
  }
  unsigned edits = c.pick(3);
  for (unsigned e = 0; e < edits; ++e) {
    Edit ed;
    ed.kind = static_cast<Edit::Kind>(c.pick(7));
    ed.at = c.pick(n);
    ed.rank = static_cast<int>(c.pick(3)) - 1;
    ed.attr = c.byte();
    k.edits.push_back(ed);
  }
  k.outPlacement = c.pick(5);
  k.twoOutputs = c.flag();
  k.sizes = c.pick(4);
  return k;
}

// Rank shape of an input: the sharded axis halves (rank 0 gets the larger half
// of an odd size); a sharded batch becomes the local symbol lbatch.
std::vector<DimSpec> rankDims(const Input &in, int rank) {
  std::vector<DimSpec> d = in.dims;
  unsigned axis = in.placement == 1 ? 0 : in.placement == 2 ? 1 : ~0u;
  if (axis >= d.size())
    return d;
  if (std::holds_alternative<std::string>(d[axis]))
    d[axis] = std::string("lbatch");
  else {
    int64_t full = std::get<int64_t>(d[axis]);
    d[axis] = full / kWorld + (rank < full % kWorld ? 1 : 0);
  }
  return d;
}

bool shardsBatch(const Case &k) {
  for (auto &i : k.inputs)
    if (i.placement == 1 && std::holds_alternative<std::string>(i.dims[0]))
      return true;
  return false;
}

std::string tensorName(unsigned i, const Case &k) {
  return i < k.inputs.size() ? k.inputs[i].name : "t" + std::to_string(i - k.inputs.size());
}

// rank -1: the reference.
ir::Graph build(const Case &k, int rank) {
  GraphBuilder g(rank < 0 ? "ref.onnx" : "rank" + std::to_string(rank) + ".onnx");
  for (auto &in : k.inputs)
    g.input(in.name, rank < 0 ? in.dims : rankDims(in, rank));
  auto mine = [&](const Edit &e) { return rank >= 0 && (e.rank < 0 || e.rank == rank); };
  std::vector<std::string> live; // tensor i's current name (edits rename results)
  for (auto &in : k.inputs)
    live.push_back(in.name);
  for (unsigned s = 0; s < k.steps.size(); ++s) {
    const Step &st = k.steps[s];
    std::string a = live[st.a], b = live[st.b]; // decode() keeps both in range
    std::string out = tensorName(static_cast<unsigned>(k.inputs.size()) + s, k);
    std::string node = "/l" + std::to_string(s) + "/";
    std::string op;
    std::vector<std::string> ins = {a};
    std::map<std::string, ir::Attribute> attrs;
    switch (st.op) {
    case MatMul: op = "MatMul"; ins = {a, b}; break;
    case Binary: op = kBinary[st.attr % 4]; ins = {a, b}; break;
    case Unary: op = kUnary[st.attr % 6]; break;
    case Transpose: op = "Transpose"; attrs["perm"] = GraphBuilder::intsAttr({1, 0}); break;
    case ReduceSum:
      op = "ReduceSum";
      attrs["axes"] = GraphBuilder::intsAttr({static_cast<int64_t>(st.attr % 2)});
      attrs["keepdims"] = GraphBuilder::intAttr((st.attr >> 1) & 1);
      break;
    case Softmax: op = "Softmax"; attrs["axis"] = GraphBuilder::intAttr(-1); break;
    case Concat: op = "Concat"; ins = {a, b}; attrs["axis"] = GraphBuilder::intAttr(st.attr % 2); break;
    case Slice: {
      op = "Slice";
      std::string p = "s" + std::to_string(s) + "_";
      g.initializer(p + "starts", {1}, {0}).initializer(p + "ends", {1}, {1 + st.attr % 3});
      g.initializer(p + "axes", {1}, {static_cast<int64_t>((st.attr >> 2) % 2)});
      ins = {a, p + "starts", p + "ends", p + "axes"};
      break;
    }
    default: {
      op = "Reshape";
      std::string p = "r" + std::to_string(s) + "_shape";
      g.initializer(p, {2}, {0, -1});
      ins = {a, p};
      break;
    }
    }
    for (auto &e : k.edits) {
      if (!mine(e) || e.at != s)
        continue;
      if (e.kind == Edit::ChangeOp && ins.size() == 2 && op != "MatMul" && op != "Concat")
        op = kBinary[(st.attr + 1 + e.attr % 3) % 4];
      else if (e.kind == Edit::DropOp)
        op = "Identity", ins = {a}, attrs.clear();
      else if (e.kind == Edit::OneInput)
        ins.resize(1);
      else if (e.kind == Edit::UnknownOp)
        op = "FuzzUnknownOp";
    }
    std::string result = out;
    bool collective = false;
    for (auto &e : k.edits)
      collective |= mine(e) && e.at == s && (e.kind == Edit::AllReduce || e.kind == Edit::AllGather);
    if (collective)
      result = out + "_local";
    g.node(op, ins, {result}, node + op, attrs);
    for (auto &e : k.edits) {
      if (!mine(e) || e.at != s || (e.kind != Edit::AllReduce && e.kind != Edit::AllGather))
        continue;
      std::map<std::string, ir::Attribute> ca;
      const char *cop = e.kind == Edit::AllReduce ? "AllReduce" : "AllGather";
      const char *domain = "com.microsoft";
      // Collective attributes, in and out of range: axes past the rank,
      // reduction ops that do not exist, attributes nobody reads (issue 17).
      if (e.kind == Edit::AllGather)
        ca["axis"] = GraphBuilder::intAttr(static_cast<int64_t>(e.attr % 7) - 3);
      if (e.attr & 0x80)
        ca["group_size"] = GraphBuilder::intAttr(1 + (e.attr >> 4) % 3);
      if (e.kind == Edit::AllReduce && (e.attr & 0x40)) {
        static const char *kOps[] = {"sum", "max", "min", "prod"};
        ir::Attribute op;
        op.kind = ir::Attribute::Kind::String;
        op.s = kOps[(e.attr >> 2) % 4];
        ca["op"] = op;
        domain = "shardproof";
      }
      if (e.attr & 0x20)
        ca["dim"] = GraphBuilder::intAttr(0);
      std::string next = result == out ? out + "_c" : out;
      g.node(cop, {result}, {next}, node + cop, ca, domain);
      result = next;
    }
    if (result != out)
      g.node("Identity", {result}, {out}, node + "Out");
    live.push_back(out);
  }
  g.output(live.back());
  if (k.twoOutputs && live.size() > k.inputs.size() + 1)
    g.output(live[k.inputs.size()]);
  return g.build();
}

std::string placementText(unsigned p, const std::string &name, bool output) {
  switch (p) {
  case 0: return "replicated";
  case 1: return output ? "partial" : "{shard: 0}";
  case 2: return output ? "{shard: 0}" : "{shard: 1}";
  case 3: return output ? "{shard: 1}" : "partial";
  default: return "\"concat(" + name + "@*, axis=1)\"";
  }
}

std::string specText(const Case &k, const ir::Graph &ref) {
  std::string s = "shardproof: 1\nreference: ref.onnx\n"
                  "implementation: {world_size: 2, ranks: \"rank{r}.onnx\"}\n"
                  "symbols: {batch: ";
  static const char *kBatch[] = {"{min: 1}", "{min: 1152921504606846976, max: 1152921504606846976}",
                                 "{min: 1, max: 4611686018427387904}", "{min: 2305843009213693952}"};
  s += kBatch[k.sizes % 4];
  if (shardsBatch(k))
    s += ", lbatch: {min: 1}}\nconstraints: [\"batch == 2 * lbatch\"]\n";
  else
    s += "}\n";
  s += "inputs:\n";
  for (auto &in : k.inputs)
    s += "  " + in.name + ": " + placementText(in.placement, in.name, false) + "\n";
  s += "outputs:\n";
  for (int id : ref.outputs) {
    const std::string &n = ref.values[id].name;
    s += "  " + n + ": " + placementText(k.outPlacement, n, true) + "\n";
  }
  return s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::Choices c(data, size);
  Case k = decode(c);
  ir::Graph ref = build(k, -1);
  std::vector<ir::Graph> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.push_back(build(k, r));
  std::string text = specText(k, ref);
  auto s = spec::parseSpec(text, "fuzz.yaml");
  if (!s)
    fuzz::finding("the generated spec does not parse: " + shardproof::toString(s.takeError()) + "\n" + text);
  relation::Options opts;
  opts.solverTimeoutMs = 2000;
  auto r = relation::verify(ref, ranks, *s, opts);
  if (!r) {
    fuzz::rejectInternal(r.takeError(), "verify");
    return 0;
  }
  if (std::getenv("SHARDPROOF_FUZZ_VERBOSE")) // what a case became, when studying one
    std::fprintf(stderr, "%s%s: %s (%u queries, %.2fs)\n", text.c_str(), relation::toString(r->verdict),
                 r->reason.c_str(), r->stats.solverQueries, r->stats.seconds);
  if (r->verdict == relation::Verdict::Refuted && k.ranksAreReference()) {
    bool byObligation = false;
    for (auto &f : r->failures)
      byObligation |= f.kind == relation::Failure::Obligation;
    if (!byObligation)
      fuzz::finding("REFUTED although both ranks are the reference: " + r->reason + "\n" + text);
  }
  return 0;
}
