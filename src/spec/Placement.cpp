// Placements of reference inputs/outputs: `replicated`, `partial`,
// {shard: K, split: ..., sizes: [...]}, {replicated: true}, {partial: true},
// {relation: "..."} or a bare relation string; `as:` renames on the ranks.
#include "Lexer.h"
#include "Yaml.h"

#include <algorithm>
#include <climits>

namespace shardproof::spec::detail {
namespace {

const std::vector<std::string> kPlacementKeys = {"shard",   "split",    "sizes", "pad_to_multiple", "replicated",
                                                 "partial", "relation", "as",    "values",
                                                 "value",   "fill",     "each",  "elements"};
const std::vector<std::string> kKindKeys = {"shard", "replicated", "partial", "relation"};
const std::vector<std::string> kSplits = {"even", "chunk", "tensor_split", "sizes", "pad_to_multiple"};

Placement fromScalar(const YamlDoc &doc, const MapView::Entry &e, const std::string &what,
                     int worldSize, const SymbolTable &syms) {
  Placement p;
  p.loc = e.valueLoc;
  const std::string &s = e.value.Scalar();
  if (s == "replicated") {
    p.kind = Placement::Kind::Replicated;
    return p;
  }
  if (s == "partial") {
    p.kind = Placement::Kind::Partial;
    return p;
  }
  if (s == "shard")
    fail(what + ": 'shard' needs an axis; write {shard: K}", e.valueLoc);
  // `shardproof init` writes TODO where it could not guess: never a default.
  if (s == "TODO")
    fail(what + " is still TODO (drafted by shardproof init): replace TODO with its placement (replicated, "
                "partial, {shard: K} or a relation; the comment on that line says what could not be guessed)",
         e.valueLoc);
  // A lone word cannot be a relation (those need '@' or a call): treat it as a typo.
  if (isIdentifier(s))
    fail("unknown placement '" + s + "' for " + what +
             didYouMean(s, {"replicated", "partial", "shard"}) +
             " (expected replicated, partial, {shard: K} or a relation such as 'sum(" + e.key +
             "@*)')",
         e.valueLoc);
  p.kind = Placement::Kind::Relation;
  p.relation = parseRelationOrThrow(s, worldSize, syms, doc.textLoc(e.value, e.valueLoc));
  return p;
}

void readSizes(const YamlDoc &doc, const MapView::Entry &e, const std::string &what,
               int worldSize, const SymbolTable &syms, Placement &p) {
  if (!e.value.IsSequence())
    fail(what + ": 'sizes' must be a list with one size per rank, got " + kindOf(e.value),
         e.valueLoc);
  if (static_cast<int>(e.value.size()) != worldSize)
    fail(what + ": 'sizes' has " + std::to_string(e.value.size()) +
             " entries but world_size is " + std::to_string(worldSize),
         e.valueLoc);
  for (const YAML::Node &item : e.value) {
    SrcLoc l = doc.loc(item, e.valueLoc);
    if (!item.IsScalar())
      fail(what + ": each entry of 'sizes' must be an integer expression, got " + kindOf(item),
           l);
    p.sizes.push_back(parseIntExprOrThrow(item.Scalar(), syms, doc.textLoc(item, l)));
  }
}

// The one kind key a placement gives (shard, replicated, partial, relation),
// in document order; two is an error at the second.
const MapView::Entry *kindKeyOf(const MapView &m, const std::string &what) {
  const MapView::Entry *kindKey = nullptr;
  for (auto &entry : m.entries()) {
    if (std::find(kKindKeys.begin(), kKindKeys.end(), entry.key) == kKindKeys.end())
      continue;
    if (kindKey)
      fail(what + " gives both '" + kindKey->key + "' and '" + entry.key + "'; choose one", entry.keyLoc);
    kindKey = &entry;
  }
  return kindKey;
}

// The one value-binding key (value, fill, each, elements), if any.
const MapView::Entry *bindKeyOf(const MapView &m, const std::string &what) {
  const MapView::Entry *bindKey = nullptr;
  for (const char *b : {"value", "fill", "each", "elements"})
    if (const auto *x = m.find(b)) {
      if (bindKey)
        fail(what + " gives both '" + bindKey->key + "' and '" + x->key + "'; choose one", x->keyLoc);
      bindKey = x;
    }
  return bindKey;
}

void onlyForShards(const MapView &m, const std::string &what) {
  for (const char *only : {"split", "sizes", "pad_to_multiple"})
    if (const auto *x = m.find(only))
      fail(what + ": '" + only + "' only applies to {shard: K} placements", x->keyLoc);
}

// {min: A, max: B} (inclusive integer expressions), for 'each' and 'values'.
std::pair<smt::Expr, smt::Expr> minMax(const YamlDoc &doc, const MapView::Entry &entry, const std::string &what,
                                       const SymbolTable &syms) {
  const std::string label = what + ": '" + entry.key + "'";
  MapView vm(doc, entry.value, label, entry.keyLoc);
  vm.allowOnly({"min", "max"});
  const auto *lo = vm.find("min");
  const auto *hi = vm.find("max");
  if (!lo || !hi)
    fail(label + " needs both 'min' and 'max' (inclusive integer expressions)", entry.valueLoc);
  auto bound = [&](const MapView::Entry &b) {
    if (!b.value.IsScalar())
      fail(label + " bounds must be integer expressions, got " + kindOf(b.value), b.valueLoc);
    return parseIntExprOrThrow(b.value.Scalar(), syms, doc.textLoc(b.value, b.valueLoc));
  };
  return std::make_pair(bound(*lo), bound(*hi));
}

// A 1-D tensor given element by element (cu_seqlens: [0, s1, s1 + s2]).
void readElements(const YamlDoc &doc, const MapView::Entry &key, const std::string &what, const SymbolTable &syms,
                  Placement &p) {
  if (!key.value.IsSequence() || key.value.size() == 0)
    fail(what + ": 'elements' must be a non-empty list of integer expressions, one per element, got " +
             kindOf(key.value),
         key.valueLoc);
  if (key.value.size() > 64)
    fail(what + ": 'elements' lists " + std::to_string(key.value.size()) +
             " values; at most 64 are supported (use 'each' for larger tensors)",
         key.valueLoc);
  for (const YAML::Node &item : key.value) {
    SrcLoc l = doc.loc(item, key.valueLoc);
    if (!item.IsScalar())
      fail(what + ": each entry of 'elements' must be an integer expression, got " + kindOf(item), l);
    p.elements.push_back(parseIntExprOrThrow(item.Scalar(), syms, doc.textLoc(item, l)));
  }
  p.values = std::make_pair(p.elements[0], p.elements[0]);
  p.exactValue = true;
}

// Value bindings (sizes passed as data): replicated integer inputs whose
// elements are given by the spec.
Placement valueBinding(const YamlDoc &doc, const MapView &m, const MapView::Entry &bindKey,
                       const MapView::Entry *kindKey, const std::string &what, const SymbolTable &syms,
                       const SrcLoc &loc) {
  if (kindKey && kindKey->key != "replicated")
    fail(what + ": '" + bindKey.key + "' binds a replicated integer input; it cannot be combined with '" +
             kindKey->key + "'",
         bindKey.keyLoc);
  if (const auto *v = m.find("values"))
    fail(what + ": '" + bindKey.key + "' already gives the values; drop 'values'", v->keyLoc);
  onlyForShards(m, what);
  Placement p;
  p.loc = loc;
  p.kind = Placement::Kind::Replicated;
  p.valueBinding = true;
  if (bindKey.key == "each") {
    p.values = minMax(doc, bindKey, what, syms);
  } else if (bindKey.key == "elements") {
    readElements(doc, bindKey, what, syms, p);
  } else {
    if (!bindKey.value.IsScalar())
      fail(what + ": '" + bindKey.key + "' must be an integer expression over symbols, got " +
               kindOf(bindKey.value),
           bindKey.valueLoc);
    smt::Expr v = parseIntExprOrThrow(bindKey.value.Scalar(), syms, doc.textLoc(bindKey.value, bindKey.valueLoc));
    p.values = std::make_pair(v, v);
    p.exactValue = true;
  }
  if (const auto *as = m.find("as"))
    p.as = getString(*as, what + ": 'as'");
  return p;
}

// 'split: NAME' and the keys each policy needs or excludes.
void readSplitPolicy(const MapView &m, const MapView::Entry &split, const std::string &what, Placement &p) {
  const auto *sizes = m.find("sizes");
  std::string s = getString(split, what + ": 'split'");
  if (s == "even")
    p.split = Placement::Split::Even;
  else if (s == "chunk")
    p.split = Placement::Split::Chunk;
  else if (s == "tensor_split")
    p.split = Placement::Split::TensorSplit;
  else if (s == "sizes")
    p.split = Placement::Split::Sizes;
  else if (s == "pad_to_multiple")
    p.split = Placement::Split::PadToMultiple;
  else
    fail(what + ": unknown split '" + s + "'" + didYouMean(s, kSplits) +
             " (expected even, chunk, tensor_split, a 'sizes' list or 'pad_to_multiple: M')",
         split.valueLoc);
  if (sizes && p.split != Placement::Split::Sizes)
    fail(what + ": 'split: " + s + "' conflicts with 'sizes'", split.valueLoc);
  if (!sizes && p.split == Placement::Split::Sizes)
    fail(what + ": 'split: sizes' needs a 'sizes' list", split.valueLoc);
  if (p.split == Placement::Split::PadToMultiple && !m.find("pad_to_multiple"))
    fail(what + ": 'split: pad_to_multiple' needs 'pad_to_multiple: M'", split.valueLoc);
  if (m.find("pad_to_multiple") && p.split != Placement::Split::PadToMultiple)
    fail(what + ": 'split: " + s + "' conflicts with 'pad_to_multiple'", split.valueLoc);
}

// {shard: K} with its split policy (split, sizes, pad_to_multiple).
void readShard(const YamlDoc &doc, const MapView &m, const MapView::Entry &kindKey, const std::string &what,
               int worldSize, const SymbolTable &syms, Placement &p) {
  p.kind = Placement::Kind::Shard;
  int64_t axis = getInt(kindKey, what + ": 'shard' (the axis)");
  if (axis < INT_MIN || axis > INT_MAX)
    fail(what + ": shard axis " + std::to_string(axis) + " is out of range", kindKey.valueLoc);
  p.axis = static_cast<int>(axis); // negative axes are kept; the checker normalises them
  const auto *sizes = m.find("sizes");
  if (const auto *split = m.find("split"))
    readSplitPolicy(m, *split, what, p);
  if (const auto *pad = m.find("pad_to_multiple")) {
    if (sizes)
      fail(what + ": 'pad_to_multiple' conflicts with 'sizes'", pad->keyLoc);
    if (!pad->value.IsScalar())
      fail(what + ": 'pad_to_multiple' must be an integer expression, got " + kindOf(pad->value), pad->valueLoc);
    p.split = Placement::Split::PadToMultiple;
    p.padMultiple = parseIntExprOrThrow(pad->value.Scalar(), syms, doc.textLoc(pad->value, pad->valueLoc));
  }
  if (sizes) {
    p.split = Placement::Split::Sizes;
    readSizes(doc, *sizes, what, worldSize, syms, p);
  }
}

Placement fromMap(const YamlDoc &doc, const MapView::Entry &e, const std::string &what,
                  int worldSize, const SymbolTable &syms) {
  MapView m(doc, e.value, "placement of " + what, e.keyLoc);
  m.allowOnly(kPlacementKeys);
  const MapView::Entry *kindKey = kindKeyOf(m, what);
  if (const MapView::Entry *bindKey = bindKeyOf(m, what))
    return valueBinding(doc, m, *bindKey, kindKey, what, syms, e.valueLoc);
  if (!kindKey)
    fail(what + " needs one of 'shard', 'replicated', 'partial' or 'relation' (integer inputs may "
                "instead bind their values with 'value', 'fill', 'each' or 'elements')",
         m.loc());

  Placement p;
  p.loc = e.valueLoc;
  const std::string &k = kindKey->key;
  if (k != "shard")
    onlyForShards(m, what);
  if (k == "shard") {
    readShard(doc, m, *kindKey, what, worldSize, syms, p);
  } else if (k == "replicated" || k == "partial") {
    if (!getBool(*kindKey, what + ": '" + k + "'"))
      fail(what + ": '" + k + ": false' is not a placement; use 'replicated', 'partial', "
                  "{shard: K} or a relation",
           kindKey->valueLoc);
    p.kind = k == "replicated" ? Placement::Kind::Replicated : Placement::Kind::Partial;
  } else {
    p.kind = Placement::Kind::Relation;
    std::string text = getString(*kindKey, what + ": 'relation'");
    p.relation = parseRelationOrThrow(text, worldSize, syms, doc.textLoc(kindKey->value, kindKey->valueLoc));
  }
  if (const auto *values = m.find("values"))
    p.values = minMax(doc, *values, what, syms);
  if (const auto *as = m.find("as")) {
    // A relation already names its rank tensors, so a rename would be ignored.
    if (p.kind == Placement::Kind::Relation)
      fail(what + ": 'as' cannot be combined with 'relation'; name the rank tensors in the "
                  "relation itself",
           as->keyLoc);
    p.as = getString(*as, what + ": 'as'");
  }
  return p;
}

} // namespace

Placement parsePlacement(const YamlDoc &doc, const MapView::Entry &e, const std::string &side,
                         int worldSize, const SymbolTable &syms) {
  std::string what = side + " '" + e.key + "'";
  if (e.value.IsMap())
    return fromMap(doc, e, what, worldSize, syms);
  if (e.value.IsScalar() && !e.value.Scalar().empty())
    return fromScalar(doc, e, what, worldSize, syms);
  fail(what + " needs a placement (replicated, partial, {shard: K} or a relation), got " +
           kindOf(e.value),
       e.valueLoc);
}

} // namespace shardproof::spec::detail
