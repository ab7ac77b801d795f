// The --html page's model: module tree, layer folding, collectives by layer.
#include "HtmlModel.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace shardproof::report::html {

using namespace relation;

const char *statusKey(int status) {
  static const char *keys[kStatuses] = {"input", "matched", "view", "unmatched", "unsupported"};
  return status >= 0 && status < kStatuses ? keys[status] : "?";
}

const char *statusLabel(int status) {
  static const char *labels[kStatuses] = {"input", "matched", "view", "no relation", "unsupported"};
  return status >= 0 && status < kStatuses ? labels[status] : "?";
}

unsigned ModNode::total() const {
  unsigned n = 0;
  for (unsigned c : counts)
    n += c;
  return n;
}

std::string ModNode::label() const {
  if (layer >= 0 && parent && !parent->name.empty())
    return parent->name + "." + name;
  return path.empty() ? "(model)" : name;
}

namespace {

bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

// Layer numbers beyond this many digits are names, not layers (and would
// overflow a long).
constexpr size_t kMaxDigits = 15;

bool isNumber(const std::string &s) {
  return !s.empty() && s.size() <= kMaxDigits && std::all_of(s.begin(), s.end(), digit);
}

struct TreeBuilder {
  std::unique_ptr<ModNode> root = std::make_unique<ModNode>();
  std::map<std::string, ModNode *> byPath{{"", root.get()}};

