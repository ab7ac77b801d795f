#include "Yaml.h"

#include <algorithm>
#include <charconv>

namespace shardproof::spec::detail {

SrcLoc YamlDoc::loc(const YAML::Mark &m) const {
  if (m.is_null())
    return SrcLoc{file, 0, 0};
  return SrcLoc{file, m.line + 1, m.column + 1};
}

SrcLoc YamlDoc::loc(const YAML::Node &n, const SrcLoc &fallback) const {
  if (!n.IsDefined() || n.IsNull() || n.Mark().is_null())
    return fallback;
  return loc(n.Mark());
}

SrcLoc YamlDoc::textLoc(const YAML::Node &n, const SrcLoc &fallback) const {
  SrcLoc l = loc(n, fallback);
  if (n.IsScalar() && !n.Mark().is_null()) {
    size_t pos = static_cast<size_t>(n.Mark().pos);
    if (pos < text.size() && (text[pos] == '"' || text[pos] == '\''))
      l.col += 1;
  }
  return l;
}

std::string kindOf(const YAML::Node &n) {
  if (!n.IsDefined() || n.IsNull())
    return "nothing";
  if (n.IsMap())
    return "a map";
  if (n.IsSequence())
    return "a list";
  return "'" + n.Scalar() + "'";
}

std::string joinOr(const std::vector<std::string> &xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i)
      s += i + 1 == xs.size() ? " or " : ", ";
    s += xs[i];
  }
  return s;
}

MapView::MapView(const YamlDoc &doc, const YAML::Node &node, const std::string &what,
                 const SrcLoc &fallback)
    : loc_(doc.loc(node, fallback)), what_(what) {
  if (!node.IsMap())
    fail(what + " must be a map, got " + kindOf(node), loc_);
  for (const auto &kv : node) {
    YAML::Node k = kv.first, v = kv.second;
    SrcLoc kl = doc.loc(k, loc_);
    if (!k.IsScalar())
      fail("keys of " + what + " must be plain names, got " + kindOf(k), kl);
    Entry e{k.Scalar(), v, kl, doc.loc(v, kl)};
    if (const Entry *prev = find(e.key))
      fail("duplicate key '" + e.key + "' in " + what + " (first given at line " +
               std::to_string(prev->keyLoc.line) + ")",
           kl);
    entries_.push_back(std::move(e));
  }
}

const MapView::Entry *MapView::find(const std::string &key) const {
  for (auto &e : entries_)
    if (e.key == key)
      return &e;
  return nullptr;
}

const MapView::Entry &MapView::require(const std::string &key) const {
  if (const Entry *e = find(key))
    return *e;
  fail(what_ + " is missing required key '" + key + "'", loc_);
}

void MapView::allowOnly(const std::vector<std::string> &allowed) const {
  for (auto &e : entries_) {
    if (std::find(allowed.begin(), allowed.end(), e.key) != allowed.end())
      continue;
    std::vector<std::string> quoted;
    for (auto &a : allowed)
      quoted.push_back("'" + a + "'");
    fail("unknown key '" + e.key + "' in " + what_ + didYouMean(e.key, allowed) +
             " (allowed keys: " + joinOr(quoted) + ")",
         e.keyLoc);
  }
}

std::string getString(const MapView::Entry &e, const std::string &what) {
  if (!e.value.IsScalar() || e.value.Scalar().empty())
    fail(what + " must be a string, got " + kindOf(e.value), e.valueLoc);
  return e.value.Scalar();
}

int64_t getInt(const YAML::Node &n, const SrcLoc &loc, const std::string &what) {
  if (n.IsScalar()) {
    const std::string &s = n.Scalar();
    // from_chars rejects a leading '+', which YAML allows for integers.
    size_t start = s.size() > 1 && s[0] == '+' && s[1] != '-' ? 1 : 0;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data() + start, s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size() && start < s.size())
      return v;
    if (ec == std::errc::result_out_of_range)
      fail(what + " is out of range: " + s, loc);
  }
  fail(what + " must be an integer, got " + kindOf(n), loc);
}

bool getBool(const MapView::Entry &e, const std::string &what) {
  if (e.value.IsScalar()) {
    std::string s = e.value.Scalar();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    if (s == "true" || s == "yes" || s == "on")
      return true;
    if (s == "false" || s == "no" || s == "off")
      return false;
  }
  fail(what + " must be true or false, got " + kindOf(e.value), e.valueLoc);
}

} // namespace shardproof::spec::detail
