// The command line: parses arguments, loads files, runs the check, prints.
// Everything of substance lives in the libraries.
#include "Progress.h"

#include "shardproof/ir/Ops.h"
#include "shardproof/onnx/Loader.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/report/RelationFile.h"
#include "shardproof/report/Report.h"
#include "shardproof/spec/Draft.h"
#include "shardproof/spec/Spec.h"

#include <CLI/CLI.hpp>
#include <llvm/Support/raw_ostream.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <sys/resource.h>
#include <time.h>

using namespace shardproof;

namespace {

constexpr int kExitUnknown = 2;
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
  shardproof replay specs/examples/seq_pos_chunk_tp3.yaml

)";

const char *kExitCodes = R"(Exit codes:
  0  VERIFIED  every reference output is rebuilt from the ranks for all sizes
  1  REFUTED   a concrete counterexample (sizes, rank, index) was found
  2  UNKNOWN   could not decide (unsupported op, solver limit); the reason is printed
  3  bad input (missing/corrupt file, bad YAML, unknown tensor name, ...)
  4  internal error (a bug in shardproof; please report it), including
     check --sample finding execution disagree with a VERIFIED proof
  5  relations changed: VERIFIED, but check --relations found a tensor whose
     relation differs from the recorded file (REFUTED/UNKNOWN keep 1/2)
Every error message, its cause and its fix: docs/errors.md)";

const char *kCheckFooter = R"(
The report: a table of the relation found for every reference tensor, the
verdict per output, and for a failure the first reference node no rank
computes, its module path, the rank nodes nearby and a counterexample
(sizes, rank, index) whose two sides were evaluated on numbers.

Examples:
  shardproof check specs/examples/mlp_tp2.yaml                  # VERIFIED
  shardproof check specs/examples/mlp_bias_before_reduce.yaml   # REFUTED at fc2
  shardproof check spec.yaml --json report.json --stats
  shardproof check spec.yaml --sarif review.sarif   # annotations for code review (docs/code-review.md)
  shardproof check spec.yaml --summary-md pr.md     # a pull-request comment: verdict, failing node, replay
  shardproof check spec.yaml --html proof.html      # the proof as a page: module tree, failure, collectives
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

const char *kReplayFooter = R"(
Runs the check; for every refuted output or size condition it then shows what
executing at the counterexample's sizes gives: the reference graph run by the
built-in interpreter and the rank graphs' element maps (collectives simulated),
on seeded random inputs and weights related as the spec says (a replicated
weight is the same on every rank, a shard is the rank's slice of the reference
tensor). It prints the two numbers that differ at the reported index, or the
sizes that differ, and says plainly when execution could not confirm the
mismatch.

Examples:
  shardproof replay specs/examples/seq_pos_chunk_tp3.yaml
  shardproof check specs/examples/mlp_no_allreduce.yaml --witness
  shardproof check specs/examples/seq_chunk_tp3.yaml --sample 5

)";

const char *kInitFooter = R"(
Drafts a spec from the graphs alone, so that checking a new model starts from
something that runs. Every reference input and output gets a placement:
  replicated     the same shape on the reference and every rank
  {shard: K}     axis K is cut across the ranks, with the split policy whose
                 per-rank sizes are exactly the ranks' (even, chunk,
                 tensor_split, sizes, pad_to_multiple); a rank-only size such
                 as seq_local is assumed an even split, with the constraint
                 it needs written under constraints:
  values:        integer ids that index an embedding table get its range
  (omitted)      initializers equal on the reference and every rank
  TODO           anything else; `shardproof check` rejects the spec until each
                 TODO is replaced (the comment beside it says what to decide)
Each guess carries a comment saying what it was inferred from. Every dynamic
size of the reference is listed under symbols; inputs only the ranks have are
listed at the end, to be bound if they carry sizes as data.

Examples:
  shardproof init out/reference.onnx out/rank0.onnx out/rank1.onnx -o spec.yaml
  shardproof init out/reference.onnx --ranks 'out/rank{r}.onnx' --world-size 4 -o spec.yaml
  shardproof check spec.yaml

Exit codes: 0 written (TODOs included), 3 bad input (nothing written).
)";

// User + system time of the whole process so far, every thread.
double processCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

long peakRssKiB() {
  struct rusage ru {};
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0; // KiB on Linux
}

// What the process frees only by ending (clang's -disable-free, LLVM's
// BuryPointer): the check's graphs and state, a million nodes and terms at 126
// layers that took 2 s to free one by one. Reachable from this global, so a
// leak checker does not report them.
void buryUntilExit(std::shared_ptr<void> p) {
  static auto *buried = new std::vector<std::shared_ptr<void>>;
  buried->push_back(std::move(p));
}

