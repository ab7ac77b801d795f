// Internal: whole-layer reuse in the rank world (Ranks.cpp).
//
// A 126-layer model's layers are one layer 126 times. Evaluating layer k's
// nodes one by one, even as memo hits (NodeMemo.h), costs about what loading
// them cost. LayerCopy instead takes layer k as layer k-1 renamed: every
// rank value of layer k gets layer k-1's counterpart's term with its classes
// renamed by sigma, and every class layer k-1 created gets its image, the
// renamed definition.
//
// Why that is what evaluating layer k would give. Evaluation is a function of
// a node's operator and attributes, its inputs' values, and the facts of the
// classes it consults (NodeMemo.h argues it; the memo already relies on it
// node by node). Layer k is a copy only when:
//  - on every rank, ir::findLayerStack says layer k is layer k-1 node for
//    node, wired alike (Layers.h);
//  - every input layer k reads from outside itself has the value of the one
//    layer k-1 read, up to sigma: same shape, type, integer values and data,
//    the term equal but for classes, which bind sigma;
//  - sigma extends to every class layer k-1's evaluation consulted (recorded
//    for the whole layer, memo hits included), with the same facts and
//    definitions up to sigma (extendRenaming), and nothing in the layer read
//    a cache the recording cannot see;
//  - no image of a created class is already in the table (hash-consing
//    would have merged it: the evaluation would differ);
//  - the layer raised no failure, has no value without an element map, and
//    no expression of it names a class (a data-dependent read: sigma does not
//    rename inside expressions).
// Its side conditions are layer k-1's formulas again (shapes do not name
// classes), so they are not raised twice. Anything else: the layer is
// evaluated node by node, as before.
//
// A copied layer's values are made from the last layer evaluated node by
// node (its template), renamed by the composed renamings of the copies since:
// the same terms as renaming layer k-1's, one step at a time. Only the values
// something outside the layer reads (the next layer, the LM end, a graph
// output) are made with the copy; the rest when first read (ensure), which
// the reference walk rarely does: of a 126-layer forward's 288,000 copied
// values, 1,000 leave their layer.
#pragma once

#include "Core.h"
#include "NodeEval.h"
#include "NodeMemo.h"
#include "Pending.h"

#include "shardproof/ir/Layers.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardproof::relation {

namespace layercopy {
/// Node p is in layer k's body.
bool inBody(const ir::LayerStack &s, int k, int p);
/// `b` and `a` equal up to renaming their classes by sigma (extended as it goes).
bool unifyValues(const ValueInfo &b, const ValueInfo &a, Renaming &sigma);
/// Nothing of `v` that a renaming of classes would not carry over.
bool valueIsClean(const ValueInfo &v);
/// Per value of `g`: made in a layer's body and read by a node outside that
/// body (the next layer, the model's end), or a graph output.
std::vector<char> readOutsideItsLayer(const ir::Graph &g, const ir::LayerStack &s);
} // namespace layercopy

class LayerCopy : public PendingValues {
public:
  LayerCopy(CheckCore &core, NodeEvaluator &nodes, std::vector<std::vector<ValueInfo>> &rankValues,
            std::vector<PendingObligation> &obligations);

  /// Where rank r must stop and wait for the others: the first node of the
  /// next layer whose start matters (SIZE_MAX: none left).
  size_t stopAt(int r) const;
  /// Called when every rank stands at its stopAt: ends the layer recorded so
  /// far and copies the next if it can. Returns the node each rank goes on from.
  std::vector<size_t> atBoundary();
  /// The ranks could not all reach the boundary together (their collectives
  /// fall elsewhere): no more copies.
  void abandon();
  bool active() const { return active_; }
  /// internValue's record of a rank value becoming a member of class c.
  void noteMember(ClassId c, int rank, int value) {
    if (window_)
      window_->members.push_back({c, rank, value});
  }
  unsigned copied() const { return copied_; }
  /// Per layer copied, the renaming of layer k-1's classes to layer k's.
  std::vector<std::optional<Renaming>> takeMaps() { return std::move(maps_); }
  void ensure(int rank, int value) override;

private:
  struct Member {
    ClassId cls;
    int rank, value;
  };
  /// What evaluating (or copying) one layer did, for copying the next.
  struct Window {
    Window() {} // user-provided: clang does not see the initializers below while LayerCopy is incomplete
    int layer = -1;
    ClassId firstClass = 0, endClass = 0; // the classes it created
    std::vector<ClassId> consulted;       // ascending
    std::vector<Member> members;          // in the order internValue added them
    size_t failures = 0, obligations = 0; // counts when it began
    bool valid = true;
  };
  void open(int layer);
  void close();
  bool copy(int k);
  bool bindInputs(int k, Renaming &sigma) const;
  bool layerIsClean(const Window &w) const;
  int counterpart(int r, int k, int value) const;
  /// Layer k's values, from its template: made (read outside the layer) or
  /// left pending.
  void copyValues(int k, const Renaming &sigma);
  void make(int r, int value, int k);

  CheckCore &core;
  NodeEvaluator &nodes;
  std::vector<std::vector<ValueInfo>> &rankValues;
  std::vector<PendingObligation> &obligations;
  std::vector<ir::LayerStack> stacks;
  int layers = 0;
  int next = 1; // the boundary the ranks walk towards: the start of layer `next`
  bool active_ = false;
  std::optional<Window> window_, done_; // the layer being evaluated; the last one finished
  std::optional<ClassTable::Recording> rec_; // window_'s
  std::vector<std::optional<Renaming>> maps_;
  unsigned copied_ = 0;
  /// Per rank, per value: a body value some node outside its layer reads, or
  /// a graph output.
  std::vector<std::vector<char>> readOutside_;
  /// Per rank, per value: the copied layer whose value it is, while pending.
  std::vector<std::vector<int>> pending_;
  /// Per copied layer: the layer evaluated node by node that its values come
  /// from, and the renaming of that layer's classes to its own.
  struct Source {
    int layer = -1;
    Renaming map;
  };
  std::vector<Source> sources_;
  int readsOf_ = -1;                   // the template whose reads are below
  std::vector<ClassId> templateReads_; // the classes its body values read
};

