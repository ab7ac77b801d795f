// The spec's claims about reference tensors: shapes first, then elements,
// proven on the normal forms, refuted only by a difference confirmed on
// numbers, else unknown with the solver's reason.
#include "Claims.h"
#include "LayerCopy.h"
#include "MemoKeys.h"

#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <iterator>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

// The rank nodes that write an output of this name (on `rank`, or on every
// rank for -1): where an output that differs is computed.
static std::vector<std::string> outputProducers(const std::vector<ir::Graph> &ranks, const std::string &name,
                                                int rank) {
  std::vector<std::string> out;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    auto id = ranks[r].find(name);
    int p = id && (rank < 0 || rank == r) ? ranks[r].values[*id].producer : -1;
    if (p >= 0)
      out.push_back("rank " + std::to_string(r) + ": " + ranks[r].nodes[p].name + " (" + ranks[r].nodes[p].opType + ")");
  }
  return out;
}

const std::vector<ValueInfo> &Claims::allReferenceValues() {
  if (pendingRef)
    pendingRef->ensureAll();
  return refValues;
}

// One claim of the spec about a reference tensor (an output, or a `layers:`
// checkpoint): proven, refuted with a numeric witness, or unknown. Failures go
// to the result.
llvm::Expected<OutputResult> Claims::check(int id, const spec::Placement &pl,
                                          std::vector<PendingObligation> &raised) {
  const std::string &name = core.ref.values[id].name;
  OutputResult res;
  res.tensor = name;
  if (pendingRef)
    pendingRef->ensure(id);
  const ValueInfo &v = refValues[id];
  if (core.solver.pastDeadline()) {
    res.verdict = Verdict::Unknown;
    res.detail = core.solver.budgetMessage() + " before '" + name + "' was checked";
    return res;
  }
  if (!v.term) {
    res.verdict = Verdict::Unknown;
    res.detail = v.unsupported.empty() ? "no element map for the reference output" : v.unsupported;
    return res;
  }
  auto sides = this->sides(raised).ofClaim(name, pl);
  if (!sides) {
    auto taken = takeError(sides.takeError());
    if (taken.kind == ErrorKind::User)
      return userError(taken.message, taken.loc);
    res.verdict = Verdict::Unknown;
    res.detail = taken.text;
    return res;
  }
  res.verdict = Verdict::Verified;
  for (auto &[rank, side] : *sides)
    if (!shapesAgree(res, rank, side.second, *v.shape) || !elementsAgree(res, id, rank, side.first))
      break; // one counterexample per output is enough
  return res;
}

// Shapes first: the implementation must produce the reference's shape. A
// mismatch sets the verdict and records the failure, with the smallest sizes
// that show it.
bool Claims::shapesAgree(OutputResult &res, int rank, const Shape &impl, const Shape &shape) {
  std::optional<Counterexample> sizesCex;
  bool ok = impl.rank() == shape.rank();
  if (!ok)
    sizesCex = dimCountMismatch(res, rank, impl, shape);
  for (size_t d = 0; ok && d < shape.rank(); ++d)
    ok = dimAgrees(res, rank, d, impl.dims[d], shape.dims[d], sizesCex);
  if (ok)
    return true;
  Failure f;
  f.kind = Failure::OutputMismatch;
  f.message = "output '" + res.tensor + "': " + res.detail;
  f.tensor = res.tensor;
  f.cex = sizesCex;
  f.rankNodes = outputProducers(core.ranks, res.tensor, rank);
  core.result.failures.push_back(f);
  return false;
}

// A different number of dims is wrong at every size: the smallest sizes show it.
std::optional<Counterexample> Claims::dimCountMismatch(OutputResult &res, int rank, const Shape &impl,
                                                       const Shape &shape) {
  res.verdict = Verdict::Refuted;
  res.detail = "the implementation has " + std::to_string(impl.rank()) + " dims, the reference " +
               std::to_string(shape.rank());
  smt::CheckResult any = core.solver.check("output.rank.cex", Expr::boolConst(true));
  if (any.result != smt::Result::Sat)
    return std::nullopt;
  Counterexample cex;
  cex.tensor = res.tensor;
  cex.rank = rank;
  core.addSizes(cex, core.solver.shrink("output.rank.cex", Expr::boolConst(true), any.model, core.symbols));
  return cex;
}

