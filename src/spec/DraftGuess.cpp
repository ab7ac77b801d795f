// Placement guesses for `shardproof init`: replicated when every rank has the
// reference's shape, a shard when one axis is cut, with the split policy whose
// per-rank sizes are exactly the ranks'; TODO otherwise.
#include "DraftGuess.h"
#include "Lexer.h"

#include <algorithm>
#include <numeric>

namespace shardproof::spec::draft {

using smt::Expr;

std::string dimsText(const ir::Shape &s) {
  std::string out = "[";
  for (size_t d = 0; d < s.rank(); ++d)
    out += (d ? ", " : "") + s.dims[d].str();
  return out + "]";
}

namespace {

std::string join(const std::vector<int64_t> &xs) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i)
    out += (i ? ", " : "") + std::to_string(xs[i]);
  return out;
}

bool sameData(const ir::TensorData &a, const ir::TensorData &b) {
  return a.dims == b.dims && a.floats == b.floats && a.ints == b.ints;
}

// Element [i...] of `d` along `axis` shifted by `off` equals `part`'s: the
// rank's data is rows [off, off + part's size) of the reference's.
bool isSliceOf(const ir::TensorData &whole, const ir::TensorData &part, size_t axis, int64_t off) {
  if (whole.dims.size() != part.dims.size() || axis >= whole.dims.size())
    return false;
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < whole.dims.size(); ++d)
    inner *= whole.dims[d];
  for (size_t d = 0; d < axis; ++d)
    outer *= whole.dims[d];
  int64_t n = whole.dims[axis], k = part.dims[axis];
  if (off < 0 || off + k > n)
    return false;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < inner; ++j)
        if (whole.at((o * n + off + i) * inner + j) != part.at((o * k + i) * inner + j))
          return false;
  return true;
}

// The split policy whose sizes for n rows over P ranks are exactly `s`.
std::string splitFor(int64_t n, const std::vector<int64_t> &s, std::string &why) {
  const int64_t P = static_cast<int64_t>(s.size());
  auto all = [&](auto f) {
    for (int64_t r = 0; r < P; ++r)
      if (s[r] != f(r))
        return false;
    return true;
  };
  int64_t sum = std::accumulate(s.begin(), s.end(), int64_t(0));
  if (n % P == 0 && all([&](int64_t) { return n / P; })) {
    why = std::to_string(n / P) + " of " + std::to_string(n) + " on each rank";
    return "even";
  }
  if (sum == n && all([&](int64_t r) { return n / P + (r < n % P ? 1 : 0); })) {
    why = "sizes " + join(s) + " of " + std::to_string(n) + ": numpy.array_split / torch.tensor_split";
    return "tensor_split";
  }
  int64_t c = (n + P - 1) / P;
  if (sum == n && all([&](int64_t r) { return std::clamp<int64_t>(n - r * c, 0, c); })) {
    why = "sizes " + join(s) + " of " + std::to_string(n) + ": torch.chunk";
    return "chunk";
  }
  if (sum > n && sum % P == 0 && all([&](int64_t) { return sum / P; })) {
    // Padded to m = sum rows, then split evenly: to a multiple of the world
    // size if that gives m (Megatron pads the vocab so), else the smallest M that does.
    std::vector<int64_t> multiples{P};
    for (int64_t M = 1; M <= sum; ++M)
      multiples.push_back(M);
    for (int64_t M : multiples)
      if (sum % M == 0 && M * ((n + M - 1) / M) == sum) {
        why = std::to_string(n) + " rows padded to " + std::to_string(sum) + ", " + std::to_string(sum / P) +
              " on each rank";
        return "{pad_to_multiple: " + std::to_string(M) + "}";
      }
  }
  if (sum == n) {
    why = "sizes " + join(s) + " of " + std::to_string(n);
    return "{sizes: [" + join(s) + "]}";
  }
  why = "rank sizes " + join(s) + " add up to " + std::to_string(sum) + ", not " + std::to_string(n);
  return "";
}

Guess todo(std::string why) {
  Guess g;
  g.placement = "TODO";
  g.why = "TODO: " + std::move(why);
  g.todo = true;
  return g;
}

std::string shardText(size_t axis, const std::string &split) {
  if (split.empty())
    return "{shard: " + std::to_string(axis) + "}";
  if (split[0] == '{') // {pad_to_multiple: M} / {sizes: [...]}: merged into the shard's map
    return "{shard: " + std::to_string(axis) + ", " + split.substr(1, split.size() - 2) + "}";
  return "{shard: " + std::to_string(axis) + ", split: " + split + "}";
}

