// Whole-layer reuse in the rank world: LayerCopy.h says when a layer is its
// predecessor renamed, and why the copy is what evaluation would give.
#include "LayerCopy.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <cstdint>

namespace shardproof::relation {

using namespace ir;

namespace layercopy {

// Node p is in layer k's body (not one of the Constant nodes in its span).
bool inBody(const LayerStack &s, int k, int p) {
  return p >= 0 && s.position[p] >= 0 && static_cast<size_t>(p) >= s.begin[k] &&
         static_cast<size_t>(p) < s.begin[k + 1];
}

static bool sameData(const std::shared_ptr<const TensorData> &a, const std::shared_ptr<const TensorData> &b) {
  if (a == b)
    return true;
  return a && b && a->dtype == b->dtype && a->dims == b->dims && a->ints == b->ints && a->floats == b->floats;
}

// Two values equal up to renaming their classes by sigma (extended as it goes).
bool unifyValues(const ValueInfo &b, const ValueInfo &a, Renaming &sigma) {
  if (!b.term != !a.term || b.shape.has_value() != a.shape.has_value() || b.dtype != a.dtype ||
      b.value.has_value() != a.value.has_value() || b.unsupported != a.unsupported || !sameData(b.data, a.data))
    return false;
  if (b.shape && !b.shape->same(*a.shape))
    return false;
  if (b.value) {
    if (b.value->dims != a.value->dims || b.value->vals.size() != a.value->vals.size())
      return false;
    for (size_t i = 0; i < b.value->vals.size(); ++i)
      if (!b.value->vals[i].same(a.value->vals[i]))
        return false;
  }
  return !b.term || sameTermUpToReads(b.term, a.term, [&](ClassId x, ClassId y) { return sigma.bind(x, y); });
}

std::vector<char> readOutsideItsLayer(const Graph &g, const LayerStack &s) {
  std::vector<char> out(g.values.size(), 0);
  // The layer whose body made the value (values are read at random below: a
  // Value is far larger than an int).
  std::vector<int> madeIn(g.values.size(), -1);
  for (int k = 0; k < s.layers(); ++k)
    for (size_t n : s.body[k])
      for (int o : g.nodes[n].outputs)
        madeIn[o] = k;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const int body = s.position[n] >= 0 ? s.layer[n] : -1; // the layer whose body holds the node
    for (int v : g.nodes[n].inputs)
      if (v >= 0 && madeIn[v] >= 0 && madeIn[v] != body)
        out[v] = 1;
  }
  for (int v : g.outputs)
    out[v] = 1;
  return out;
}

bool valueIsClean(const ValueInfo &v) {
  if (!v.unsupported.empty() || (v.term && readsData(v.term)))
    return false;
  if (v.value)
    for (auto &e : v.value->vals)
      if (e.hasApp())
        return false;
  return true;
}

} // namespace layercopy

using namespace layercopy;

LayerCopy::LayerCopy(CheckCore &core, NodeEvaluator &nodes, std::vector<std::vector<ValueInfo>> &rankValues,
                     std::vector<PendingObligation> &obligations)
    : core(core), nodes(nodes), rankValues(rankValues), obligations(obligations) {
  if (!core.opts.memo)
    return; // --no-memo: every node derived afresh
  for (const Graph &g : core.ranks)
    stacks.push_back(findLayerStack(g));
  layers = stacks.empty() ? 0 : stacks[0].layers();
  for (auto &s : stacks)
    if (s.layers() != layers)
      return;
  active_ = layers >= 3; // the first copy is layer 2, from layer 1
  if (!active_)
    return;
  sources_.resize(static_cast<size_t>(layers) + 1);
  for (size_t r = 0; r < stacks.size(); ++r) {
    const Graph &g = core.ranks[r];
    const LayerStack &s = stacks[r];
    readOutside_.push_back(readOutsideItsLayer(g, s));
    pending_.emplace_back(g.values.size(), -1);
  }
}

