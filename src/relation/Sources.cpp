// Where a failure lives in the user's Python: the lines that emitted the
// reference node and the rank nodes around it (ONNX doc_strings), so a review
// annotation can sit on the code as well as on the spec.
#include "Sources.h"

#include <map>

namespace shardproof::relation {

const char *toString(BugClass c) {
  switch (c) {
  case BugClass::None: return "none";
  case BugClass::MissingReduction: return "missing-reduction";
  case BugClass::UncoveredElements: return "uncovered-elements";
  case BugClass::MaskLeak: return "mask-leak";
  }
  return "none";
}

const char *toString(Failure::Kind k) {
  switch (k) {
  case Failure::NoRelation: return "no-relation";
  case Failure::OutputMismatch: return "output-mismatch";
  case Failure::Obligation: return "obligation";
  case Failure::Unsupported: return "unsupported";
  case Failure::SolverUnknown: return "solver-unknown";
  }
  return "?";
}

namespace {

// Nodes by name, built once per graph and only when some failure asks.
class NodeIndex {
public:
  explicit NodeIndex(const ir::Graph &g) : g_(g) {}
  const ir::Node *byName(const std::string &n) {
    if (names_.empty())
      for (size_t i = 0; i < g_.nodes.size(); ++i)
        names_.emplace(g_.nodes[i].name, static_cast<int>(i));
    auto it = names_.find(n);
    return it == names_.end() ? nullptr : &g_.nodes[it->second];
  }
  const ir::Node *producerOf(const std::string &tensor) const {
    auto id = g_.find(tensor);
    int p = id ? g_.values[*id].producer : -1;
    return p >= 0 ? &g_.nodes[p] : nullptr;
  }

private:
  const ir::Graph &g_;
  std::map<std::string, int> names_;
};

void add(Failure &f, const std::string &role, const ir::Node *n) {
  constexpr size_t kMaxSites = 4; // the reference line and a few rank lines
  if (!n || n->source.line <= 0 || f.sources.size() >= kMaxSites)
    return;
  for (auto &s : f.sources)
    if (s.loc.file == n->source.file && s.loc.line == n->source.line)
      return; // replicated ranks share their line
  f.sources.push_back({role + " '" + n->name + "'", n->source, n->sourceFunction});
}

// "rank 1: /fc2/Add (Add)" -> {1, "/fc2/Add"}.
bool parseRankNode(const std::string &s, int &rank, std::string &name) {
  if (s.rfind("rank ", 0) != 0)
    return false;
  size_t colon = s.find(": ");
  size_t paren = s.rfind(" (");
  if (colon == std::string::npos || paren == std::string::npos || paren <= colon)
    return false;
  rank = std::atoi(s.c_str() + 5);
  name = s.substr(colon + 2, paren - colon - 2);
  return true;
}

} // namespace

void attachSources(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, std::vector<Failure> &failures) {
  NodeIndex refIdx(ref);
  std::vector<NodeIndex> rankIdx;
  for (auto &g : ranks)
    rankIdx.emplace_back(g);
  for (Failure &f : failures) {
    const ir::Node *n = f.refNode.empty() ? nullptr : refIdx.byName(f.refNode);
    if (!n && f.refNode.empty() && !f.tensor.empty())
      n = refIdx.producerOf(f.tensor);
    add(f, "reference node", n);
    if (!n && !f.refNode.empty()) // an obligation of a rank node
      for (size_t r = 0; r < ranks.size(); ++r)
        add(f, "rank " + std::to_string(r) + " node", rankIdx[r].byName(f.refNode));
    for (auto &s : f.rankNodes) {
      int r = -1;
      std::string name;
      if (parseRankNode(s, r, name) && r >= 0 && r < static_cast<int>(ranks.size()))
        add(f, "rank " + std::to_string(r) + " node", rankIdx[r].byName(name));
    }
    // An output that differs: the line on each rank that computes it.
    if (f.kind == Failure::OutputMismatch && !f.tensor.empty())
      for (size_t r = 0; r < ranks.size(); ++r)
        add(f, "rank " + std::to_string(r) + " node", rankIdx[r].producerOf(f.tensor));
  }
}

} // namespace shardproof::relation
