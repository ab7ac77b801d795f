// Whole-layer reuse in the reference walk (LayerCopy.h): reference layer k is
// layer k-1's walk renamed when the conditions there hold.
#include "LayerCopy.h"
#include "Render.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <algorithm>
#include <cstdint>

namespace shardproof::relation {

using namespace ir;
using namespace layercopy;

ReferenceLayerCopy::ReferenceLayerCopy(CheckCore &core, NodeEvaluator &nodes, std::vector<ValueInfo> &refValues,
                                       std::vector<PendingObligation> &raised,
                                       const std::set<std::string> &checkpoints,
                                       const std::vector<std::optional<Renaming>> &rankMaps)
    : core(core), nodes(nodes), refValues(refValues), raised(raised), checkpoints(checkpoints),
      rankMaps(rankMaps) {
  if (!core.opts.memo)
    return;
  stack = findLayerStack(core.ref);
  active_ = stack.layers() >= 3;
  if (!active_)
    return;
  readOutside_ = readOutsideItsLayer(core.ref, stack);
  // The spec's claims read their tensors by name.
  for (const auto *group : {&core.spec.outputs, &core.spec.layers})
    for (const auto &[name, pl] : *group)
      if (auto id = core.ref.find(name))
        readOutside_[*id] = 1;
  pending_ = std::make_shared<PendingReference>(refValues, stack.layers());
}

void PendingReference::leave(int value, int source, int layer) {
  hasTerm_[value] = hasTerm(source);
  layer_[value] = layer;
  source_[value] = source;
  any_ = true;
}

void PendingReference::ensure(int value) {
  if (value < 0 || static_cast<size_t>(value) >= layer_.size() || layer_[value] < 0)
    return;
  // The chain down to a made value, then made upwards: each the one below
  // renamed by its layer's map, as the copies would have made them.
  llvm::SmallVector<int, 16> chain;
  for (int v = value; layer_[v] >= 0; v = source_[v])
    chain.push_back(v);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const int v = *it;
    ValueInfo made = values_[source_[v]];
    if (made.term)
      made.term = maps_[layer_[v]].apply(made.term);
    values_[v] = std::move(made);
    layer_[v] = -1;
  }
}

void PendingReference::ensureAll() {
  if (!any_)
    return;
  for (size_t v = 0; v < layer_.size(); ++v)
    ensure(static_cast<int>(v));
  any_ = false;
}

void ReferenceLayerCopy::open(int layer) {
  window_.emplace();
  Window &w = *window_;
  w.layer = layer;
  w.rows = core.result.rows.size();
  w.failures = core.result.failures.size();
  w.outputs = core.result.outputs.size();
  w.raised = raised.size();
  w.classes = core.classes.size();
  w.matches = core.result.stats.matches;
  rec_.emplace(core.classes);
}

void ReferenceLayerCopy::close() {
  if (!window_)
    return;
  Window &w = *window_;
  w.consulted = rec_->consulted();
  w.valid = !rec_->readDerivedCache();
  rec_.reset();
  w.rowsEnd = core.result.rows.size();
  w.matches = core.result.stats.matches - w.matches;
  w.valid = w.valid && clean(w);
  done_ = std::move(w);
  window_.reset();
}

bool ReferenceLayerCopy::clean(const Window &w) const {
  if (core.result.failures.size() != w.failures || core.result.outputs.size() != w.outputs ||
      core.classes.size() != w.classes)
    return false;
  for (size_t i = w.raised; i < raised.size(); ++i)
    if (raised[i].obl.cond.hasApp())
      return false;
  for (size_t i = w.rows; i < core.result.rows.size(); ++i) {
    const RelationRow &row = core.result.rows[i];
    if ((row.status != RelationRow::Matched && row.status != RelationRow::View) || checkpoints.count(row.tensor))
      return false;
  }
  for (size_t n = stack.begin[w.layer]; n < stack.begin[w.layer + 1]; ++n)
    for (int o : core.ref.nodes[n].outputs)
      if (checkpoints.count(core.ref.values[o].name) || !valueIsClean(refValues[o]))
        return false;
  return true;
}

llvm::Expected<size_t> ReferenceLayerCopy::atBoundary(const WalkFn &walk) {
  const int k = next++;
  close();
  if (k == stack.layers())
    return stack.begin[k];
  if (stack.repeats[k] && done_ && done_->layer == k - 1 && done_->valid) {
    auto copied = copy(k, walk);
    if (!copied)
      return copied.takeError();
    if (*copied)
      return stack.begin[k + 1];
  }
  open(k);
  return stack.begin[k];
}