size_t LayerCopy::stopAt(int r) const {
  return active_ && next <= layers ? stacks[r].begin[next] : SIZE_MAX;
}

void LayerCopy::abandon() {
  active_ = false;
  window_.reset();
  rec_.reset();
  done_.reset();
}

void LayerCopy::open(int layer) {
  window_.emplace();
  window_->layer = layer;
  window_->firstClass = static_cast<ClassId>(core.classes.size());
  window_->failures = core.result.failures.size();
  window_->obligations = obligations.size();
  rec_.emplace(core.classes);
}

void LayerCopy::close() {
  if (!window_)
    return;
  Window &w = *window_;
  w.endClass = static_cast<ClassId>(core.classes.size());
  w.consulted = rec_->consulted();
  w.valid = !rec_->readDerivedCache() && layerIsClean(w);
  rec_.reset();
  done_ = std::move(w);
  window_.reset();
}

// Nothing in the layer that a renaming of classes would not carry over.
bool LayerCopy::layerIsClean(const Window &w) const {
  if (core.result.failures.size() != w.failures)
    return false;
  for (size_t i = w.obligations; i < obligations.size(); ++i)
    if (obligations[i].obl.cond.hasApp())
      return false;
  for (size_t r = 0; r < stacks.size(); ++r) {
    const Graph &g = core.ranks[r];
    for (size_t n : stacks[r].body[w.layer])
      for (int o : g.nodes[n].outputs)
        if (!valueIsClean(rankValues[r][o]))
          return false;
  }
  return true;
}

std::vector<size_t> LayerCopy::atBoundary() {
  const int k = next++;
  close();
  std::vector<size_t> at;
  for (auto &s : stacks)
    at.push_back(s.begin[k]);
  if (k == layers)
    return at; // past the last layer: nothing to copy or record
  bool repeats = true;
  for (auto &s : stacks)
    repeats &= s.repeats[k];
  if (repeats && done_ && done_->layer == k - 1 && done_->valid && copy(k)) {
    for (size_t r = 0; r < stacks.size(); ++r)
      at[r] = stacks[r].begin[k + 1];
    return at;
  }
  open(k);
  return at;
}

// Rank r's value of layer k standing where `value` stands in layer k-1.
int LayerCopy::counterpart(int r, int k, int value) const {
  const Graph &g = core.ranks[r];
  const LayerStack &s = stacks[r];
  int p = g.values[value].producer;
  if (!inBody(s, k - 1, p))
    return -1;
  const Node &n = g.nodes[s.body[k][s.position[p]]];
  int slot = g.values[value].producerSlot;
  return slot < static_cast<int>(n.outputs.size()) ? n.outputs[slot] : -1;
}

// Every input layer k reads from outside itself against layer k-1's.
bool LayerCopy::bindInputs(int k, Renaming &sigma) const {
  for (size_t r = 0; r < stacks.size(); ++r)
    for (auto [b, a] : stacks[r].outsideInputs[k])
      if (!unifyValues(rankValues[r][b], rankValues[r][a], sigma))
        return false;
  return true;
}

