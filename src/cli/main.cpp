// The command line: parses arguments, loads files, runs the check, prints.
// Everything of substance lives in the libraries.
#include "shardproof/ir/Ops.h"
#include "shardproof/onnx/Loader.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/report/RelationFile.h"
#include "shardproof/report/Report.h"
#include "shardproof/spec/Spec.h"

#include <CLI/CLI.hpp>
#include <llvm/Support/raw_ostream.h>

#include <filesystem>
#include <optional>

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
  shardproof infer specs/examples/gpt_tp2.yaml -o gpt_tp2.relations.yaml
  shardproof check specs/examples/gpt_tp2.yaml --relations gpt_tp2.relations.yaml

)";

const char *kExitCodes = R"(Exit codes:
  0  VERIFIED  every reference output is rebuilt from the ranks for all sizes
  1  REFUTED   a concrete counterexample (sizes, rank, index) was found
  2  UNKNOWN   could not decide (unsupported op, solver limit); the reason is printed
  3  bad input (missing/corrupt file, bad YAML, unknown tensor name, ...)
  4  internal error (a bug in shardproof; please report it)
  5  relations changed: VERIFIED, but check --relations found a tensor whose
     relation differs from the recorded file (REFUTED/UNKNOWN keep 1/2))";

const char *kCheckFooter = R"(
The report: a table of the relation found for every reference tensor, the
verdict per output, and for a failure the first reference node no rank
computes, its module path, the rank nodes nearby and a counterexample
(sizes, rank, index) whose two sides were evaluated on numbers.

Examples:
  shardproof check specs/examples/mlp_tp2.yaml                  # VERIFIED
  shardproof check specs/examples/mlp_bias_before_reduce.yaml   # REFUTED at fc2
  shardproof check spec.yaml --json report.json --stats
  shardproof check specs/examples/gpt_tp2.yaml --relations specs/examples/gpt_tp2.relations.yaml

With --relations FILE (written by `shardproof infer`), the relations found are
compared with the recorded ones: the report names the first tensor, in graph
order, whose relation changed (recorded vs now), and the tensors added or
removed. See docs/relation-files.md.

)";

const char *kInferFooter = R"(
Runs the same check as `shardproof check` and writes the relation found for
every reference tensor (Constant nodes left out), one line each in graph order
with its module path, op and status: a stable YAML file meant to be committed
and read in code review. The same models always give the same bytes. The file
is written whatever the verdict (it records it); the exit code is the check's.
`shardproof check SPEC --relations FILE` later reports what changed. See
docs/relation-files.md.

Examples:
  shardproof infer specs/examples/gpt_tp2.yaml -o specs/examples/gpt_tp2.relations.yaml
  shardproof check specs/examples/gpt_tp2.yaml --relations specs/examples/gpt_tp2.relations.yaml

)";

int reportError(llvm::Error e) {
  auto taken = takeError(std::move(e));
  llvm::errs() << "shardproof: " << taken.text << "\n";
  return taken.kind == ErrorKind::Internal ? kExitInternal : kExitBadInput;
}

struct CheckArgs {
  std::string spec;
  std::string json;
  std::string smtDump;
  std::string relationsIn;  // check --relations: compare with this file
  std::string relationsOut; // infer -o: write the relations here
  unsigned timeoutMs = 10000;
  bool quiet = false, noTable = false, stats = false;
};

// `check` and `infer` run the same verification; `infer` then writes the
// relation file, `check --relations` compares with one.
int run(const CheckArgs &a, bool infer) {
  auto spec = spec::loadSpec(a.spec);
  if (!spec)
    return reportError(spec.takeError());
  // Read the recorded relations before the (long) check, so a bad file fails fast.
  std::optional<report::RelationFile> recorded;
  if (!a.relationsIn.empty()) {
    auto f = report::readRelationFile(a.relationsIn);
    if (!f)
      return reportError(f.takeError());
    recorded = std::move(*f);
  }
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
  if (!a.json.empty())
    if (auto e = report::writeFileAtomically(a.json, report::toJson(*result, ctx)))
      return reportError(std::move(e));
  if (infer) {
    if (auto e = report::writeFileAtomically(a.relationsOut, report::writeRelationFile(*result, ctx)))
      return reportError(std::move(e));
    if (!a.quiet)
      llvm::outs() << "wrote " << report::recordedEntries(*result).size() << " relations to " << a.relationsOut
                   << "\n";
  }
  if (!recorded)
    return report::exitCode(result->verdict);
  report::RelationDiff diff = report::diffRelations(*recorded, *result);
  report::printRelationDiff(llvm::outs(), diff, a.relationsIn, ctx, a.quiet);
  return report::exitCode(result->verdict, diff);
}

} // namespace

int main(int argc, char **argv) {
  const std::string description = std::string(kIntro) + kExitCodes;
  CLI::App app{description, "shardproof"};
  app.set_version_flag("--version", "shardproof 0.1.0");
  app.require_subcommand(1);

  // Options both verifying subcommands share.
  auto addCommon = [](CLI::App *cmd, CheckArgs &a) {
    cmd->add_option("spec", a.spec, "The YAML spec (paths in it are relative to it)")->required();
    cmd->add_option("--json", a.json, "Also write the report as JSON to this file");
    cmd->add_option("--timeout-ms", a.timeoutMs, "Solver timeout per query, in milliseconds (a timeout gives UNKNOWN)")
        ->capture_default_str();
    cmd->add_option("--smt-dump", a.smtDump, "Write every solver query as an SMT-LIB file into this directory");
    cmd->add_flag("-q,--quiet", a.quiet, "Print only the verdict line");
    cmd->add_flag("--stats", a.stats, "Print node, solver and timing figures");
  };

  CheckArgs check;
  auto *cmd = app.add_subcommand("check", "Prove the implementation refines the reference");
  cmd->footer(std::string(kCheckFooter) + kExitCodes);
  addCommon(cmd, check);
  cmd->add_flag("--no-table", check.noTable, "Omit the per-layer relation table");
  cmd->add_option("--relations", check.relationsIn,
                  "Compare the relations found with this file (from `shardproof infer`); exit 5 if they "
                  "differ and the verdict is VERIFIED");

  // The file holds the table, so infer does not print it too.
  CheckArgs inferArgs;
  inferArgs.noTable = true;
  auto *infer = app.add_subcommand("infer", "Check, and write the relation of every reference tensor to a file");
  infer->footer(std::string(kInferFooter) + kExitCodes);
  addCommon(infer, inferArgs);
  infer->add_option("-o,--output", inferArgs.relationsOut, "The relation file to write (YAML)")->required();

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
  if (*infer)
    return run(inferArgs, /*infer=*/true);
  return run(check, /*infer=*/false);
}