// The axis cut into shards: the rank's size there is `rankDim` on every rank
// and the reference's is `refDim`.
Guess guessShard(const std::string &name, size_t axis, const Side &ref, const std::vector<Side> &ranks,
                 Sizes &ctx) {
  const ir::Shape &R = *ref.shape;
  const int64_t P = static_cast<int64_t>(ranks.size());
  Guess g;
  std::vector<int64_t> sizes;
  for (const Side &s : ranks)
    if (auto v = s.shape->dims[axis].asInt())
      sizes.push_back(*v);
  if (auto n = R.dims[axis].asInt(); n && static_cast<int64_t>(sizes.size()) == P) {
    std::string why;
    std::string split = splitFor(*n, sizes, why);
    if (split.empty())
      return todo("axis " + std::to_string(axis) + " is cut, but " + why + " (" + dimsText(R) +
                  " on the reference); give its placement");
    g.placement = shardText(axis, split);
    g.why = "shard on axis " + std::to_string(axis) + ": " + why;
    // Where both sides hold values, they confirm the guess or say it is only
    // the shapes' (test models often draw every rank's weights at random).
    if (ref.data && std::all_of(ranks.begin(), ranks.end(), [](const Side &s) { return s.data; })) {
      int64_t off = 0;
      for (int64_t r = 0; r < P; ++r) {
        if (!isSliceOf(*ref.data, *ranks[r].data, axis, off)) {
          g.why += "; NOTE: rank " + std::to_string(r) + "'s initializer values are not rows " + std::to_string(off) +
                   ".." + std::to_string(off + sizes[r] - 1) + " of the reference's (a permuted or fused layout, or "
                   "unrelated test weights): the placement is an assumption, check it";
          return g;
        }
        off += sizes[r];
      }
      g.why += "; the values agree: each rank holds its rows of the reference's";
    }
    return g;
  }
  // A symbolic axis: the rank names its share with a size of its own
  // (`seq_local`), which the placement then defines.
  auto refVar = R.dims[axis].asVar();
  auto localVar = ranks[0].shape->dims[axis].asVar();
  bool sameLocal = localVar && std::all_of(ranks.begin(), ranks.end(), [&](const Side &s) {
                     return s.shape->dims[axis].asVar() == localVar;
                   });
  bool rankOnly = localVar && std::find(ctx.refSymbols.begin(), ctx.refSymbols.end(), *localVar) ==
                                  ctx.refSymbols.end();
  if (refVar && sameLocal && rankOnly) {
    ctx.localOf[*localVar] = *refVar;
    g.placement = shardText(axis, "even");
    g.why = "shard on axis " + std::to_string(axis) + ": the ranks' " + *localVar + " against " + *refVar +
            "; assumed an even split (for uneven shards use split: chunk, tensor_split or sizes, and drop the "
            "constraint tying " + *localVar + " to " + *refVar + ")";
    // One global size per shard, tied linearly to the whole (`seq == 2 *
    // seq_local`): the prover reasons about that better than about seq // 2.
    g.symbols.push_back(*localVar);
    g.constraints.push_back(*refVar + " == " + std::to_string(P) + " * " + *localVar);
    return g;
  }
  return todo("axis " + std::to_string(axis) + " is " + R.dims[axis].str() + " on the reference and " +
              ranks[0].shape->dims[axis].str() + " on rank 0; give its placement (a shard with split: sizes, or a "
              "relation)");
}

} // namespace

bool Sizes::same(const Expr &a, const Expr &b) const {
  if (a.same(b))
    return true;
  if (auto x = a.asInt(), y = b.asInt(); x && y)
    return *x == *y;
  // Two samples: distinct multiples of the world size for the reference's
  // sizes, their even shares for the rank-only ones.
  for (int64_t sample = 0; sample < 2; ++sample) {
    auto value = [&](const std::string &v) -> std::optional<int64_t> {
      auto it = std::find(refSymbols.begin(), refSymbols.end(), v);
      if (it != refSymbols.end())
        return worldSize * (3 + 2 * (it - refSymbols.begin()) + 7 * sample);
      if (auto l = localOf.find(v); l != localOf.end()) {
        auto whole = std::find(refSymbols.begin(), refSymbols.end(), l->second);
        if (whole == refSymbols.end())
          return std::nullopt;
        return 3 + 2 * (whole - refSymbols.begin()) + 7 * sample;
      }
      return std::nullopt;
    };
    auto x = a.eval(value), y = b.eval(value);
    if (!x || !y || *x != *y)
      return false;
  }
  return true;
}

