// The command line: parses arguments, loads files, runs the check, prints.
// Everything of substance lives in the libraries.
#include "shardproof/ir/Ops.h"
#include "shardproof/onnx/Loader.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/report/Report.h"
#include "shardproof/spec/Spec.h"

#include <CLI/CLI.hpp>
#include <llvm/Support/raw_ostream.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace shardproof;

namespace {

constexpr int kExitBadInput = 3;
constexpr int kExitInternal = 4;

const char *kIntro = R"(shardproof proves that a sharded (tensor/sequence/vocab-parallel) implementation
of a model computes the same as its single-device reference, for every admissible
size, or shows where and why it does not.

Inputs: a YAML spec naming the reference ONNX model, one ONNX model per rank
(collectives as com.microsoft AllReduce/AllGather nodes), the symbolic sizes and
how each reference input and output is distributed. See docs/spec-format.md.

Example:
  shardproof check specs/examples/mlp_tp2.yaml
  shardproof check specs/examples/mlp_tp2.yaml --json report.json

)";

const char *kExitCodes = R"(Exit codes:
  0  VERIFIED  every reference output is rebuilt from the ranks for all sizes
  1  REFUTED   a concrete counterexample (sizes, rank, index) was found
  2  UNKNOWN   could not decide (unsupported op, solver limit); the reason is printed
  3  bad input (missing/corrupt file, bad YAML, unknown tensor name, ...)
  4  internal error (a bug in shardproof; please report it))";

const char *kCheckFooter = R"(
The report: a table of the relation found for every reference tensor, the
verdict per output, and for a failure the first reference node no rank
computes, its module path, the rank nodes nearby and a counterexample
(sizes, rank, index) whose two sides were evaluated on numbers.

Examples:
  shardproof check specs/examples/mlp_tp2.yaml                  # VERIFIED
  shardproof check specs/examples/mlp_bias_before_reduce.yaml   # REFUTED at fc2
  shardproof check spec.yaml --json report.json --stats

)";

int reportError(llvm::Error e) {
  auto taken = takeError(std::move(e));
  llvm::errs() << "shardproof: " << taken.text << "\n";
  return taken.kind == ErrorKind::Internal ? kExitInternal : kExitBadInput;
}

// Writes via a temporary file and a rename, so a failure never leaves half a report.
bool writeAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f || !(f << text) || !f.flush())
      return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    std::filesystem::remove(tmp, ec);
  return !ec;
}

struct CheckArgs {
  std::string spec;
  std::string json;
  std::string smtDump;
  unsigned timeoutMs = 10000;
  bool quiet = false, noTable = false, stats = false;
};

int runCheck(const CheckArgs &a) {
  auto spec = spec::loadSpec(a.spec);
  if (!spec)
    return reportError(spec.takeError());
  auto ref = onnxio::loadModel(spec->reference);
  if (!ref)
    return reportError(ref.takeError());
  std::vector<ir::Graph> ranks;
  for (size_t r = 0; r < spec->rankPaths.size(); ++r) {
    if (!std::filesystem::exists(spec->rankPaths[r]))
      return reportError(userError("rank " + std::to_string(r) + " model '" + spec->rankPaths[r] +
                                       "' does not exist (from `ranks:` with world_size " +
                                       std::to_string(spec->worldSize) + ")",
                                   spec->ranksLoc));
    auto g = onnxio::loadModel(spec->rankPaths[r]);
    if (!g)
      return reportError(g.takeError());
    ranks.push_back(std::move(*g));
  }
  relation::Options opts;
  opts.solverTimeoutMs = a.timeoutMs;
  opts.smtDumpDir = a.smtDump;
  auto result = relation::verify(*ref, ranks, *spec, opts);
  if (!result)
    return reportError(result.takeError());
  report::Context ctx{a.spec, spec->reference, spec->rankPaths};
  if (!a.quiet) {
    report::TextOptions t;
    t.showTable = !a.noTable;
    t.showStats = a.stats;
    report::printText(llvm::outs(), *result, ctx, t);
  } else {
    llvm::outs() << relation::toString(result->verdict) << ": " << result->reason << "\n";
  }
  llvm::outs().flush();
  if (!a.json.empty() && !writeAtomically(a.json, report::toJson(*result, ctx))) {
    llvm::errs() << "shardproof: cannot write " << a.json << "\n";
    return kExitBadInput;
  }
  return report::exitCode(result->verdict);
}

} // namespace

int main(int argc, char **argv) {
  const std::string description = std::string(kIntro) + kExitCodes;
  CLI::App app{description, "shardproof"};
  app.set_version_flag("--version", "shardproof 0.1.0");
  app.require_subcommand(1);

  CheckArgs check;
  auto *cmd = app.add_subcommand("check", "Prove the implementation refines the reference");
  cmd->footer(std::string(kCheckFooter) + kExitCodes);
  cmd->add_option("spec", check.spec, "The YAML spec (paths in it are relative to it)")->required();
  cmd->add_option("--json", check.json, "Also write the report as JSON to this file");
  cmd->add_option("--timeout-ms", check.timeoutMs, "Solver timeout per query, in milliseconds (a timeout gives UNKNOWN)")
      ->capture_default_str();
  cmd->add_option("--smt-dump", check.smtDump, "Write every solver query as an SMT-LIB file into this directory");
  cmd->add_flag("-q,--quiet", check.quiet, "Print only the verdict line");
  cmd->add_flag("--no-table", check.noTable, "Omit the per-layer relation table");
  cmd->add_flag("--stats", check.stats, "Print node, solver and timing figures");

  auto *ops = app.add_subcommand("ops", "List the supported operators");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    app.exit(e);
    return kExitBadInput;
  }

  if (*ops) {
    for (const ir::OpDef *d : ir::allOps())
      llvm::outs() << (std::string(d->domain).empty() ? "" : std::string(d->domain) + "::") << d->type << "\n";
    return 0;
  }
  return runCheck(check);
}