bool LayerCopy::copy(int k) {
  const Window &w = *done_;
  ClassTable &classes = core.classes;
  // The Constant nodes in layer k's span first: its body may read them (and
  // later layers may too). One the body reads where layer k-1's read one of
  // the same value (findLayerStack compared them) is that one's value:
  // constant classes are keyed by content. Any other is evaluated.
  for (size_t r = 0; r < stacks.size(); ++r) {
    const Graph &g = core.ranks[r];
    const LayerStack &s = stacks[r];
    llvm::SmallDenseSet<int, 64> set;
    for (auto [b, a] : s.outsideInputs[k]) {
      int p = g.values[a].producer;
      if (p < 0 || s.position[p] >= 0 || static_cast<size_t>(p) < s.begin[k] ||
          static_cast<size_t>(p) >= s.begin[k + 1] || g.values[b].producer < 0)
        continue; // not a Constant node of layer k's span
      rankValues[r][a] = rankValues[r][b]; // its data too: the same content (sameNode compared the tensors)
      set.insert(p);
    }
    for (size_t n : s.constants[k])
      if (!set.count(static_cast<int>(n)))
        if (auto e = nodes.eval(g, g.nodes[n], rankValues[r], static_cast<int>(r), obligations)) {
          llvm::consumeError(std::move(e)); // a rank node is never an error; the plain walk will say
          return false;
        }
  }
  Renaming sigma;
  if (!bindInputs(k, sigma))
    return false;
  // What the layer's evaluation consulted of the classes before it: the same
  // facts and definitions (up to sigma) for layer k's counterparts.
  std::vector<ClassId> before;
  for (ClassId c : w.consulted)
    if (c < w.firstClass)
      before.push_back(c);
  if (!extendRenaming(before, sigma, classes))
    return false;
  // The classes the layer created get images with the next ids, in order.
  struct Image {
    ClassId from;
    Term def;
    int rank, value; // the member that created it, in layer k
  };
  std::vector<Image> images;
  ClassId nextId = static_cast<ClassId>(classes.size());
  for (ClassId c = w.firstClass; c < w.endClass; ++c) {
    const ClassInfo &ci = classes.peek(c);
    if (ci.kind == ClassInfo::Constant) {
      if (!sigma.bind(c, c)) // keyed by content: layer k's constant nodes find it
        return false;
      continue;
    }
    if (ci.kind != ClassInfo::Compute || !ci.def || ci.members.empty() || !sigma.bind(c, nextId++))
      return false;
    images.push_back({c, nullptr, ci.members[0].rank, counterpart(ci.members[0].rank, k, ci.members[0].value)});
    if (images.back().value < 0)
      return false;
  }
  for (Image &im : images) {
    const ClassInfo &ci = classes.peek(im.from);
    im.def = sigma.apply(ci.def);
    std::vector<ClassId> reads;
    collectReads(ci.def, reads);
    bool readsNew = false;
    for (ClassId x : reads) {
      readsNew |= x >= w.firstClass;
      // The image's facts follow from those of what it reads (finiteness).
      if (x < w.firstClass && !sameClassFacts(classes.peek(x), classes.peek(sigma(x))))
        return false;
    }
    if (!readsNew && classes.find(im.def, ci.shape))
      return false; // hash-consing would merge it with an existing class
  }
  std::vector<int> counterparts; // of w.members, in order
  counterparts.reserve(w.members.size());
  for (const Member &m : w.members) {
    counterparts.push_back(counterpart(m.rank, k, m.value));
    if (counterparts.back() < 0)
      return false;
  }
  // Decided: layer k is layer k-1 renamed. The images, as internValue makes them.
  if (copied_ == 0) // the layers above will add about as many each
    classes.reserve(classes.size() + images.size() * static_cast<size_t>(layers - k + 1));
  for (const Image &im : images) {
    const ClassInfo &from = classes.peek(im.from);
    const Graph &g = core.ranks[im.rank];
    const Node &n = g.nodes[g.values[im.value].producer];
    ClassInfo ci;
    ci.kind = ClassInfo::Compute;
    ci.def = im.def;
    ci.shape = from.shape;
    ci.rank = im.rank;
    ci.node = n.name;
    ci.label = rankLabel(g.values[im.value].name, im.rank);
    ci.finite = from.finite; // what it reads has the facts its class's reads have (above)
    ClassId id = classes.addImage(std::move(ci));
    SP_CHECK(id == sigma(im.from), "layer copy: class images out of order");
  }
  Window nw;
  nw.layer = k;
  nw.firstClass = images.empty() ? static_cast<ClassId>(classes.size()) : sigma(images.front().from);
  nw.endClass = static_cast<ClassId>(classes.size());
  nw.members.reserve(w.members.size());
  for (size_t i = 0; i < w.members.size(); ++i) {
    const Member &m = w.members[i];
    ClassId c = sigma(m.cls);
    int v = counterparts[i];
    classes[c].join(m.rank, v);
    nw.members.push_back({c, m.rank, v});
  }
  for (const Image &im : images) {
    const ClassInfo &a = classes.peek(im.from), &b = classes.peek(sigma(im.from));
    SP_CHECK(a.rank == b.rank && a.finite == b.finite, "layer copy: an image's facts differ from its class's");
  }
  copyValues(k, sigma);
  unsigned count = 0;
  for (size_t r = 0; r < stacks.size(); ++r)
    count += static_cast<unsigned>(stacks[r].begin[k + 1] - stacks[r].begin[k]);
  for (ClassId c : w.consulted)
    nw.consulted.push_back(sigma(c));
  std::sort(nw.consulted.begin(), nw.consulted.end());
  nw.consulted.erase(std::unique(nw.consulted.begin(), nw.consulted.end()), nw.consulted.end());
  nw.failures = core.result.failures.size();
  nw.obligations = obligations.size();
  core.result.stats.rankNodes += count;
  ++copied_;
  if (maps_.size() <= static_cast<size_t>(k))
    maps_.resize(static_cast<size_t>(layers) + 1);
  maps_[k] = std::move(sigma);
  done_ = std::move(nw);
  return true;
}