// Valid input beyond what shardproof reasons about (a collective over a
// sub-group) is UNKNOWN with its reason, as the exit codes promise.
int reportError(llvm::Error e) {
  auto taken = takeError(std::move(e));
  if (taken.kind == ErrorKind::Unsupported) {
    llvm::outs() << "UNKNOWN: " << taken.text << "\n";
    return kExitUnknown;
  }
  llvm::errs() << "shardproof: " << taken.text << "\n";
  return taken.kind == ErrorKind::Internal ? kExitInternal : kExitBadInput;
}

struct CheckArgs {
  std::string spec;
  std::string json;
  std::string sarif; // --sarif
  std::string summaryMd; // --summary-md
  std::string html;      // --html
  std::string smtDump;
  std::string relationsIn;  // check --relations: compare with this file
  std::string relationsOut; // infer -o: write the relations here
  unsigned timeoutMs = 10000;
  unsigned samples = 0;  // --sample N
  uint64_t seed = 1;     // --seed
  unsigned memoryMb = 0;
  double timeBudget = -1; // seconds; < 0: none
  bool quiet = false, noTable = false, stats = false;
  unsigned jobs = 1;    // --jobs
  bool noMemo = false;  // --no-memo
  bool witness = false; // --witness, and the replay subcommand
};

// `check` and `infer` run the same verification; `infer` then writes the
// relation file, `check --relations` compares with one.
int run(const CheckArgs &a, bool infer) {
  auto tLoad = std::chrono::steady_clock::now();
  const double cpuLoad = processCpuSeconds();
  auto spec = spec::loadSpec(a.spec);
  if (!spec)
    return reportError(spec.takeError());
  // An output that cannot be written fails now, not after a long check.
  std::vector<std::string> inputs{a.spec, spec->reference};
  inputs.insert(inputs.end(), spec->rankPaths.begin(), spec->rankPaths.end());
  if (!a.relationsIn.empty())
    inputs.push_back(a.relationsIn);
  for (const std::string *out : {&a.json, &a.sarif, &a.summaryMd, &a.html, &a.relationsOut}) {
    if (auto e = report::checkNotAnInput(*out, inputs))
      return reportError(std::move(e));
    if (auto e = report::checkWritable(*out))
      return reportError(std::move(e));
  }
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
  for (size_t r = 0; r < spec->rankPaths.size(); ++r)
    if (!std::filesystem::exists(spec->rankPaths[r]))
      return reportError(userError("rank " + std::to_string(r) + " model '" + spec->rankPaths[r] +
                                       "' does not exist (from `ranks:` with world_size " +
                                       std::to_string(spec->worldSize) + ")",
                                   spec->ranksLoc));
  // --jobs also parses the rank files in parallel.
  auto loaded = onnxio::loadModels(spec->rankPaths, a.jobs);
  if (!loaded)
    return reportError(loaded.takeError());
  std::vector<ir::Graph> ranks = std::move(*loaded);
  double loadSeconds = secondsSince(tLoad);
  double loadCpuSeconds = processCpuSeconds() - cpuLoad;
  relation::Options opts;
  opts.solverTimeoutMs = a.timeoutMs;
  opts.solverMemoryMb = a.memoryMb;
  if (a.timeBudget >= 0)
    opts.timeBudgetSeconds = a.timeBudget;
  opts.smtDumpDir = a.smtDump;
  opts.samples = a.samples;
  opts.sampleSeed = a.seed;
  opts.jobs = a.jobs;
  opts.memo = !a.noMemo;
  opts.keepAtExit = buryUntilExit;
  cli::Progress progress;
  opts.progress = [&](const char *phase, size_t done, size_t total) { progress.update(phase, done, total); };
  // The report's list of collectives, before the check takes the graphs over.
  report::Context ctx{a.spec, spec->reference, spec->rankPaths};
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const ir::Node &n : ranks[r].nodes)
      if (const ir::OpDef *d = ir::opOf(n); d && d->cls == ir::OpClass::Collective)
        ctx.collectives.push_back({static_cast<int>(r), n.name, n.opType, n.modulePath()});
  auto verified = relation::verify(std::move(*ref), std::move(ranks), *spec, opts);
  buryUntilExit(std::make_shared<ir::Graph>(std::move(*ref)));
  buryUntilExit(std::make_shared<std::vector<ir::Graph>>(std::move(ranks)));
  progress.finish();
  if (!verified)
    return reportError(verified.takeError());
  // Rows, relations and failures: freed with the process, not one by one.
  auto kept = std::make_shared<relation::Result>(std::move(*verified));
  buryUntilExit(kept);
  relation::Result &result = *kept;
  for (auto *group : {&spec->inputs, &spec->outputs, &spec->layers})
    for (auto &[name, placement] : *group)
      ctx.placementLocs.emplace_back(name, placement.loc);
  ctx.ranksLoc = spec->ranksLoc;
  auto tReport = std::chrono::steady_clock::now();
  if (!a.quiet) {
    report::TextOptions t;
    t.showTable = !a.noTable;
    report::printText(llvm::outs(), result, ctx, t);
  } else {
    llvm::outs() << relation::toString(result.verdict) << ": " << result.reason << "\n";
  }
  if (a.witness)
    report::printReplay(llvm::outs(), result);
  bool disagree = result.sample && !result.sample->disagreements.empty();
  if (result.sample && (!a.quiet || disagree))
    report::printSample(disagree ? llvm::errs() : llvm::outs(), *result.sample);
  llvm::outs().flush();
  result.stats.loadSeconds = loadSeconds;
  result.stats.loadCpuSeconds = loadCpuSeconds;
  result.stats.reportSeconds = secondsSince(tReport);
  result.stats.peakRssKiB = peakRssKiB();
  if (a.stats) {
    report::printStats(llvm::outs(), result.stats);
    llvm::outs().flush();
  }
  if (!a.json.empty())
    if (auto e = report::writeFileAtomically(a.json, report::toJson(result, ctx)))
      return reportError(std::move(e));
  if (!a.sarif.empty()) {
    std::optional<report::RelationDiff> changes;
    if (recorded)
      changes = report::diffRelations(*recorded, result);
    if (auto e = report::writeFileAtomically(a.sarif, report::toSarif(result, ctx, changes ? &*changes : nullptr)))
      return reportError(std::move(e));
  }
  if (!a.summaryMd.empty()) {
    std::optional<report::RelationDiff> changes;
    if (recorded)
      changes = report::diffRelations(*recorded, result);
    if (auto e = report::writeFileAtomically(a.summaryMd,
                                              report::toMarkdown(result, ctx, changes ? &*changes : nullptr)))
      return reportError(std::move(e));
  }
  if (!a.html.empty())
    if (auto e = report::writeFileAtomically(a.html, report::toHtml(result, ctx)))
      return reportError(std::move(e));
  if (infer) {
    if (auto e = report::writeFileAtomically(a.relationsOut, report::writeRelationFile(result, ctx)))
      return reportError(std::move(e));
    if (!a.quiet)
      llvm::outs() << "wrote " << report::recordedEntries(result).size() << " relations to " << a.relationsOut
                   << "\n";
  }
  if (disagree)
    return kExitInternal; // proof and execution disagree: never trust either silently
  if (!recorded)
    return report::exitCode(result.verdict);
  report::RelationDiff diff = report::diffRelations(*recorded, result);
  report::printRelationDiff(llvm::outs(), diff, a.relationsIn, ctx, a.quiet);
  return report::exitCode(result.verdict, diff);
}

