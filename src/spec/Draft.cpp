// draftSpec: the YAML `shardproof init` writes. Guesses come from
// DraftGuess.cpp; this file collects each tensor's sides, the symbols and the
// constraints, and lays the spec out with a comment beside every guess.
#include "shardproof/spec/Draft.h"

#include "DraftGuess.h"
#include "Lexer.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace shardproof::spec {

using draft::Guess;
using draft::Side;

namespace {

// A YAML key as written: plain when it is a plain name, quoted otherwise.
std::string key(const std::string &name) {
  bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/';
  });
  if (plain && name != "TODO")
    return name;
  std::string q = "\"";
  for (char c : name)
    q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

Side sideOf(const ir::Graph &g, const std::vector<ir::InferredValue> &shapes, const std::string &name) {
  Side s;
  auto id = g.find(name);
  if (!id)
    return s;
  s.present = true;
  s.dtype = g.values[*id].dtype;
  // Inferred through the op table; else as the file declares it (an op the
  // table cannot infer without the prover's facts, such as a data-dependent index).
  s.shape = shapes[*id].shape ? shapes[*id].shape : g.values[*id].declared;
  s.data = g.values[*id].init;
  return s;
}

// `{a: 1}` + `values: R` -> `{a: 1, values: R}`; `replicated` -> `{replicated: true, values: R}`.
std::string withValues(const std::string &placement, const std::string &range) {
  if (placement == "replicated")
    return "{replicated: true, values: " + range + "}";
  return placement.substr(0, placement.size() - 1) + ", values: " + range + "}";
}

// One `key: placement  # why` line, the comment on the line above when long.
void emit(std::string &out, const std::string &name, const Guess &g) {
  std::string line = "  " + key(name) + ": " + g.placement;
  std::string comment = "# " + g.why;
  if (line.size() + 2 + comment.size() <= 118)
    out += line + "  " + comment + "\n";
  else
    out += "  " + comment + "\n" + line + "\n";
}

std::vector<std::string> symbolsOf(const ir::Graph &g, const std::vector<ir::InferredValue> &shapes) {
  std::set<std::string> names;
  auto add = [&](int id) {
    if (const auto &s = shapes[id].shape)
      for (const auto &d : s->dims)
        for (const auto &v : d.vars())
          names.insert(v);
  };
  for (int id : g.inputs)
    add(id);
  for (int id : g.outputs)
    add(id);
  return {names.begin(), names.end()};
}

// "dir/rank{r}.onnx" when every path is the same but for the rank number.
std::string rankPattern(const std::vector<std::string> &paths) {
  if (paths.empty())
    return "";
  const std::string &p0 = paths[0];
  for (size_t at = p0.find('0'); at != std::string::npos; at = p0.find('0', at + 1)) {
    std::string pre = p0.substr(0, at), post = p0.substr(at + 1);
    bool fits = true;
    for (size_t r = 0; r < paths.size() && fits; ++r)
      fits = paths[r] == pre + std::to_string(r) + post;
    if (fits)
      return pre + "{r}" + post;
  }
  return "";
}

// The op writing output `name` on every rank, if they agree ("" otherwise);
// Identity nodes (an exporter's output copies) are looked through.
std::string producerOnRanks(const std::vector<const ir::Graph *> &ranks, const std::string &name) {
  std::string op;
  for (const ir::Graph *g : ranks) {
    auto id = g->find(name);
    int p = id ? g->values[*id].producer : -1;
    for (int hops = 0; p >= 0 && g->nodes[p].opType == "Identity" && hops < 64; ++hops)
      p = g->nodes[p].inputs.empty() || g->nodes[p].inputs[0] < 0 ? -1 : g->values[g->nodes[p].inputs[0]].producer;
    if (p < 0 || (!op.empty() && g->nodes[p].opType != op))
      return "";
    op = g->nodes[p].opType;
  }
  return op;
}

// A training step's loss when its data is split (a batch or a sequence
// shard, not a parameter): each rank's scalar covers its own rows, so it is
// not the whole loss. A mean over them is averaged over the ranks (right
// only for equal shards), a sum adds up. nullopt: keep the shape's guess.
std::optional<Guess> splitLoss(const std::string &name, const std::string &op) {
  if (op == "ReduceMean")
    return Guess{key("mean(" + detail::tensorRef(name) + "@*)"),
                 "each rank's mean over its shard of the split data; their average is the whole mean only for "
                 "equal shards",
                 {}, {}, false};
  if (op == "ReduceSum")
    return Guess{"partial", "each rank's sum over its shard of the split data", {}, {}, false};
  return std::nullopt;
}

} // namespace