llvm::Expected<bool> ReferenceLayerCopy::copy(int k, const WalkFn &walk) {
  const Graph &g = core.ref;
  const Window &w = *done_;
  // A checkpoint in layer k is a claim its own walk checks (Infer.cpp), so
  // that layer is walked: a copy would take it as proven.
  for (size_t n = stack.begin[k]; n < stack.begin[k + 1]; ++n)
    for (int o : g.nodes[n].outputs)
      if (checkpoints.count(g.values[o].name))
        return false;
  // Constant nodes of the span hold values the body may read: evaluated first
  // (walked, rows and all, in order below).
  for (size_t n = stack.begin[k]; n < stack.begin[k + 1]; ++n)
    if (stack.position[n] < 0)
      if (auto e = nodes.eval(g, g.nodes[n], refValues, -1, raised))
        return std::move(e);
  Renaming sigma;
  if (static_cast<size_t>(k) < rankMaps.size() && rankMaps[k])
    sigma = *rankMaps[k];
  for (size_t o = 0; o < stack.size(k); ++o) {
    const Node &nb = g.nodes[stack.body[k - 1][o]], &na = g.nodes[stack.body[k][o]];
    for (size_t i = 0; i < nb.inputs.size(); ++i) {
      int b = nb.inputs[i], a = na.inputs[i];
      if (b < 0 || inBody(stack, k - 1, g.values[b].producer))
        continue;
      if (!unifyValues(refValues[b], refValues[a], sigma))
        return false;
    }
  }
  if (!extendRenaming(w.consulted, sigma, core.classes))
    return false;
  const Renaming &map = pending_->setMap(k, std::move(sigma));
  // Decided. The span in graph order: Constant nodes walked, the body copied.
  // Row indices, not pointers: the rows vector grows below.
  llvm::DenseMap<int, size_t> rowOf;
  for (size_t i = w.rows; i < w.rowsEnd; ++i)
    if (auto id = g.find(core.result.rows[i].tensor))
      rowOf[*id] = i;
  size_t firstRow = core.result.rows.size();
  std::vector<std::optional<Window::RowText>> texts;
  for (size_t n = stack.begin[k]; n < stack.begin[k + 1]; ++n) {
    const Node &na = g.nodes[n];
    if (stack.position[n] < 0) {
      if (auto e = walk(na, /*evaluated=*/true)) // above, before the body was unified
        return std::move(e);
      continue;
    }
    const Node &nb = g.nodes[stack.body[k - 1][stack.position[n]]];
    ++core.result.stats.refNodes;
    for (size_t j = 0; j < nb.outputs.size(); ++j) {
      const int b = nb.outputs[j], a = na.outputs[j];
      if (readOutside_[a]) {
        pending_->ensure(b);
        const ValueInfo &vb = refValues[b];
        ValueInfo &va = refValues[a];
        va = vb;
        if (vb.term)
          va.term = map.apply(vb.term);
      } else {
        pending_->leave(a, b, k);
      }
      if (auto from = rowOf.find(b); from != rowOf.end()) {
        // Field by field (the source's relation text is not copied to be
        // replaced): a field added to RelationRow is a warning here.
        const RelationRow &source = core.result.rows[from->second];
        RelationRow row{g.values[a].name, na.name, source.op, na.modulePath(), {}, source.status};
        if (!pending_->hasTerm(a)) {
          row.relation = source.relation;
        } else {
          auto text = copiedText(w, from->second, b, map, texts, core.result.rows.size() - firstRow);
          if (!text)
            pending_->ensure(a); // rendered from its term
          row.relation = text ? std::move(*text) : core.render(refValues[a].term);
        }
        core.result.rows.push_back(std::move(row));
        ++core.result.stats.relations;
      }
    }
  }
  core.result.stats.matches += w.matches;
  Window nw;
  nw.layer = k;
  for (ClassId c : w.consulted)
    nw.consulted.push_back(map(c));
  std::sort(nw.consulted.begin(), nw.consulted.end());
  nw.consulted.erase(std::unique(nw.consulted.begin(), nw.consulted.end()), nw.consulted.end());
  nw.rows = firstRow;
  nw.rowsEnd = core.result.rows.size();
  nw.matches = w.matches;
  nw.texts = std::move(texts);
  ++copied_;
  done_ = std::move(nw);
  return true;
}

// Row `row` of window `w` (its tensor, value `from`) as the copy's text:
// its template filled with the renamed classes, recorded at `at` of `texts`
// for the next copy. A walked window's rows are made templates here once.
// nullopt (the caller renders) when sigma merges two of the classes or an
// image's facts differ: the rendering may then differ too.
std::optional<std::string> ReferenceLayerCopy::copiedText(const Window &w, size_t row, int from,
                                                          const Renaming &sigma,
                                                          std::vector<std::optional<Window::RowText>> &texts,
                                                          size_t at) {
  Window::RowText source;
  if (size_t i = row - w.rows; i < w.texts.size() && w.texts[i]) {
    source = *w.texts[i];
  } else {
    pending_->ensure(from);
    RenderTemplate t = renderTemplate(core.classes, refValues[from].term);
    source = {std::make_shared<const std::string>(std::move(t.text)), std::move(t.classes)};
  }
  Window::RowText out{source.text, {}};
  for (ClassId c : source.classes) {
    ClassId to = sigma(c); // a row reads a handful of classes: a linear search for a merged pair
    if (std::find(out.classes.begin(), out.classes.end(), to) != out.classes.end() ||
        !sameClassFacts(core.classes.peek(c), core.classes.peek(to)))
      return std::nullopt;
    out.classes.push_back(to);
  }
  std::string text = fillTemplate(*out.text, out.classes, core.classes);
  if (texts.size() <= at)
    texts.resize(at + 1);
  texts[at] = std::move(out);
  return text;
}

} // namespace shardproof::relation