Guess guessPlacement(const std::string &name, const Side &ref, const std::vector<Side> &ranks, Sizes &sizes,
                     bool output) {
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!ranks[r].present)
      return todo("rank " + std::to_string(r) + " has no tensor named '" + name +
                  "'; name it with `as:` or write a relation");
  if (!ref.shape)
    return todo("its shape on the reference is not known");
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!ranks[r].shape || ranks[r].shape->rank() != ref.shape->rank())
      return todo(ranks[r].shape ? "rank " + std::to_string(r) + " has shape " + dimsText(*ranks[r].shape) +
                                       ", the reference " + dimsText(*ref.shape)
                                 : "its shape on rank " + std::to_string(r) + " is not known");
  // Axes where some rank differs from the reference.
  std::vector<size_t> cut;
  for (size_t a = 0; a < ref.shape->rank(); ++a)
    for (const Side &s : ranks)
      if (!sizes.same(ref.shape->dims[a], s.shape->dims[a])) {
        cut.push_back(a);
        break;
      }
  if (cut.empty()) {
    Guess g;
    bool allData = ref.data && std::all_of(ranks.begin(), ranks.end(), [](const Side &s) { return s.data; });
    g.placement = "replicated";
    g.why = "shape " + dimsText(*ref.shape) + " on the reference and every rank" +
            (output ? std::string(" (if the ranks hold partial sums, it is `partial`)") : std::string());
    if (allData) {
      for (size_t r = 0; r < ranks.size(); ++r)
        if (!sameData(*ref.data, *ranks[r].data)) {
          g.why += "; NOTE: rank " + std::to_string(r) + "'s initializer values differ from the reference's "
                   "(unrelated test weights?): the placement is an assumption, check it";
          return g;
        }
      // Integer and boolean data (indices, masks) keep their values as
      // constants; float weights are placed as replicated, which assumes less.
      if (!ir::isFloating(ref.dtype)) {
        g.omit = true;
        g.why = "the same values on the reference and every rank: a constant";
      } else {
        g.why += "; the same values everywhere";
      }
    }
    return g;
  }
  if (ranks.size() == 1)
    return todo("one rank with shape " + dimsText(*ranks[0].shape) + " against " + dimsText(*ref.shape) +
                " (padded?); relate them, e.g. \"slice(" + spec::detail::tensorRef(name) +
                "@0, axis=" + std::to_string(cut[0]) + ", start=0, end=" + ref.shape->dims[cut[0]].str() + ")\"");
  if (cut.size() > 1)
    return todo("axes " + std::to_string(cut[0]) + " and " + std::to_string(cut[1]) + " both differ from " +
                dimsText(*ref.shape) + "; give its placement");
  return guessShard(name, cut[0], ref, ranks, sizes);
}

std::optional<int64_t> tableRows(const ir::Graph &g, const std::vector<ir::InferredValue> &shapes, int id) {
  // Forward from the input through ops that keep its values (target ids are
  // unsqueezed before a GatherElements), to the gather whose indices they are.
  std::vector<int> frontier{id};
  for (size_t at = 0; at < frontier.size() && at < 64; ++at) {
    int v = frontier[at];
    for (const ir::Node &n : g.nodes) {
      if (n.inputs.empty())
        continue;
      bool gather = n.opType == "Gather" || n.opType == "GatherElements";
      if (gather && n.inputs.size() >= 2 && n.inputs[1] == v && n.inputs[0] >= 0) {
        const auto &table = shapes[n.inputs[0]].shape;
        int64_t axis = 0;
        if (const ir::Attribute *a = n.attr("axis"))
          axis = a->i;
        if (table && axis < 0)
          axis += static_cast<int64_t>(table->rank());
        if (table && axis >= 0 && axis < static_cast<int64_t>(table->rank()))
          if (auto rows = table->dims[axis].asInt(); rows && *rows > 0)
            return rows;
        continue;
      }
      static const char *kKeepValues[] = {"Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Flatten",
                                          "Expand"};
      bool keeps = std::any_of(std::begin(kKeepValues), std::end(kKeepValues),
                               [&](const char *op) { return n.opType == op; });
      if (keeps && n.inputs[0] == v)
        frontier.insert(frontier.end(), n.outputs.begin(), n.outputs.end());
    }
  }
  return std::nullopt;
}

} // namespace shardproof::spec::draft
