// Recognising the index condition a constant mask equals (ConstantMask.h).
// Candidates are built from the content's shape (runs, diagonals) and then
// checked by evaluating the very condition returned at every element, so a
// recognised condition is exact by construction; nothing is guessed.
#include "shardproof/ir/ConstantMask.h"

#include "shardproof/ir/Term.h"

#include <cmath>
#include <set>
#include <string>

namespace shardproof::ir {
namespace {

using smt::Expr;

constexpr size_t kMaxPieces = 4; // intervals or rectangles in one condition

// The content projected on the axes it depends on (at most two), as 0/1.
struct Grid {
  std::vector<unsigned> axes;
  int64_t rows = 1, cols = 1; // one axis: rows = 1
  std::vector<char> bit;      // rows * cols, row-major
  bool at(int64_t x, int64_t y) const { return bit[x * cols + y]; }
};

// Starts of the runs of equal consecutive rows (byRow) or columns of g.
std::vector<int64_t> runStarts(const Grid &g, bool byRow) {
  std::vector<int64_t> starts{0};
  int64_t n = byRow ? g.rows : g.cols, m = byRow ? g.cols : g.rows;
  for (int64_t p = 1; p < n; ++p)
    for (int64_t q = 0; q < m; ++q)
      if ((byRow ? g.at(p, q) : g.at(q, p)) != (byRow ? g.at(p - 1, q) : g.at(q, p - 1))) {
        starts.push_back(p);
        break;
      }
  return starts;
}

// lo <= x < hi inside [0, n), without the sides that cut nothing.
Expr interval(const Expr &x, int64_t lo, int64_t hi, int64_t n) {
  std::vector<Expr> parts;
  if (lo > 0)
    parts.push_back(x >= Expr::intConst(lo));
  if (hi < n)
    parts.push_back(x < Expr::intConst(hi));
  return smt::conj(parts);
}

// The run of x among `starts` (0-based): #{s in starts, s > 0 : s <= x}.
Expr runIndex(const Expr &x, const std::vector<int64_t> &starts) {
  Expr r = Expr::intConst(0);
  for (size_t k = 1; k < starts.size(); ++k)
    r = r + ite(x >= Expr::intConst(starts[k]), Expr::intConst(1), Expr::intConst(0));
  return r;
}

// The 0/1 matrix k[a][b] of R x C cells as a band lo <= b - a <= hi over the
// positions `da`, `db` (the cells' own indices or run indices), if it is one.
std::optional<Expr> band(const std::vector<std::vector<char>> &k, const Expr &da, const Expr &db) {
  int64_t R = static_cast<int64_t>(k.size()), C = static_cast<int64_t>(k[0].size());
  std::optional<int64_t> lo, hi;
  for (int64_t d = -(R - 1); d <= C - 1; ++d) {
    std::optional<char> v;
    for (int64_t a = std::max<int64_t>(0, -d); a < R && a + d < C; ++a) {
      if (v && *v != k[a][a + d])
        return std::nullopt; // a diagonal that is not constant
      v = k[a][a + d];
    }
    if (*v) {
      if (hi && *hi != d - 1)
        return std::nullopt; // two separate runs of true diagonals
      lo = lo ? lo : d;
      hi = d;
    }
  }
  if (!lo)
    return std::nullopt;
  Expr diff = db - da;
  std::vector<Expr> parts;
  if (*lo > -(R - 1))
    parts.push_back(diff >= Expr::intConst(*lo));
  if (*hi < C - 1)
    parts.push_back(diff <= Expr::intConst(*hi));
  return smt::conj(parts);
}

// Union of the cells of k that hold `want` (as rectangles of runs), negated
// when `want` is false; nullopt when there are more than kMaxPieces.
std::optional<Expr> rectangles(const std::vector<std::vector<char>> &k, bool want, const Expr &x, const Expr &y,
                               const std::vector<int64_t> &rowStarts, const std::vector<int64_t> &colStarts,
                               int64_t rows, int64_t cols) {
  std::vector<Expr> cells;
  for (size_t a = 0; a < k.size(); ++a)
    for (size_t b = 0; b < k[a].size(); ++b)
      if (k[a][b] == want) {
        if (cells.size() == kMaxPieces)
          return std::nullopt;
        int64_t r1 = a + 1 < rowStarts.size() ? rowStarts[a + 1] : rows;
        int64_t c1 = b + 1 < colStarts.size() ? colStarts[b + 1] : cols;
        cells.push_back(interval(x, rowStarts[a], r1, rows) && interval(y, colStarts[b], c1, cols));
      }
  Expr u = smt::disj(cells);
  return want ? u : !u;
}

// Whether `cond` holds exactly at the set bits of g.
bool matches(const Expr &cond, const Grid &g) {
  std::string nx = "u!" + std::to_string(g.axes.empty() ? 0 : g.axes[0]);
  std::string ny = "u!" + std::to_string(g.axes.size() > 1 ? g.axes[1] : 0);
  int64_t x = 0, y = 0;
  bool two = g.axes.size() == 2;
  Expr::Env env = [&](const std::string &v) -> std::optional<int64_t> {
    if (two && v == ny)
      return y;
    if (v == nx)
      return two ? x : y;
    return std::nullopt;
  };
  for (x = 0; x < g.rows; ++x)
    for (y = 0; y < g.cols; ++y) {
      auto v = cond.eval(env);
      if (!v || (*v != 0) != static_cast<bool>(g.at(x, y)))
        return false;
    }
  return true;
}

// Candidate conditions for g, simplest first.
std::vector<Expr> candidates(const Grid &g) {
  std::vector<Expr> out;
  auto add = [&](std::optional<Expr> e) {
    if (e)
      out.push_back(e->simplify());
  };
  bool two = g.axes.size() == 2;
  Expr x = indexVar("u", g.axes[0]), y = two ? indexVar("u", g.axes[1]) : x;
  std::vector<int64_t> rs = runStarts(g, true), cs = runStarts(g, false);
  auto cells = [&](const std::vector<int64_t> &rows, const std::vector<int64_t> &cols) {
    std::vector<std::vector<char>> k(rows.size(), std::vector<char>(cols.size()));
    for (size_t a = 0; a < rows.size(); ++a)
      for (size_t b = 0; b < cols.size(); ++b)
        k[a][b] = g.at(rows[a], cols[b]);
    return k;
  };
  if (!two) { // one axis: its true runs as intervals
    std::vector<std::vector<char>> k = cells({0}, cs);
    add(rectangles(k, true, y, y, {0}, cs, 1, g.cols));
    add(rectangles(k, false, y, y, {0}, cs, 1, g.cols));
    return out;
  }
  std::vector<int64_t> all(std::max(g.rows, g.cols));
  for (size_t p = 0; p < all.size(); ++p)
    all[p] = static_cast<int64_t>(p);
  std::vector<int64_t> everyRow(all.begin(), all.begin() + g.rows), everyCol(all.begin(), all.begin() + g.cols);
  add(band(cells(everyRow, everyCol), x, y)); // triangular, banded
  std::vector<std::vector<char>> k = cells(rs, cs);
  if (rs.size() < static_cast<size_t>(g.rows) || cs.size() < static_cast<size_t>(g.cols))
    add(band(k, runIndex(x, rs), runIndex(y, cs))); // block causal, block diagonal
  add(rectangles(k, true, x, y, rs, cs, g.rows, g.cols));
  add(rectangles(k, false, x, y, rs, cs, g.rows, g.cols));
  return out;
}

} // namespace

std::optional<std::pair<int64_t, int64_t>> arithmeticProgression(const std::vector<double> &data) {
  auto whole = [](double v) { return std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15; };
  if (data.size() < 2)
    return std::nullopt;
  double step = data[1] - data[0];
  for (size_t i = 0; i < data.size(); ++i)
    if (!whole(data[i]) || data[i] != data[0] + step * static_cast<double>(i))
      return std::nullopt;
  return std::make_pair(static_cast<int64_t>(data[0]), static_cast<int64_t>(step));
}

std::optional<ConstantCondition> recogniseConstantCondition(const std::vector<int64_t> &dims,
                                                            const std::vector<double> &data, int64_t maxElements) {
  int64_t n = 1;
  for (auto d : dims)
    if (d <= 0 || __builtin_mul_overflow(n, d, &n) || n > maxElements)
      return std::nullopt;
  if (static_cast<int64_t>(data.size()) != n)
    return std::nullopt;
  std::set<double> values;
  for (double v : data) {
    if (!std::isfinite(v) || v != std::floor(v) || std::abs(v) >= 9007199254740992.0) // 2^53: exact integers
      return std::nullopt;
    if (values.insert(v).second && values.size() > 2)
      return std::nullopt;
  }
  ConstantCondition out;
  if (values.size() == 1) {
    out.cond = Expr::boolConst(true);
    out.onTrue = out.onFalse = *values.begin();
    return out;
  }
  // Two values: the nonzero one (the larger if neither is 0) is `true`.
  out.onFalse = values.count(0.0) ? 0.0 : *values.begin();
  out.onTrue = *values.begin() == out.onFalse ? *values.rbegin() : *values.begin();
  // The axes the content depends on: along any other, every element equals
  // the one at coordinate 0 of that axis.
  std::vector<int64_t> stride(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    stride[d - 1] = stride[d] * dims[d];
  Grid g;
  for (unsigned d = 0; d < dims.size(); ++d) {
    bool depends = false;
    for (int64_t i = 0; i < n && !depends; ++i) {
      int64_t c = (i / stride[d]) % dims[d];
      depends = c > 0 && data[i] != data[i - c * stride[d]];
    }
    if (depends)
      g.axes.push_back(d);
  }
  if (g.axes.empty() || g.axes.size() > 2)
    return std::nullopt; // two values but no dependency cannot happen; three axes: not a pattern here
  g.rows = g.axes.size() == 2 ? dims[g.axes[0]] : 1;
  g.cols = dims[g.axes.back()];
  g.bit.resize(static_cast<size_t>(g.rows * g.cols));
  for (int64_t x = 0; x < g.rows; ++x)
    for (int64_t y = 0; y < g.cols; ++y) {
      int64_t flat = y * stride[g.axes.back()] + (g.axes.size() == 2 ? x * stride[g.axes[0]] : 0);
      g.bit[x * g.cols + y] = data[flat] == out.onTrue;
    }
  for (Expr &c : candidates(g))
    if (matches(c, g)) {
      out.cond = c;
      return out;
    }
  return std::nullopt;
}

} // namespace shardproof::ir