struct DiffArgs {
  std::string before, after, summaryMd;
};

// shardproof diff OLD NEW: two relation files of one model compared, for review.
int runDiff(const DiffArgs &a) {
  auto before = report::readRelationFile(a.before);
  if (!before)
    return reportError(before.takeError());
  auto after = report::readRelationFile(a.after);
  if (!after)
    return reportError(after.takeError());
  if (auto e = report::checkNotAnInput(a.summaryMd, {a.before, a.after}))
    return reportError(std::move(e));
  if (auto e = report::checkWritable(a.summaryMd))
    return reportError(std::move(e));
  report::RelationDiff d = report::diffRelationFiles(*before, *after);
  // Files of two different models share few tensors (inputs named x, y at
  // most): a diff of them would list everything and say nothing.
  size_t common = before->entries.size() - d.removed.size();
  size_t smaller = std::min(before->entries.size(), after->entries.size());
  if (smaller > 0 && 2 * common < smaller)
    return reportError(userError("'" + a.before + "' and '" + a.after + "' share only " + std::to_string(common) +
                                 " of " + std::to_string(smaller) +
                                 " tensors: they record different models (compare two files of one model)"));
  report::printRelationFileDiff(llvm::outs(), d, a.before, a.after);
  if (!a.summaryMd.empty())
    if (auto e = report::writeFileAtomically(a.summaryMd, report::relationDiffMarkdown(d, a.before, a.after)))
      return reportError(std::move(e));
  return d.empty() ? 0 : report::kExitRelationsChanged;
}