// Dim `d` proven the same on both sides; else the verdict, the detail and,
// when refuted, the smallest sizes where the two differ.
bool Claims::dimAgrees(OutputResult &res, int rank, size_t d, const Expr &impl, const Expr &want,
                       std::optional<Counterexample> &sizesCex) {
  Expr same = impl == want;
  smt::Proof p = core.solver.prove("output.shape", same);
  if (p.proved())
    return true;
  res.verdict = p.status == smt::Proof::Refuted ? Verdict::Refuted : Verdict::Unknown;
  std::string implText = impl.str(), wantText = want.str();
  if (p.status == smt::Proof::Refuted) {
    Counterexample cex;
    cex.tensor = res.tensor;
    cex.rank = rank;
    smt::Model m = core.solver.shrink("output.shape.cex", !same, p.counterexample, core.symbols);
    core.addSizes(cex, m);
    sizesCex = cex;
    // Long size formulas (clamped slice bounds) read better as numbers.
    auto env = [&](const std::string &n) { return m.get(n); };
    auto at = [&](const Expr &e, std::string &out) {
      if (out.size() <= 60)
        return;
      if (auto v = e.eval(env))
        out = std::to_string(*v) + " (at " + cex.str() + ")";
    };
    at(impl, implText);
    at(want, wantText);
    auto iv = impl.eval(env), rv = want.eval(env);
    if (iv && rv && *iv != *rv) {
      sizesCex->replayed = true;
      sizesCex->replay = "dim " + std::to_string(d) + " is " + std::to_string(*iv) + " on the implementation, " +
                         std::to_string(*rv) + " on the reference";
    }
  }
  res.detail = "dim " + std::to_string(d) + " is " + implText + " on the implementation, " + wantText +
               " on the reference";
  return false;
}

// Unfolding steps tried before searching for a numeric difference (each
// unfolds a node on every rank that is read; see withPeers).
constexpr unsigned kQuickUnfoldSteps = 16;
// Size assignments the witness search tries once a size obligation already
// refutes the implementation.
constexpr int kAttemptsWhenRefuted = 1;

// The elements: equal in normal form, a difference confirmed on numbers
// (REFUTED), or neither (UNKNOWN, after unfolding the rank tensors).
bool Claims::elementsAgree(OutputResult &res, int id, int rank, const Term &side) {
  const std::string &name = res.tensor;
  const Shape &shape = *refValues[id].shape;
  Prover &prover = core.prover;
  Prover::Scope sc(prover, CheckCore::bounds(shape));
  const Term a0 = refValues[id].term, b0 = prover.normalize(side, 0);
  std::string who = rank >= 0 ? " on rank " + std::to_string(rank) : "";
  std::optional<Expr> diff = prover.firstDifference(a0, b0, 0);
  if (!diff)
    return true;
  // Unfold the rank tensors into their definitions before trying numbers: a
  // rank output that is a collective's class meets the reference an unfolding
  // or a few away (an all-reduced gradient: the sum of the ranks' partial
  // sums). The numeric search costs far more where the outputs agree: 286 s
  // of 288 on the captured 405B-shaped training step with one layer, whose
  // outputs unfold to equal in at most 13 steps (0.1 s). Past the quick
  // steps, numbers first: the terms of a wrong output only grow.
  // The same output a layer up (its weight gradients) agrees by the same
  // unfoldings of renamed classes: at 126 layers, 1,100 such outputs took
  // two of the output check's three seconds.
  std::optional<MemoKey> key;
  if (core.opts.memo && prover.pathDepth() == 1) {
    key = agreementKey(a0, b0, shape, core.classes);
    if (core.memo.lookup(*key, core.classes))
      return true;
  }
  MemoRecording rec(core, std::move(key));
  if (!unfoldUntilEqual(a0, b0, *diff, kQuickUnfoldSteps)) {
    rec.store({}); // agreement alone: no terms to keep
    return true;
  }
  // Already refuted: the smallest sizes only (each attempt replays the whole
  // model, and this output cannot change the verdict).
  int attempts = refutedBy.empty() ? INT_MAX : kAttemptsWhenRefuted;
  auto w = core.witness(allReferenceValues()).search(*diff, id, rank, shape, a0, b0, attempts);
  if (!w && !refutedBy.empty()) {
    // Not a failure of its own (no solver limit was met): the output's row
    // says why it was left.
    res.verdict = Verdict::Unknown;
    res.detail = "output '" + name + "'" + who + " not compared further: the implementation is already refuted (" +
                 refutedBy + ")";
    return false;
  }
  Failure f;
  f.kind = Failure::OutputMismatch;
  f.tensor = name;
  f.rankNodes = outputProducers(core.ranks, name, rank);
  if (w) {
    res.verdict = Verdict::Refuted;
    f.cex = w;
    f.message = "output '" + name + "'" + who + " differs from the reference";
    if (w->leakValue) {
      f.bugClass = BugClass::MaskLeak;
      f.message += llvm::formatv("; content the reference never reads (padding) reaches it: with only those "
                                 "elements changed it becomes {0}",
                                 *w->leakValue)
                       .str();
    }
    localizeDeparture(f, a0, b0);
  } else {
    // No difference on numbers: unfold further.
    diff = unfoldUntilEqual(a0, b0, *diff, core.opts.maxExpansion);
    if (!diff)
      return true;
    if (res.verdict != Verdict::Refuted)
      res.verdict = Verdict::Unknown;
    f.kind = Failure::SolverUnknown;
    f.cex = core.makeCounterexample(*diff, name, rank, shape, a0, b0);
    f.message = "could not prove output '" + name + "'" + who +
                " equal to the reference, and found no numeric difference at the sizes tried" +
                (prover.sawUnknown() ? " (" + prover.unknownReason() + ")" : "");
  }
  res.detail = f.message;
  core.result.failures.push_back(f);
  return false;
}