Draft draftSpec(const DraftInput &in) {
  const ir::Graph &ref = *in.reference;
  const int P = static_cast<int>(in.ranks.size());
  std::vector<ir::Obligation> refObligations;
  auto refShapes = ir::inferShapes(ref, 1, &refObligations);
  std::vector<std::vector<ir::InferredValue>> rankShapes;
  for (const ir::Graph *g : in.ranks)
    rankShapes.push_back(ir::inferShapes(*g, P));
  draft::Sizes sizes;
  sizes.refSymbols = symbolsOf(ref, refShapes);
  sizes.worldSize = P;
  const std::vector<std::string> &refSymbols = sizes.refSymbols;

  Draft d;
  std::vector<std::string> constraints, localSymbols;
  std::string inputs, outputs, constants;
  unsigned omitted = 0, likeParams = 0;
  std::map<std::string, std::string> inputGuess; // input -> its drafted placement
  // A training step's data inputs (those without a gradient output) of which one is drafted as a shard.
  auto splitData = [&] {
    for (auto &[input, placement] : inputGuess)
      if (placement.rfind("{shard", 0) == 0 && ref.find("grad:" + input) == std::nullopt)
        return std::any_of(ref.outputs.begin(), ref.outputs.end(),
                           [&](int id) { return ref.values[id].name.rfind("grad:", 0) == 0; });
    return false;
  };
  auto place = [&](const std::string &name, bool output, std::string &out) {
    Side r = sideOf(ref, refShapes, name);
    std::vector<Side> ranks;
    for (int k = 0; k < P; ++k)
      ranks.push_back(sideOf(*in.ranks[k], rankShapes[k], name));
    Guess g = draft::guessPlacement(name, r, ranks, sizes, output);
    // Integer inputs that index an embedding carry their range; other integer
    // inputs (sizes as data, masks) need a person to say what they hold.
    if (!output && !g.todo && !g.omit && !ir::isFloating(r.dtype) && r.dtype != ir::DType::Bool) {
      auto id = ref.find(name);
      auto rows = id ? draft::tableRows(ref, refShapes, *id) : std::nullopt;
      if (rows) {
        g.placement = withValues(g.placement, "{min: 0, max: " + std::to_string(*rows - 1) + "}");
        g.why += "; ids index a table of " + std::to_string(*rows) + " rows";
      } else if (r.shape && r.shape->rank() <= 1) {
        g = Guess{"TODO", "TODO: an integer input (" + std::string(ir::toString(r.dtype)) +
                              "): bind what it holds, e.g. {value: seq} for a length, {each: {min: 1, max: seq}}, "
                              "{elements: [...]}, or its range with values: {min, max}",
                  {}, {}, true};
      }
    }
    if (g.omit) {
      ++omitted;
      return;
    }
    if (output && g.placement == "replicated" && r.shape && r.shape->rank() == 0 && splitData())
      if (auto loss = splitLoss(name, producerOnRanks(in.ranks, name)))
        g = *loss;
    if (!output && !g.todo)
      inputGuess[name] = g.placement;
    // A training step's gradient drafted where its parameter is: said once by
    // `grads: like_params` instead of once per parameter.
    if (output && !g.todo && name.rfind("grad:", 0) == 0) {
      auto it = inputGuess.find(name.substr(5));
      if (it != inputGuess.end() && it->second == g.placement) {
        ++likeParams;
        ++d.guesses;
        return;
      }
    }
    (g.todo ? d.todos : d.guesses)++;
    for (auto &c : g.constraints)
      if (std::find(constraints.begin(), constraints.end(), c) == constraints.end())
        constraints.push_back(c);
    for (auto &v : g.symbols)
      if (std::find(localSymbols.begin(), localSymbols.end(), v) == localSymbols.end())
        localSymbols.push_back(v);
    emit(out, name, g);
  };
  for (int id : ref.inputs)
    place(ref.values[id].name, false, inputs);
  for (int id : ref.initializers)
    place(ref.values[id].name, false, inputs);
  for (int id : ref.outputs)
    place(ref.values[id].name, true, outputs);

  draft::Limits limits = draft::referenceLimits(refObligations, refSymbols);
  std::string &y = d.yaml;
  y += "# Drafted by `shardproof init` from " + in.referencePath + " and " + std::to_string(P) +
       " rank graphs.\n"
       "# Every placement is a guess with its reason beside it: read them before trusting a\n"
       "# verdict. `shardproof check` rejects the spec while a TODO is left"
       " (" + std::to_string(d.todos) + " here).\n";
  y += "shardproof: 1\nreference: " + key(in.referencePath) + "\nimplementation:\n  world_size: " +
       std::to_string(P) + "\n";
  if (std::string pat = rankPattern(in.rankPaths); !pat.empty()) {
    y += "  ranks: " + key(pat) + "\n";
  } else {
    y += "  ranks:\n";
    for (const auto &p : in.rankPaths)
      y += "    - " + key(p) + "\n";
  }
  // The least size every graph holds for (1, or 2 for a torch.export capture).
  auto minOf = [&](const std::string &s) {
    int64_t least = 1;
    for (const ir::Graph *g : in.ranks)
      if (auto m = g->sizeMins.find(s); m != g->sizeMins.end())
        least = std::max(least, m->second);
    if (auto m = ref.sizeMins.find(s); m != ref.sizeMins.end())
      least = std::max(least, m->second);
    return least;
  };
  auto captured = [&](const std::string &s) {
    return minOf(s) > 1 ? "  # captured by torch.export, which specializes sizes 0 and 1" : "";
  };
  if (!refSymbols.empty()) {
    y += "symbols:  # the reference's dynamic sizes; add max: or value: to bound them\n";
    for (const auto &s : refSymbols) {
      std::string least = std::to_string(minOf(s));
      if (auto m = limits.max.find(s); m != limits.max.end())
        y += "  " + key(s) + ": {min: " + least + ", max: " + std::to_string(m->second.first) +
             "}  # the reference needs it: " + m->second.second + "\n";
      else
        y += "  " + key(s) + ": {min: " + least + "}" + captured(s) + "\n";
    }
    for (const auto &s : localSymbols)
      y += "  " + key(s) + ": {min: " + std::to_string(minOf(s)) +
           "}  # each rank's share, tied to the whole under constraints" + captured(s) + "\n";
  }
  // The guards torch traced under (a torch.export capture): the graphs hold
  // only where they do, and check refuses a spec that admits more.
  std::vector<std::pair<std::string, std::string>> guards; // condition, first graph traced under it
  std::vector<const ir::Graph *> graphs{&ref};
  graphs.insert(graphs.end(), in.ranks.begin(), in.ranks.end());
  for (const ir::Graph *g : graphs)
    if (!g->assumption.empty() && std::none_of(guards.begin(), guards.end(),
                                               [&](const auto &k) { return k.first == g->assumption; }))
      guards.push_back({g->assumption, g->path});
  if (!constraints.empty() || !limits.constraints.empty() || !guards.empty()) {
    y += "constraints:\n";
    for (size_t i = 0; i < limits.constraints.size(); ++i)
      y += "  - \"" + limits.constraints[i] + "\"  # the reference needs it: " + limits.reasons[i] + "\n";
    for (const auto &[text, path] : guards)
      y += "  - \"" + text + "\"  # torch.export traced " + key(path) + " under this guard\n";
    for (const auto &c : constraints)
      y += "  - \"" + c + "\"  # assumed by a shard guessed below\n";
  }
  y += "inputs:\n" + inputs;
  if (omitted)
    y += "  # " + std::to_string(omitted) + " initializer(s) hold the same values on the reference and every rank: "
         "constants, no placement needed\n";
  if (likeParams)
    y += "grads: like_params  # the " + std::to_string(likeParams) +
         " outputs grad:<p> sit where their parameter <p> does; place one under outputs to override\n";
  y += "outputs:\n" + outputs;

  // Rank-only inputs: arbitrary unless bound (a length passed as data, say).
  std::set<std::string> listed;
  std::string rankOnly;
  for (int k = 0; k < P; ++k)
    for (int id : in.ranks[k]->inputs) {
      const std::string &n = in.ranks[k]->values[id].name;
      if (ref.find(n) || !listed.insert(n).second)
        continue;
      auto s = rankShapes[k][id].shape;
      rankOnly += "#   " + n + ": " + ir::toString(in.ranks[k]->values[id].dtype) + " " +
                  (s ? draft::dimsText(*s) : std::string("[?]")) + " (rank " + std::to_string(k) + ")\n";
    }
  if (!rankOnly.empty())
    y += "# Inputs only the ranks have. Unbound, each is an arbitrary tensor; if one carries a size\n"
         "# or offsets as data, bind it under inputs (e.g. `seq_len: {value: seq}`; docs/spec-format.md):\n" +
         rankOnly;
  return d;
}

} // namespace shardproof::spec