struct InitArgs {
  std::vector<std::string> models; // reference, then ranks
  std::string ranksPattern;
  unsigned worldSize = 0;
  std::string output;
  bool force = false;
};

// `init`: loads the graphs, drafts the spec next to where it will live.
int runInit(const InitArgs &a) {
  namespace fs = std::filesystem;
  if (a.models.empty())
    return reportError(userError("init needs the reference model (and the rank models or --ranks)"));
  std::vector<std::string> rankPaths(a.models.begin() + 1, a.models.end());
  if (!a.ranksPattern.empty()) {
    if (!rankPaths.empty())
      return reportError(userError("give the rank models either as arguments or with --ranks, not both"));
    if (a.worldSize == 0)
      return reportError(userError("--ranks '" + a.ranksPattern + "' needs --world-size P"));
    if (a.ranksPattern.find("{r}") == std::string::npos)
      return reportError(userError("--ranks '" + a.ranksPattern + "' has no {r} for the rank number"));
    for (unsigned r = 0; r < a.worldSize; ++r) {
      std::string p = a.ranksPattern;
      p.replace(p.find("{r}"), 3, std::to_string(r));
      rankPaths.push_back(p);
    }
  } else if (a.worldSize && a.worldSize != rankPaths.size()) {
    return reportError(userError("--world-size " + std::to_string(a.worldSize) + " but " +
                                 std::to_string(rankPaths.size()) + " rank models were given"));
  }
  if (rankPaths.empty())
    return reportError(userError("init needs the rank models: `init REF.onnx RANK0.onnx ...` or --ranks "
                                 "'dir/rank{r}.onnx' --world-size P"));
  std::error_code ec;
  fs::path out = fs::absolute(a.output);
  std::vector<std::string> inputs{a.models[0]};
  inputs.insert(inputs.end(), rankPaths.begin(), rankPaths.end());
  if (auto e = report::checkNotAnInput(a.output, inputs))
    return reportError(std::move(e));
  if (fs::exists(out) && !a.force)
    return reportError(userError(a.output + " already exists; pass --force to replace it"));
  if (auto e = report::checkWritable(a.output))
    return reportError(std::move(e));
  auto ref = onnxio::loadModel(a.models[0]);
  if (!ref)
    return reportError(ref.takeError());
  auto ranks = onnxio::loadModels(rankPaths, 1);
  if (!ranks)
    return reportError(ranks.takeError());
  // Paths in a spec are relative to the spec's own directory.
  fs::path base = out.parent_path();
  auto rel = [&](const std::string &p) { return fs::relative(fs::absolute(p), base, ec).generic_string(); };
  spec::DraftInput in;
  in.reference = &*ref;
  in.referencePath = rel(a.models[0]);
  for (size_t r = 0; r < ranks->size(); ++r) {
    in.ranks.push_back(&(*ranks)[r]);
    in.rankPaths.push_back(rel(rankPaths[r]));
  }
  spec::Draft d = spec::draftSpec(in);
  if (auto e = report::writeFileAtomically(a.output, d.yaml))
    return reportError(std::move(e));
  llvm::outs() << "wrote " << a.output << ": " << d.guesses << " placements guessed, " << d.todos
               << " left as TODO\n";
  llvm::outs() << (d.todos ? "edit the TODO lines, then run: shardproof check " : "next: shardproof check ")
               << a.output << "\n";
  return 0;
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
    cmd->add_option("--sarif", a.sarif, "Also write the failures as SARIF 2.1.0 to this file");
    cmd->add_option("--summary-md", a.summaryMd,
                    "Also write a Markdown summary for a pull-request comment to this file (docs/code-review.md)");
    cmd->add_option("--html", a.html,
                    "Also write the proof as one self-contained HTML page to this file (docs/code-review.md)");
    cmd->add_option("--solver-timeout,--timeout-ms", a.timeoutMs,
                    "Solver timeout per query, in milliseconds (a timeout gives UNKNOWN; once a size "
                    "obligation of the implementation fails, which refutes, at most 1000 for the rest)")
        ->capture_default_str();
    cmd->add_option("--solver-memory", a.memoryMb,
                    "Memory the solver may use, in MB (0: no limit; reaching it gives UNKNOWN)")
        ->capture_default_str();
    cmd->add_option("--time-budget", a.timeBudget,
                    "Wall time for the whole check, in seconds; what is left unchecked when it runs out "
                    "gives UNKNOWN naming the budget and where it stopped (default: none)")
        ->check(CLI::Validator(
            [](std::string &v) {
              double x = -1;
              try {
                x = std::stod(v);
              } catch (...) {
              }
              return x >= 0 ? std::string() : "must be a number of seconds, 0 or more; got '" + v + "'";
            },
            "SECONDS"));
    cmd->add_option("--smt-dump", a.smtDump, "Write every solver query as an SMT-LIB file into this directory");
    cmd->add_flag("-q,--quiet", a.quiet, "Print only the verdict line");
    cmd->add_option("-j,--jobs", a.jobs,
                    "Threads for independent solver work (the side conditions); the result is the same for any N")
        ->check(CLI::Range(1u, 256u))
        ->capture_default_str();
    cmd->add_flag("--no-memo", a.noMemo,
                  "Derive every node afresh (no reuse of an identical layer's work) and send every solver query and "
                  "side condition to the solver (no result cache, no deduplication); for comparing verdicts");
    cmd->add_flag("--stats", a.stats,
                  "After the report, print node, class, relation and solver counts, the time of each phase "
                  "and the peak memory (also in --json)");
  };

  CheckArgs check;
  auto *cmd = app.add_subcommand("check", "Prove the implementation refines the reference");
  cmd->footer(std::string(kCheckFooter) + kExitCodes);
  addCommon(cmd, check);
  cmd->add_flag("--no-table", check.noTable, "Omit the per-layer relation table");
  cmd->add_option("--relations", check.relationsIn,
                  "Compare the relations found with this file (from `shardproof infer`); exit 5 if they "
                  "differ and the verdict is VERIFIED");

  cmd->add_flag("--witness", check.witness,
                "Also print the replay of each counterexample (as `shardproof replay` does)");
  cmd->add_option("--sample", check.samples,
                  "After VERIFIED, also execute both sides at N random admissible sizes and compare every output "
                  "element; a disagreement is an internal error (exit 4)");
  cmd->add_option("--seed", check.seed, "Seed for the sizes --sample draws")->capture_default_str();

  CheckArgs replayArgs;
  replayArgs.witness = true;
  replayArgs.noTable = true;
  auto *replay = app.add_subcommand("replay", "Check, then execute each counterexample and print the two numbers");
  replay->footer(std::string(kReplayFooter) + kExitCodes);
  addCommon(replay, replayArgs);

  // The file holds the table, so infer does not print it too.
  CheckArgs inferArgs;
  inferArgs.noTable = true;
  auto *infer = app.add_subcommand("infer", "Check, and write the relation of every reference tensor to a file");
  infer->footer(std::string(kInferFooter) + kExitCodes);
  addCommon(infer, inferArgs);
  infer->add_option("-o,--output", inferArgs.relationsOut, "The relation file to write (YAML)")->required();

  InitArgs initArgs;
  auto *init = app.add_subcommand("init", "Draft a spec from the reference and rank models");
  init->footer(kInitFooter);
  init->add_option("models", initArgs.models, "REFERENCE.onnx, then RANK0.onnx RANK1.onnx ... (or use --ranks)")
      ->required();
  init->add_option("--ranks", initArgs.ranksPattern, "Rank models as a pattern with {r}, e.g. 'out/rank{r}.onnx'");
  init->add_option("--world-size", initArgs.worldSize, "Number of ranks (with --ranks)")->check(CLI::Range(1u, 4096u));
  init->add_option("-o,--output", initArgs.output, "The spec to write (YAML)")->required();
  init->add_flag("--force", initArgs.force, "Replace the output file if it exists");

  DiffArgs diffArgs;
  auto *diff = app.add_subcommand("diff", "Compare two relation files (from `shardproof infer`) of one model");
  diff->footer("Prints every tensor whose relation changed, old -> new, with both files' lines, and those added\n"
               "or removed. Example:\n"
               "  shardproof infer spec.yaml -o new.relations.yaml\n"
               "  shardproof diff main.relations.yaml new.relations.yaml --summary-md pr.md\n\n"
               "Exit codes: 0 the same relations, 5 relations changed, 3 bad input (an unreadable, truncated or\n"
               "hand-broken file, or two files of different models).");
  diff->add_option("old", diffArgs.before, "The recorded relation file")->required();
  diff->add_option("new", diffArgs.after, "The relation file to compare with it")->required();
  diff->add_option("--summary-md", diffArgs.summaryMd, "Also write the changes as Markdown (a pull-request comment)");

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
  if (*init)
    return runInit(initArgs);
  if (*diff)
    return runDiff(diffArgs);
  if (*infer)
    return run(inferArgs, /*infer=*/true);
  if (*replay)
    return run(replayArgs, /*infer=*/false);
  return run(check, /*infer=*/false);
}