/// Reference values a layer copy leaves to be made when first read (as
/// LayerCopy leaves rank values): a copied layer's values are the layer
/// below's renamed by the copy's map, and only those something outside the
/// layer reads (the next layer, the model's end, a graph output, a spec
/// claim) are made with the copy. The rows need none of them: their texts
/// are filled templates. Replay reads every value of the graph, so the
/// witness phase asks for all of them first (Claims, Sample).
class PendingReference {
public:
  PendingReference(std::vector<ValueInfo> &values, int layers)
      : values_(values), layer_(values.size(), -1), source_(values.size(), -1), hasTerm_(values.size(), 0),
        maps_(static_cast<size_t>(std::max(layers, 0)) + 1) {}
  /// Layer k's renaming of layer k-1's classes, kept for the values it leaves.
  const Renaming &setMap(int layer, Renaming sigma) { return maps_[layer] = std::move(sigma); }
  /// Value `value` of copied layer `layer` is `source` (of layer - 1) renamed, once read.
  void leave(int value, int source, int layer);
  /// Whether `value` has an element term, without making it.
  bool hasTerm(int value) const { return layer_[value] >= 0 ? hasTerm_[value] : values_[value].term != nullptr; }
  /// Makes `value` if it was left (and the values below it it is made from).
  void ensure(int value);
  void ensureAll();

private:
  std::vector<ValueInfo> &values_;
  std::vector<int> layer_, source_; // per value: the copied layer it waits in (-1: made), its source
  std::vector<char> hasTerm_;
  std::vector<Renaming> maps_; // per layer
  bool any_ = false;
};

/// The same for the reference walk (RefLayerCopy.cpp): reference layer k
/// taken as layer k-1 renamed, its values' terms (over rank classes) and
/// relation rows the layer below's with the classes renamed. The conditions
/// are LayerCopy's, over the reference graph: the layer's inputs from outside
/// unify, the classes its walk consulted extend the renaming with the same
/// facts, and the walk of layer k-1 was clean: every tensor matched or a
/// view, no failure, no class made, no checkpoint, no claim, nothing read
/// through a cache the recording cannot see. Layer k holds no checkpoint
/// either (its claim is checked where the walk computes it). Its Constant
/// nodes are walked as any node.
class ReferenceLayerCopy {
public:
  /// Walks a node; `evaluated`: the copy evaluated it already (a Constant
  /// node the body may read), so only its rows are left.
  using WalkFn = std::function<llvm::Error(const ir::Node &, bool evaluated)>;
  /// `rankMaps`: the rank world's renamings per copied layer (LayerCopy),
  /// where the reference layer's renaming starts (each binding is checked
  /// like any other: only what the walk consulted matters).
  ReferenceLayerCopy(CheckCore &core, NodeEvaluator &nodes, std::vector<ValueInfo> &refValues,
                     std::vector<PendingObligation> &raised, const std::set<std::string> &checkpoints,
                     const std::vector<std::optional<Renaming>> &rankMaps);

  /// The node where the walk must call atBoundary (SIZE_MAX: none).
  size_t stopAt() const { return active_ && next <= stack.layers() ? stack.begin[next] : SIZE_MAX; }
  /// Ends the layer recorded so far and copies the next if it can (walking
  /// its Constant nodes with `walk`). Returns the node the walk goes on from.
  llvm::Expected<size_t> atBoundary(const WalkFn &walk);
  unsigned copied() const { return copied_; }
  /// The values the copies left (null without copies): for every reader of
  /// reference values other than the walk.
  std::shared_ptr<PendingReference> pending() const { return pending_; }

private:
  struct Window {
    Window() {} // as LayerCopy::Window
    int layer = -1;
    std::vector<ClassId> consulted;
    size_t rows = 0, rowsEnd = 0, failures = 0, outputs = 0, raised = 0, classes = 0;
    unsigned matches = 0;
    bool valid = true;
    /// A copied window's row texts as templates (shared by every copy) and
    /// the classes that fill them, by row - rows; empty for a walked one.
    struct RowText {
      std::shared_ptr<const std::string> text;
      std::vector<ClassId> classes;
    };
    std::vector<std::optional<RowText>> texts;
  };
  std::optional<std::string> copiedText(const Window &w, size_t row, int from, const Renaming &sigma,
                                        std::vector<std::optional<Window::RowText>> &texts, size_t at);
  void open(int layer);
  void close();
  bool clean(const Window &w) const;
  llvm::Expected<bool> copy(int k, const WalkFn &walk);

  CheckCore &core;
  NodeEvaluator &nodes;
  std::vector<ValueInfo> &refValues;
  std::vector<PendingObligation> &raised;
  const std::set<std::string> &checkpoints;
  const std::vector<std::optional<Renaming>> &rankMaps;
  ir::LayerStack stack;
  int next = 1;
  bool active_ = false;
  std::optional<Window> window_, done_;
  std::optional<ClassTable::Recording> rec_;
  unsigned copied_ = 0;
  std::vector<char> readOutside_; // per value: made with its layer's copy
  std::shared_ptr<PendingReference> pending_;
};

} // namespace shardproof::relation
