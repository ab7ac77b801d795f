#include "shardproof/ir/Layers.h"
#include "shardproof/ir/Ops.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <cctype>
#include <cstring>
#include <string_view>

namespace shardproof::ir {

// The layer number in a node name and where its part sits: "/m/layers.12/x/Op"
// -> 12, with `prefix` "/m/layers" (the name up to the number's dot).
static int numberIn(std::string_view name, std::string_view *prefix) {
  if (name.empty() || name[0] != '/')
    return -1;
  // The module parts are the name's components but the last (the op's own).
  for (size_t start = 1, slash; (slash = name.find('/', start)) != std::string_view::npos; start = slash + 1) {
    std::string_view part = name.substr(start, slash - start);
    size_t dot = part.rfind('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 >= part.size() || part.size() - dot - 1 > 6)
      continue;
    int k = 0;
    bool numeric = true;
    for (char c : part.substr(dot + 1)) {
      numeric &= c >= '0' && c <= '9';
      k = k * 10 + (c - '0');
    }
    if (!numeric)
      continue;
    if (prefix)
      *prefix = name.substr(0, start + dot);
    return k;
  }
  return -1;
}

// numberIn(name) when its prefix must be `prefix`, else -1: a test of the
// name's start instead of a scan of its parts (460,000 names at 126 layers).
// The number is the whole next part, ended by a slash, as numberIn reads it.
static int numberAfter(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() + 2 || name.compare(0, prefix.size(), prefix) != 0 || name[prefix.size()] != '.')
    return -1;
  // `prefix` came from numberIn: the parts it spans hold no number, so the
  // one after it is the name's first.
  int k = 0;
  size_t i = prefix.size() + 1, digits = 0;
  for (; i < name.size() && name[i] != '/'; ++i, ++digits) {
    if (name[i] < '0' || name[i] > '9' || digits == 6)
      return -1;
    k = k * 10 + (name[i] - '0');
  }
  return digits > 0 && i < name.size() ? k : -1;
}

int layerNumber(const Node &n, std::string *container) {
  std::string_view prefix;
  int k = numberIn(n.name, &prefix);
  if (k >= 0 && container) {
    container->clear();
    for (char c : prefix.substr(1))
      container->push_back(c == '/' ? '.' : c);
  }
  return k;
}

bool isConstantNode(const Node &n) {
  static const OpDef *constant = lookupOp("", "Constant");
  return opOf(n) == constant && n.inputs.empty();
}

static bool sameAttribute(const Attribute &a, const Attribute &b) {
  if (a.kind != b.kind || a.i != b.i || a.s != b.s || a.ints != b.ints || a.strings != b.strings)
    return false;
  // Bitwise for reals: a NaN attribute equals itself, 0.0 and -0.0 differ.
  auto sameReal = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  if (!sameReal(a.f, b.f) || a.floats.size() != b.floats.size())
    return false;
  for (size_t i = 0; i < a.floats.size(); ++i)
    if (!sameReal(a.floats[i], b.floats[i]))
      return false;
  if (!a.tensor || !b.tensor || a.tensor == b.tensor)
    return !a.tensor == !b.tensor;
  const TensorData &x = *a.tensor, &y = *b.tensor;
  if (x.dtype != y.dtype || x.dims != y.dims || x.ints != y.ints || x.floats.size() != y.floats.size())
    return false;
  for (size_t i = 0; i < x.floats.size(); ++i)
    if (!sameReal(x.floats[i], y.floats[i]))
      return false;
  return true;
}

static bool sameNode(const Node &a, const Node &b) {
  // The same table row is the same (domain, type): two strings not compared.
  if (a.op && b.op ? a.op != b.op : a.opType != b.opType || a.domain != b.domain)
    return false;
  if (a.inputs.size() != b.inputs.size() ||
      a.outputs.size() != b.outputs.size() || a.attrs.size() != b.attrs.size())
    return false;
  for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib)
    if (ia->first != ib->first || !sameAttribute(ia->second, ib->second))
      return false;
  return true;
}

namespace {

// Layer k against layer k-1: see Layers.h for what must correspond.
struct RepeatCheck {
  RepeatCheck(const Graph &g, const LayerStack &s, const std::vector<char> &constant,
              const std::vector<std::pair<int, int>> &producer, int k)
      : g(g), s(s), constant(constant), producer(producer), k(k) {}
  const Graph &g;
  const LayerStack &s;
  const std::vector<char> &constant; // per node: isConstantNode, asked once
  // Per value: producer and slot, packed (a Value is a cache line or two,
  // and these are read at random, twice per input of every layer's node).
  const std::vector<std::pair<int, int>> &producer;
  int k;
  llvm::DenseMap<int, int> sourceTo, sourceFrom;
  llvm::DenseSet<int> seen;
  std::vector<std::pair<int, int>> outside; // graph inputs/initializers of k-1 <-> of k