  ModNode *get(const std::string &path) {
    auto it = byPath.find(path);
    if (it != byPath.end())
      return it->second;
    size_t dot = path.rfind('.');
    ModNode *parent = dot == std::string::npos ? root.get() : get(path.substr(0, dot));
    auto n = std::make_unique<ModNode>();
    n->name = dot == std::string::npos ? path : path.substr(dot + 1);
    n->path = path;
    n->parent = parent;
    if (isNumber(n->name))
      n->layer = std::stol(n->name);
    ModNode *raw = n.get();
    parent->children.push_back(std::move(n));
    byPath[path] = raw;
    return raw;
  }
};

void sumUp(ModNode &n, const Result &r) {
  for (size_t i : n.rows)
    ++n.counts[r.rows[i].status];
  n.subtreeFailures = n.failures.size();
  n.holdsFirstFailure = n.firstFailure;
  n.subtreeCollectiveOps = n.collectiveOps;
  for (auto &c : n.children) {
    sumUp(*c, r);
    for (int s = 0; s < kStatuses; ++s)
      n.counts[s] += c->counts[s];
    n.subtreeFailures += c->subtreeFailures;
    n.holdsFirstFailure |= c->holdsFirstFailure;
    n.leadsToLayers |= c->layer >= 0 || c->leadsToLayers;
    n.subtreeCollectiveOps.insert(n.subtreeCollectiveOps.end(), c->subtreeCollectiveOps.begin(),
                                  c->subtreeCollectiveOps.end());
  }
  if (n.layer >= 0)
    n.leadsToLayers = false;
}

// Everything that must agree for two layers to be "the same up to the
// number": modules relative to the layer, and per row op, status, tensor,
// node and relation with layer numbers made relative.
void signature(const ModNode &n, const ModNode &layer, const Result &r, std::string &out) {
  const std::string &stack = layer.parent ? layer.parent->name : std::string();
  out += "{" + n.path.substr(layer.path.size()) + "\n";
  for (size_t i : n.rows) {
    const RelationRow &row = r.rows[i];
    out += row.op + '\t' + statusKey(row.status) + '\t' + relativeToLayer(row.tensor, stack, layer.layer) + '\t' +
           relativeToLayer(row.node, stack, layer.layer) + '\t' + relativeToLayer(row.relation, stack, layer.layer) +
           '\n';
  }
  for (auto &c : n.children)
    signature(*c, layer, r, out);
  out += "}\n";
}

void compareLayers(ModNode &n, const Result &r) {
  std::map<std::string, const ModNode *> seen;
  for (auto &c : n.children) {
    compareLayers(*c, r);
    if (c->layer < 0)
      continue;
    std::string sig;
    signature(*c, *c, r, sig);
    // A layer with a failure is shown in full, and never stands for another.
    if (c->subtreeFailures)
      continue;
    auto [it, fresh] = seen.emplace(std::move(sig), c.get());
    if (!fresh)
      c->sameAs = it->second;
  }
}

// Where a module's collectives are drawn: its layer (the path through the
// first numeric component), else its top-level module.
std::pair<std::string, long> unitOf(const std::string &module) {
  size_t start = 0;
  while (start <= module.size()) {
    size_t dot = module.find('.', start);
    size_t end = dot == std::string::npos ? module.size() : dot;
    if (isNumber(module.substr(start, end - start)))
      return {module.substr(0, end), std::stol(module.substr(start, end - start))};
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  return {module.substr(0, module.find('.')), -1};
}

// The name of the stack a layer unit belongs to ("layers" for "model.layers.3").
std::string stackOf(const std::string &unit) {
  size_t dot = unit.rfind('.');
  if (dot == std::string::npos)
    return "";
  std::string head = unit.substr(0, dot);
  size_t prev = head.rfind('.');
  return prev == std::string::npos ? head : head.substr(prev + 1);
}

} // namespace

std::string relativeToLayer(const std::string &s, const std::string &name, long k) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t from = std::string::npos; // where the layer number starts
    if (!name.empty()) {
      if ((i == 0 || !identChar(s[i - 1])) && s.compare(i, name.size(), name) == 0 && i + name.size() < s.size() &&
          s[i + name.size()] == '.')
        from = i + name.size() + 1;
    } else if (i > 0 && s[i - 1] == '/') {
      from = i;
    }
    if (from != std::string::npos) {
      size_t to = from;
      while (to < s.size() && digit(s[to]))
        ++to;
      bool ends = name.empty() ? to < s.size() && s[to] == '/' : to == s.size() || !identChar(s[to]);
      if (to > from && to - from <= kMaxDigits && ends) {
        out.append(s, i, from - i);
        out += "{" + std::to_string(std::stol(s.substr(from, to - from)) - k) + "}";
        i = to;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

std::vector<CollectiveGroup> groupCollectives(const Context &ctx) {
  int world = static_cast<int>(ctx.rankPaths.size());
  for (const CollectiveSite &s : ctx.collectives)
    world = std::max(world, s.rank + 1);
  // Per module, each rank's collectives in graph order.
  std::vector<std::string> modules;
  std::map<std::string, std::vector<std::vector<const CollectiveSite *>>> perModule;
  for (const CollectiveSite &s : ctx.collectives) {
    if (s.rank < 0)
      continue;
    auto &ranks = perModule[s.module];
    if (ranks.empty()) {
      modules.push_back(s.module);
      ranks.resize(world);
    }
    ranks[s.rank].push_back(&s);
  }
  std::vector<CollectiveGroup> groups;
  std::map<std::string, size_t> byUnit;
  for (const std::string &m : modules) {
    auto [unit, layer] = unitOf(m);
    auto [it, fresh] = byUnit.emplace(unit, groups.size());
    if (fresh) {
      groups.emplace_back();
      groups.back().unit = unit;
      groups.back().layer = layer;
    }
    CollectiveGroup &g = groups[it->second];
    const auto &ranks = perModule[m];
    size_t count = 0;
    for (auto &sites : ranks)
      count = std::max(count, sites.size());
    // The i-th collective of the module on each rank is one collective:
    // ranks issue them in program order.
    for (size_t i = 0; i < count; ++i) {
      CollectiveBar bar;
      bar.module = m;
      for (int r = 0; r < world; ++r) {
        if (i >= ranks[r].size())
          continue;
        const CollectiveSite &s = *ranks[r][i];
        if (bar.op.empty())
          bar.op = s.op;
        else if (bar.op != s.op)
          bar.mixedOps = true;
        bar.ranks.push_back(r);
        bar.nodes.push_back(s.node);
      }
      g.bars.push_back(std::move(bar));
    }
  }
  // Layers whose collectives are the same up to the layer number.
  std::map<std::string, int> seen;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    CollectiveGroup &g = groups[gi];
    if (g.layer < 0)
      continue;
    std::string stack = stackOf(g.unit);
    size_t dot = g.unit.rfind('.');
    std::string sig = (dot == std::string::npos ? "" : g.unit.substr(0, dot)) + "\n"; // the stack's path
    for (const CollectiveBar &b : g.bars) {
      sig += b.module.substr(std::min(g.unit.size(), b.module.size())) + '\t' + b.op + (b.mixedOps ? "*" : "");
      for (size_t j = 0; j < b.ranks.size(); ++j)
        sig += '\t' + std::to_string(b.ranks[j]) + '=' + relativeToLayer(b.nodes[j], stack, g.layer);
      sig += '\n';
    }
    auto [it, fresh] = seen.emplace(sig, static_cast<int>(gi));
    if (!fresh)
      g.sameAs = it->second;
  }
  return groups;
}

std::unique_ptr<ModNode> buildTree(const Result &r, const std::vector<CollectiveGroup> &groups) {
  TreeBuilder b;
  for (size_t i = 0; i < r.rows.size(); ++i)
    b.get(r.rows[i].module)->rows.push_back(i);
  bool first = true;
  for (size_t i = 0; i < r.failures.size(); ++i) {
    const Failure &f = r.failures[i];
    if (f.module.empty() && f.refNode.empty())
      continue; // an output or size condition: listed, not placed in the tree
    ModNode *n = b.get(f.module);
    n->failures.push_back(i);
    n->firstFailure |= first;
    first = false;
  }
  for (const CollectiveGroup &g : groups)
    for (const CollectiveBar &bar : g.bars) {
      auto it = b.byPath.find(bar.module);
      if (it != b.byPath.end() && !bar.module.empty())
        it->second->collectiveOps.push_back(bar.op);
    }
  sumUp(*b.root, r);
  compareLayers(*b.root, r);
  return std::move(b.root);
}

} // namespace shardproof::report::html