namespace {

// The class to unfold next: the highest computed class either side reads, or
// with `oneSidedFirst` the highest that only one side reads (a data-parallel
// rank's loss class against the reference's split sum, which already reads
// the classes that loss is computed from). A class both sides read is a
// subterm they share; unfolding it grows both without bringing them closer.
ClassId nextToUnfold(const Term &a, const Term &b, const ClassTable &classes, bool oneSidedFirst) {
  ClassId none = static_cast<ClassId>(-1);
  ClassId ca = Prover::highestComputed(a, classes), cb = Prover::highestComputed(b, classes);
  ClassId highest = ca == none ? cb : cb == none ? ca : std::max(ca, cb);
  if (!oneSidedFirst)
    return highest;
  std::vector<ClassId> ra, rb;
  collectReads(a, ra);
  collectReads(b, rb);
  std::sort(ra.begin(), ra.end());
  std::sort(rb.begin(), rb.end());
  std::vector<ClassId> oneSided;
  std::set_symmetric_difference(ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(oneSided));
  for (auto it = oneSided.rbegin(); it != oneSided.rend(); ++it)
    if (classes[*it].kind == ClassInfo::Compute)
      return *it;
  return highest;
}

// `c` and the classes either side reads that the same node computes on the
// other ranks: one step unfolds a node on every rank, so the steps a proof
// needs do not grow with the world size. A vocab-parallel softmax reads its
// shifted exponentials on each of P ranks; one class a step, the proposal for
// the reference's softmax minus one-hot met at 2 ranks and not at 4, and the
// captured training step stayed UNKNOWN at TP4 and TP8.
std::vector<ClassId> withPeers(const Term &a, const Term &b, ClassId c, const ClassTable &classes) {
  std::vector<ClassId> out{c};
  const ClassInfo &ci = classes[c];
  if (ci.rank < 0 || ci.node.empty())
    return out;
  std::vector<ClassId> reads;
  collectReads(a, reads);
  collectReads(b, reads);
  std::sort(reads.begin(), reads.end());
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  for (ClassId r : reads) {
    const ClassInfo &ri = classes[r];
    if (r != c && ri.kind == ClassInfo::Compute && ri.rank >= 0 && ri.rank != ci.rank && ri.node == ci.node)
      out.push_back(r);
  }
  return out;
}

} // namespace

std::optional<Expr> Claims::unfoldUntilEqual(Term a0, Term b0, Expr diff, unsigned maxSteps) {
  ClassTable &classes = core.classes;
  Prover &prover = core.prover;
  std::optional<Expr> d = diff;
  // The highest class first; where that does not meet, again with the classes
  // only one side reads first (a data-parallel loss, Prover::equal's sizes).
  for (bool oneSidedFirst : {false, true}) {
    Term a = a0, b = b0;
    bool normal = false;
    d = diff;
    unsigned expansions = 0;
    bool undecided = false;
    while (d) {
      ClassId c = nextToUnfold(a, b, classes, oneSidedFirst);
      if (c == static_cast<ClassId>(-1) || ++expansions > maxSteps)
        break;
      // A step whose comparison the solver could not decide is not unfolded
      // further: without those facts the terms only grow (with
      // --solver-timeout 0, 64 such steps took a minute on one GPT block), and
      // the answer is UNKNOWN with the solver's reason either way.
      const unsigned undecidedBefore = core.solver.undecided();
      for (ClassId p : withPeers(a, b, c, classes)) {
        a = normal ? prover.expandClassInNormal(a, p, 0) : prover.expandClass(a, p, 0);
        b = normal ? prover.expandClassInNormal(b, p, 0) : prover.expandClass(b, p, 0);
        normal = true; // both were normalized here, under this path
      }
      d = prover.firstDifference(a, b, 0);
      undecided = d && core.solver.undecided() != undecidedBefore;
      if (undecided)
        break;
    }
    if (!d || undecided)
      break;
  }
  return d;
}

} // namespace shardproof::relation
