// What executing at the counterexample sizes showed (`shardproof replay`,
// `check --witness`), and the `--sample` cross-check of a VERIFIED result.
#include "shardproof/report/Report.h"

#include <llvm/Support/Format.h>

namespace shardproof::report {

using namespace relation;

// Whether a failure is a claim execution can test: an output that differs or a
// size condition that fails. "No rank computes X" says where a mismatch starts;
// the output failures after it are what replay executes.
static bool executable(const Failure &f) {
  return f.cex && (f.kind == Failure::OutputMismatch || f.kind == Failure::Obligation);
}

bool printReplay(llvm::raw_ostream &os, const Result &r) {
  os << "\nReplay (seeded random inputs and weights, related as the spec says; collectives simulated):\n";
  if (r.verdict != Verdict::Refuted) {
    os << "  nothing to replay: the verdict is " << toString(r.verdict) << "\n";
    return true;
  }
  unsigned shown = 0, confirmed = 0;
  for (const Failure &f : r.failures) {
    if (!executable(f))
      continue;
    const Counterexample &c = *f.cex;
    os << "  " << ++shown << ". " << f.message << "\n";
    os << "     at " << c.str() << "\n";
    if (c.replayed && !c.replay.empty()) {
      os << "     evaluated: " << c.replay << "\n     CONFIRMED\n";
      ++confirmed;
    } else if (c.replayed) {
      os << "     reference " << (c.expectedByInterpreter ? "graph (interpreter)" : "side") << " = "
         << llvm::format("%.9g", c.expectedValue) << "\n"
         << "     rank graphs                 = " << llvm::format("%.9g", c.actualValue) << "\n"
         << "     CONFIRMED: the two numbers differ\n";
      ++confirmed;
    } else {
      os << "     NOT CONFIRMED: execution at these sizes did not show the difference (the refutation rests on "
            "the solver's proof alone)\n";
    }
  }
  if (shown == 0)
    os << "  no failure with a counterexample to execute\n";
  else
    os << "  " << confirmed << " of " << shown << " confirmed by execution\n";
  return shown > 0 && confirmed > 0;
}

void printSample(llvm::raw_ostream &os, const SampleResult &s) {
  os << "\nSampled execution (" << s.sizes << " random admissible sizes, " << s.elements
     << " output elements compared):\n";
  for (auto &at : s.sizesTried)
    os << "  " << at << "\n";
  for (auto &k : s.skipped)
    os << "  skipped: " << k << "\n";
  if (s.disagreements.empty()) {
    os << "  every compared element agrees with the reference\n";
    return;
  }
  os << "INTERNAL ERROR: the proof says VERIFIED but execution disagrees (a bug in shardproof; please report "
        "it with this spec):\n";
  for (auto &d : s.disagreements)
    os << "  " << d << "\n";
}

} // namespace shardproof::report
