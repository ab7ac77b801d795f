// What the --html page shows, before any markup: the reference's module tree
// built from the relation rows (counts by status, failures, repeated layers
// compared up to their number) and the rank graphs' collectives matched
// across ranks and grouped by layer. Html.cpp renders it.
#pragma once

#include "shardproof/report/Report.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace shardproof::report::html {

constexpr int kStatuses = 5; // values of RelationRow::Status
/// The status as the JSON report spells it ("input", "matched", "view",
/// "unmatched", "unsupported").
const char *statusKey(int status);
/// The status as a reader says it ("no relation" for unmatched).
const char *statusLabel(int status);

struct ModNode {
  std::string name; // last path component ("attn", "3"); "" for the root
  std::string path; // module path ("blocks.3.attn"); "" for the root
  const ModNode *parent = nullptr;
  std::vector<std::unique_ptr<ModNode>> children; // in graph order of their first row
  std::vector<size_t> rows;                       // Result::rows whose module is `path`
  std::array<unsigned, kStatuses> counts{};       // rows of the whole subtree, by status
  std::vector<size_t> failures; // Result::failures at a node of this module (the root: top-level nodes)
  unsigned subtreeFailures = 0;
  bool firstFailure = false;                     // the first failure at a node or module is here
  bool holdsFirstFailure = false;                // ... here or below
  bool leadsToLayers = false;                    // not a layer, and layers sit below it
  long layer = -1;                               // a numeric name ("layers.3"): 3
  const ModNode *sameAs = nullptr;               // an earlier layer with the same rows up to the number
  std::vector<std::string> collectiveOps;        // one per collective of the rank graphs here
  std::vector<std::string> subtreeCollectiveOps; // ... here or below
  unsigned total() const;
  /// "blocks.3" for a layer (its parent's name and number), else the name.
  std::string label() const;
};

/// One collective across the ranks: the i-th collective of a module on each
/// rank that has an i-th one.
struct CollectiveBar {
  std::string module, op;
  std::vector<int> ranks;         // ranks taking part, ascending
  std::vector<std::string> nodes; // node name per rank in `ranks`
  bool mixedOps = false;          // the ranks disagree on the op type
};

struct CollectiveGroup {
  std::string unit; // the layer holding the collectives ("blocks.3"), else their top-level module
  long layer = -1;  // the layer's number, if `unit` is a layer
  std::vector<CollectiveBar> bars;
  int sameAs = -1; // an earlier group whose bars are the same up to the layer number
};

std::vector<CollectiveGroup> groupCollectives(const Context &ctx);

/// The tree of every row's module (and every failure's), counts filled in,
/// each layer compared with the earlier layers under the same parent, and the
/// collectives of `groups` attached to their modules.
std::unique_ptr<ModNode> buildTree(const relation::Result &r, const std::vector<CollectiveGroup> &groups);

/// `s` with every `<name>.<K>` (a layer K of the module `name`) rewritten
/// relative to layer `k`, as `<name>.{K-k}`: tensor names and relations of
/// two layers compare equal when they differ only in the layer number. An
/// empty `name` (layers at the top level) matches `/K/` only.
std::string relativeToLayer(const std::string &s, const std::string &name, long k);

/// The page's inline style sheet and script (HtmlAssets.cpp).
extern const char *const kStyle;
extern const char *const kScript;

} // namespace shardproof::report::html
