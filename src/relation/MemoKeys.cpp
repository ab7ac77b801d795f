// The keys under which NodeMemo stores a node's element maps and a reference
// term's cover: everything the computation reads, classes numbered by first
// occurrence (NodeMemo.h says why a hit can be reused).
#include "MemoKeys.h"

namespace shardproof::relation {

using namespace ir;

static void tensorData(MemoKey &k, const std::shared_ptr<const TensorData> &d) {
  k.word(d ? 1 : 0);
  if (!d)
    return;
  k.word(static_cast<uint64_t>(d->dtype));
  k.word(d->dims.size());
  for (auto x : d->dims)
    k.word(static_cast<uint64_t>(x));
  k.word(d->floats.size());
  for (double f : d->floats)
    k.real(f);
  k.word(d->ints.size());
  for (auto i : d->ints)
    k.word(static_cast<uint64_t>(i));
}

static void intTensor(MemoKey &k, const std::optional<IntTensor> &v) {
  k.word(v ? 1 : 0);
  if (!v)
    return;
  k.word(v->dims.size());
  for (auto x : v->dims)
    k.word(static_cast<uint64_t>(x));
  k.word(v->vals.size());
  for (auto &e : v->vals)
    k.expr(e);
}

static void attribute(MemoKey &k, const std::string &name, const Attribute &a) {
  k.str(name);
  k.word(static_cast<uint64_t>(a.kind));
  k.word(static_cast<uint64_t>(a.i));
  k.real(a.f);
  k.str(a.s);
  k.word(a.ints.size());
  for (auto x : a.ints)
    k.word(static_cast<uint64_t>(x));
  k.word(a.floats.size());
  for (double f : a.floats)
    k.real(f);
  k.word(a.strings.size());
  for (auto &s : a.strings)
    k.str(s);
  tensorData(k, a.tensor);
}

// Large constant tensors (weights stored as initializers) are keyed by
// identity; a copy with equal contents is then a miss, never a wrong hit.
static constexpr size_t kMaxKeyedElements = 256;

MemoKey nodeKey(const Node &n, const std::vector<ValueInfo> &values, const OpInputs &in,
                const ClassTable &classes) {
  MemoKey k(&classes);
  k.str(n.opType);
  k.str(n.domain);
  k.word(static_cast<uint64_t>(in.opset));
  k.word(static_cast<uint64_t>(in.worldSize));
  k.word(n.attrs.size());
  for (auto &[name, a] : n.attrs)
    attribute(k, name, a);
  k.word(n.outputs.size());
  k.word(n.inputs.size());
  for (int id : n.inputs) {
    k.word(id < 0 ? 0 : 1);
    if (id < 0)
      continue;
    const ValueInfo &v = values[id];
    k.term(v.term);
    k.shape(v.shape);
    k.word(static_cast<uint64_t>(v.dtype));
    intTensor(k, v.value);
    if (v.data && static_cast<size_t>(v.data->numElements()) > kMaxKeyedElements)
      k.word(reinterpret_cast<uintptr_t>(v.data.get()));
    else
      tensorData(k, v.data);
  }
  return k;
}

MemoKey collectiveKey(const Node &n0, const std::vector<Shape> &shapes, const std::vector<Term> &ins,
                      const ClassTable &classes) {
  MemoKey k(&classes);
  k.str("collective");
  k.str(n0.opType);
  k.str(n0.domain);
  k.word(n0.attrs.size());
  for (auto &[name, a] : n0.attrs)
    attribute(k, name, a);
  k.word(ins.size());
  for (size_t r = 0; r < ins.size(); ++r) {
    k.term(ins[r]);
    k.shape(shapes[r]);
  }
  return k;
}

MemoKey coverKey(const Term &t, const Shape &shape, unsigned maxTermNodes, const ClassTable &classes) {
  MemoKey k(&classes);
  k.str("cover");
  k.word(maxTermNodes);
  k.shape(shape);
  k.term(t);
  return k;
}

MemoKey proposalKey(const Term &t, const Shape &shape, const std::vector<std::vector<Term>> &candidates,
                    const ClassTable &classes) {
  MemoKey k(&classes);
  k.str("propose");
  k.shape(shape);
  k.term(t);
  k.word(candidates.size());
  for (auto &sides : candidates) {
    k.word(sides.size());
    for (auto &b : sides)
      k.term(b);
  }
  return k;
}

MemoKey agreementKey(const Term &ref, const Term &side, const Shape &shape, const ClassTable &classes) {
  MemoKey k(&classes);
  k.str("agree");
  k.shape(shape);
  k.term(ref);
  k.term(side);
  return k;
}

} // namespace shardproof::relation