void LayerCopy::copyValues(int k, const Renaming &sigma) {
  // The template: layer k-1 if it was evaluated, else layer k-1's template,
  // with the renaming to layer k-1 followed by sigma on each class its values
  // read (a class no renaming binds stays itself, as it would step by step).
  Source &src = sources_[k];
  const Source &below = sources_[k - 1];
  if (below.layer < 0) {
    src.layer = k - 1;
    src.map = sigma;
  } else {
    src.layer = below.layer;
    if (readsOf_ != below.layer) {
      readsOf_ = below.layer;
      llvm::DenseSet<ClassId> seen;
      templateReads_.clear();
      std::vector<ClassId> reads;
      for (size_t r = 0; r < stacks.size(); ++r)
        for (size_t n : stacks[r].body[below.layer])
          for (int o : core.ranks[r].nodes[n].outputs)
            if (const Term &t = rankValues[r][o].term) {
              reads.clear();
              collectReads(t, reads);
              for (ClassId c : reads)
                if (seen.insert(c).second)
                  templateReads_.push_back(c);
            }
    }
    for (ClassId c : templateReads_)
      if (ClassId to = sigma(below.map(c)); to != c)
        src.map.bind(c, to);
  }
  for (size_t r = 0; r < stacks.size(); ++r) {
    const Graph &g = core.ranks[r];
    for (size_t n : stacks[r].body[k])
      for (int o : g.nodes[n].outputs) {
        pending_[r][o] = k;
        if (readOutside_[r][o])
          make(static_cast<int>(r), o, k);
      }
  }
}

void LayerCopy::ensure(int rank, int value) {
  if (rank >= 0 && static_cast<size_t>(rank) < pending_.size() && value >= 0 &&
      static_cast<size_t>(value) < pending_[rank].size() && pending_[rank][value] >= 0)
    make(rank, value, pending_[rank][value]);
}

void LayerCopy::make(int r, int value, int k) {
  const Graph &g = core.ranks[r];
  const LayerStack &s = stacks[r];
  const Source &src = sources_[k];
  int p = g.values[value].producer;
  const Node &n = g.nodes[s.body[src.layer][s.position[p]]];
  const ValueInfo &from = rankValues[r][n.outputs[g.values[value].producerSlot]];
  ValueInfo &v = rankValues[r][value];
  v = from;
  if (from.term)
    v.term = src.map.apply(from.term);
  pending_[r][value] = -1;
}

} // namespace shardproof::relation
