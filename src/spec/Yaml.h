// Private to src/spec: thin helpers over yaml-cpp that check types and keys and
// attach file:line:col to every failure (thrown as ParseFailure).
#pragma once

#include "Internal.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardproof::spec::detail {

/// The document being read: its name for messages and its text, which tells a
/// quoted scalar from a plain one so that expression columns line up.
struct YamlDoc {
  std::string file;
  std::string text;

  SrcLoc loc(const YAML::Mark &m) const;
  /// Where `n` is; null nodes (`key:` with nothing after it) report `fallback`.
  SrcLoc loc(const YAML::Node &n, const SrcLoc &fallback) const;
  /// Where the characters of scalar `n` begin (after an opening quote).
  SrcLoc textLoc(const YAML::Node &n, const SrcLoc &fallback) const;
};

/// A YAML map read in document order, with duplicate keys rejected (yaml-cpp
/// itself keeps every pair and lets lookups see only one of them).
class MapView {
public:
  struct Entry {
    std::string key;
    YAML::Node value;
    SrcLoc keyLoc;
    SrcLoc valueLoc; // falls back to keyLoc for null values
  };

  /// `what` names the map in messages ("implementation", "symbol 'seq'").
  MapView(const YamlDoc &doc, const YAML::Node &node, const std::string &what,
          const SrcLoc &fallback);

  const Entry *find(const std::string &key) const;
  const Entry &require(const std::string &key) const;
  /// Fails on the first key not in `allowed`, suggesting the closest ones.
  void allowOnly(const std::vector<std::string> &allowed) const;

  const std::vector<Entry> &entries() const { return entries_; }
  const SrcLoc &loc() const { return loc_; }
  const std::string &what() const { return what_; }

private:
  std::vector<Entry> entries_;
  SrcLoc loc_;
  std::string what_;
};

/// Human-readable YAML kind of a node: "a map", "a list", "a string", "nothing".
std::string kindOf(const YAML::Node &n);

std::string getString(const MapView::Entry &e, const std::string &what);
int64_t getInt(const YAML::Node &n, const SrcLoc &loc, const std::string &what);
inline int64_t getInt(const MapView::Entry &e, const std::string &what) {
  return getInt(e.value, e.valueLoc, what);
}
bool getBool(const MapView::Entry &e, const std::string &what);

/// "a, b or c" for messages.
std::string joinOr(const std::vector<std::string> &xs);

/// Reads the placement of one reference input or output (Placement.cpp).
/// `side` is "input" or "output"; `syms` resolves names in relations and sizes.
Placement parsePlacement(const YamlDoc &doc, const MapView::Entry &e, const std::string &side,
                         int worldSize, const SymbolTable &syms);

} // namespace shardproof::spec::detail
