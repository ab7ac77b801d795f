// Placement guesses for `shardproof init`: replicated when every rank has the
// reference's shape, a shard when one axis is cut, with the split policy whose
// per-rank sizes are exactly the ranks'; TODO otherwise.
#include "DraftGuess.h"

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

bool sameDim(const Expr &a, const Expr &b) {
  if (a.same(b))
    return true;
  auto x = a.asInt(), y = b.asInt();
  return x && y && *x == *y;
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
    // Padded to m = sum rows, then split evenly: the smallest multiple M that pads n to m.
    for (int64_t M = 1; M <= sum; ++M)
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
                 const std::vector<std::string> &refSymbols) {
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
    // Where both sides hold values, the rank's must be its rows of the reference's.
    if (ref.data) {
      int64_t off = 0;
      for (int64_t r = 0; r < P; ++r) {
        if (ranks[r].data && !isSliceOf(*ref.data, *ranks[r].data, axis, off))
          return todo("rank " + std::to_string(r) + "'s values of '" + name + "' are not rows " +
                      std::to_string(off) + ".." + std::to_string(off + sizes[r] - 1) + " of the reference's on axis " +
                      std::to_string(axis) + " (a permuted or fused layout?); give its placement");
        off += sizes[r];
      }
      g.why += "; each rank's values are its rows of the reference's";
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
  bool rankOnly = localVar && std::find(refSymbols.begin(), refSymbols.end(), *localVar) == refSymbols.end();
  if (refVar && sameLocal && rankOnly) {
    g.placement = shardText(axis, "even");
    g.why = "shard on axis " + std::to_string(axis) + ": the ranks' " + *localVar + " against " + *refVar +
            "; assumed an even split, which needs the constraint below (for uneven shards use split: chunk, "
            "tensor_split or sizes)";
    g.constraints.push_back(*refVar + " % " + std::to_string(P) + " == 0");
    return g;
  }
  return todo("axis " + std::to_string(axis) + " is " + R.dims[axis].str() + " on the reference and " +
              ranks[0].shape->dims[axis].str() + " on rank 0; give its placement (a shard with split: sizes, or a "
              "relation)");
}

} // namespace

Guess guessPlacement(const std::string &name, const Side &ref, const std::vector<Side> &ranks,
                     const std::vector<std::string> &refSymbols, bool output) {
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
      if (!sameDim(ref.shape->dims[a], s.shape->dims[a])) {
        cut.push_back(a);
        break;
      }
  if (cut.empty()) {
    Guess g;
    bool allData = ref.data && std::all_of(ranks.begin(), ranks.end(), [](const Side &s) { return s.data; });
    if (allData) {
      for (size_t r = 0; r < ranks.size(); ++r)
        if (!sameData(*ref.data, *ranks[r].data))
          return todo("the same shape " + dimsText(*ref.shape) + " everywhere, but rank " + std::to_string(r) +
                      "'s values differ from the reference's");
      g.omit = true;
      g.why = "the same values on the reference and every rank: a constant";
      return g;
    }
    g.placement = "replicated";
    g.why = "shape " + dimsText(*ref.shape) + " on the reference and every rank" +
            (output ? std::string(" (if the ranks hold partial sums, it is `partial`)") : std::string());
    return g;
  }
  if (ranks.size() == 1)
    return todo("one rank with shape " + dimsText(*ranks[0].shape) + " against " + dimsText(*ref.shape) +
                " (padded?); relate them, e.g. \"slice(" + name + "@0, axis=" + std::to_string(cut[0]) +
                ", start=0, end=" + ref.shape->dims[cut[0]].str() + ")\"");
  if (cut.size() > 1)
    return todo("axes " + std::to_string(cut[0]) + " and " + std::to_string(cut[1]) + " both differ from " +
                dimsText(*ref.shape) + "; give its placement");
  return guessShard(name, cut[0], ref, ranks, refSymbols);
}

std::optional<int64_t> tableRows(const ir::Graph &g, const std::vector<ir::InferredValue> &shapes, int id) {
  for (const ir::Node &n : g.nodes) {
    if (n.opType != "Gather" || n.inputs.size() < 2 || n.inputs[1] != id || n.inputs[0] < 0)
      continue;
    const auto &table = shapes[n.inputs[0]].shape;
    int64_t axis = 0;
    if (const ir::Attribute *a = n.attr("axis"))
      axis = a->i;
    if (!table || axis < 0 || axis >= static_cast<int64_t>(table->rank()))
      continue;
    if (auto v = table->dims[axis].asInt(); v && *v > 0)
      return v;
  }
  return std::nullopt;
}

} // namespace shardproof::spec::draft