  // The tensor of layer k that stands where `b` stands for layer k-1.
  bool corresponds(int b, int a) {
    if (b < 0 || a < 0)
      return a == b;
    int p = producer[b].first;
    if (p < 0) {
      if (producer[a].first >= 0)
        return false;
      if (a == b)
        return !sourceTo.count(b) && !sourceFrom.count(a);
      auto [to, freshTo] = sourceTo.try_emplace(b, a);
      auto [from, freshFrom] = sourceFrom.try_emplace(a, b);
      return to->second == a && from->second == b && a != b;
    }
    if (s.position[p] < 0 && constant[p]) { // a body node is never one
      int q = producer[a].first;
      return q >= 0 && constant[q] && sameNode(g.nodes[p], g.nodes[q]);
    }
    int j = s.layer[p];
    if (j < 0 || j + 1 >= s.layers() || (a == b && j + 1 < k))
      return a == b; // made by the stem, or by a layer below for all above it (a rotary table): shared
    int q = producer[a].first;
    if (q < 0 || s.layer[q] != j + 1 || producer[a].second != producer[b].second)
      return false;
    // A wire inside the layer (j+1 == k), or layer j+1 repeating layer j: the
    // same position, as the copy maps them. Else (layer 1 against the first
    // layer, which differs) the node of the same name in it.
    if (j + 1 == k || s.repeats[j + 1])
      return s.position[q] == s.position[p];
    return oneLayerUp(g.nodes[p].name, g.nodes[q].name, j);
  }

  // Whether `b` is `a` one layer up: "/layers.3/mlp/Add" and "/layers.4/mlp/Add".
  static bool oneLayerUp(std::string_view a, std::string_view b, int j) {
    std::string_view pa, pb;
    if (numberIn(a, &pa) != j || numberIn(b, &pb) != j + 1 || pa != pb)
      return false;
    size_t ra = a.find('/', pa.size()), rb = b.find('/', pb.size());
    return ra != std::string_view::npos && rb != std::string_view::npos && a.substr(ra) == b.substr(rb);
  }

  bool run() {
    if (s.size(k) != s.size(k - 1))
      return false;
    for (size_t o = 0; o < s.size(k); ++o) {
      const Node &nb = g.nodes[s.body[k - 1][o]], &na = g.nodes[s.body[k][o]];
      if (!sameNode(nb, na))
        return false;
      for (size_t i = 0; i < nb.inputs.size(); ++i) {
        if (!corresponds(nb.inputs[i], na.inputs[i]))
          return false;
        int b = nb.inputs[i], p = b < 0 ? -1 : producer[b].first;
        bool inside = p >= 0 && s.position[p] >= 0 && s.layer[p] == k - 1;
        if (b >= 0 && !inside && seen.insert(b).second)
          outside.push_back({b, na.inputs[i]});
      }
    }
    return true;
  }
};

} // namespace

LayerStack findLayerStack(const Graph &g) {
  LayerStack s;
  int last = -1;
  size_t lastNode = 0;
  std::string_view first;
  std::vector<char> constant(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    constant[i] = isConstantNode(g.nodes[i]);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::string_view prefix;
    int k = constant[i] ? -1
            : first.empty()            ? numberIn(g.nodes[i].name, &prefix)
                                       : numberAfter(g.nodes[i].name, first);
    if (k < 0)
      continue; // unnumbered, or another numbered module (experts inside a layer): part of the layer around it
    if (s.begin.empty()) {
      first = prefix;
      layerNumber(g.nodes[i], &s.container);
    }
    if (k == last + 1) {
      s.begin.push_back(i);
      last = k;
    } else if (k != last) {
      return {}; // layers out of order or interleaved: no stack
    }
    lastNode = i;
  }
  if (s.begin.empty())
    return {};
  s.begin.push_back(lastNode + 1);
  s.body.resize(s.begin.size() - 1);
  s.constants.resize(s.begin.size() - 1);
  s.position.assign(g.nodes.size(), -1);
  s.layer.assign(g.nodes.size(), -1);
  for (int k = 0; k < s.layers(); ++k)
    for (size_t i = s.begin[k]; i < s.begin[k + 1]; ++i) {
      s.layer[i] = k;
      if (!constant[i]) {
        s.position[i] = static_cast<int>(s.body[k].size());
        s.body[k].push_back(i);
      } else {
        s.constants[k].push_back(i);
      }
    }
  s.repeats.assign(s.begin.size() - 1, false);
  std::vector<std::pair<int, int>> producer(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v)
    producer[v] = {g.values[v].producer, g.values[v].producerSlot};
  s.outsideInputs.resize(s.layers());
  for (int k = 2; k < s.layers(); ++k) {
    RepeatCheck check{g, s, constant, producer, k};
    s.repeats[k] = check.run();
    if (s.repeats[k])
      s.outsideInputs[k] = std::move(check.outside);
  }
  s.constantsRepeat.assign(s.layers(), false);
  for (int k = 1; k < s.layers(); ++k) {
    auto &a = s.constants[k], &b = s.constants[k - 1];
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); ++i)
      same = sameNode(g.nodes[a[i]], g.nodes[b[i]]);
    s.constantsRepeat[k] = same;
  }
  return s;
}

} // namespace shardproof::ir
