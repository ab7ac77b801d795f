// The shared core's helpers: bounds, rendering and counterexamples that every
// phase reads the same way.
#include "Core.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

smt::Expr CheckCore::bounds(const Shape &s, const char *prefix) {
  std::vector<Expr> cs;
  for (size_t d = 0; d < s.rank(); ++d)
    cs.push_back(inRange(indexVar(prefix, static_cast<unsigned>(d)), Expr::intConst(0), s.dims[d]));
  return smt::conj(cs);
}

// Reference terms over P vocab or sequence shards (a concatenation of P
// pieces, each summing P partial sums) grow as P^2. At 8 ranks the LM head's
// weight gradient of the 405B-shaped training step, 8 sequence pieces by 8
// vocab pieces, outgrew 4,000 nodes and was abstracted before the cover could
// match it (UNKNOWN at 600 s; with 16,000, VERIFIED in 41 s). Up to 4 ranks
// the limit is the option's, so nothing changes there.
Options CheckCore::scaledForWorld(Options o, int worldSize) {
  const uint64_t quarter = static_cast<uint64_t>(std::max(worldSize, 4)) / 4;
  o.maxTermNodes = static_cast<unsigned>(
      std::min<uint64_t>(uint64_t{o.maxTermNodes} * quarter * quarter, std::numeric_limits<unsigned>::max()));
  return o;
}

unsigned CheckCore::unknownQueries() const {
  unsigned n = 0;
  for (auto &[_, st] : solver.stats())
    n += st.unknown;
  return n;
}

std::string CheckCore::renderAt(const Term &t, const smt::Model &m) const {
  return Witness::renderWithModel([this](const Term &x) { return render(x); }, t, m);
}

Counterexample CheckCore::makeCounterexample(const Expr &region, const std::string &tensor, int rank,
                                             const Shape &shape, const Term &expected, const Term &actual) {
  Counterexample cex;
  cex.tensor = tensor;
  cex.rank = rank;
  smt::CheckResult r = solver.check("cex.find", region);
  if (r.result != smt::Result::Sat)
    return cex;
  std::vector<std::string> order = symbols;
  for (size_t d = 0; d < shape.rank(); ++d)
    order.push_back("i!" + std::to_string(d));
  smt::Model m = solver.shrink("cex", region, r.model, order);
  addSizes(cex, m);
  for (size_t d = 0; d < shape.rank(); ++d)
    cex.index.push_back(m.get("i!" + std::to_string(d)).value_or(0));
  if (expected)
    cex.expected = renderAt(expected, m);
  if (actual)
    cex.actual = renderAt(actual, m);
  return cex;
}

} // namespace shardproof::relation
