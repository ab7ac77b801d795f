// The large-model generator (tools/genmodels/gen.py, used by tools/bench) at
// tiny sizes: each family is VERIFIED, and a bug injected into one layer is
// REFUTED at that layer's module. Also the --stats summary and its JSON form.
// No timing is asserted here: benchmark figures live in tools/bench.
#include "Run.h"
#include "ScratchDir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using shardproof::testing::runShardproof;
namespace fs = std::filesystem;

namespace {

class Generated : public shardproof::testing::ScratchDir {
protected:
  Generated() : ScratchDir("gen") {}

  // Runs the generator; returns the spec path (its last line of output).
  std::string generate(const std::string &args) {
    std::string cmd = std::string(SHARDPROOF_PYTHON) + " " + SHARDPROOF_SOURCE_DIR + "/tools/genmodels/gen.py " + args +
                      " --name m --out " + dir.string() + " 2>/dev/null";
    FILE *p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    size_t n;
    while (p && (n = fread(buf, 1, sizeof buf, p)) > 0)
      out.append(buf, n);
    int status = p ? pclose(p) : -1;
    EXPECT_EQ(status, 0) << cmd << "\n" << out;
    return (dir / "m.yaml").string();
  }
};

} // namespace

TEST_F(Generated, GptTensorParallelVerified) {
  auto r = runShardproof("check --no-table " + generate("gpt --preset gpt-tiny --layers 2 --world 2"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("y: VERIFIED"), std::string::npos) << r.out;
}

TEST_F(Generated, GptMissingAllReduceInOneLayerRefuted) {
  auto r = runShardproof("check --no-table " +
                         generate("gpt --preset gpt-tiny --layers 2 --world 2 --bug no_reduce --bug-layer 1"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module blocks.1.mlp.proj"), std::string::npos) << r.out;
}

// A bug in the first layer leaves every later reference tensor without a
// relation. Their terms used to repeat all the layers below them (growing
// exponentially with depth: 2 GB and no answer after a minute at six layers);
// now such a tensor is an opaque leaf downstream, and the refutation rests on
// the interpreter's numbers.
TEST_F(Generated, GptMissingAllReduceInTheFirstOfSixLayersRefuted) {
  auto r = runShardproof("check --no-table --witness " +
                         generate("gpt --preset gpt-tiny --layers 6 --world 2 --bug no_reduce --bug-layer 0"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module blocks.0.mlp.proj"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CONFIRMED: the two numbers differ"), std::string::npos) << r.out;
}

// Past a bug every tensor downstream is without a counterpart, and each
// one's proposal ran a shallow numeric probe that spent its whole budget
// (0.1 s) before leaving the proposal to the unfolding anyway: 126 of them
// here, 9 of 12 s. The walk stops trying them after eight give up.
TEST_F(Generated, PastABugTheNumericProbesStopTryingAfterEightGiveUps) {
  auto r = runShardproof("check --no-table --stats " +
                         generate("gpt --preset gpt-tiny --layers 6 --world 2 --bug no_reduce --bug-layer 0"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module blocks.0.mlp.proj"), std::string::npos) << r.out;
  size_t at = r.out.find("probes of proposals, ");
  ASSERT_NE(at, std::string::npos) << r.out;
  int gaveUp = std::atoi(r.out.c_str() + at + std::string("probes of proposals, ").size());
  EXPECT_GT(gaveUp, 0) << "the bug's downstream probes no longer give up: the test no longer shows the limit";
  EXPECT_LE(gaveUp, 8) << r.out;
}

TEST_F(Generated, LlamaSequenceParallelVerified) {
  auto r = runShardproof("check --no-table " + generate("llama --preset tiny --layers 2 --world 2 --sp --no-embed"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("y: VERIFIED"), std::string::npos) << r.out;
}

TEST_F(Generated, LlamaSequenceParallelUnreducedMlpRefuted) {
  auto r = runShardproof("check --no-table " + generate("llama --preset tiny --layers 2 --world 2 --sp --no-embed "
                                                        "--bug no_reduce --bug-layer 1"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module layers.1.mlp.down_proj"), std::string::npos) << r.out;
}

// Layer memoization reuses each layer's work for the next one (NodeMemo.h).
// A bug in the last layer must still be found there: its nodes look like
// the layers below but for what the bug changed, and only that may miss.
TEST_F(Generated, GptMissingAllReduceInTheLastOfFourLayersRefuted) {
  auto r = runShardproof("check --no-table --stats " +
                         generate("gpt --preset gpt-tiny --layers 4 --world 2 --bug no_reduce --bug-layer 3"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module blocks.3.mlp.proj"), std::string::npos) << r.out;
}

// Whole-layer reuse (LayerCopy.h): in a stack of five identical layers the
// rank world and the reference walk take layers 2 to 4 as the layer below
// renamed, and the verdict is the one every node evaluated afresh gives.
TEST_F(Generated, FiveIdenticalLayersAreCopiedWholeAndStillVerified) {
  std::string spec = generate("llama --preset tiny --layers 5 --world 2 --sp --no-embed");
  auto r = runShardproof("check --no-table --stats " + spec);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("layers copied whole: 3 of the ranks, 3 of the reference"), std::string::npos) << r.out;
  auto fresh = runShardproof("check --no-table --stats --no-memo " + spec);
  EXPECT_EQ(fresh.exitCode, 0) << fresh.out;
  EXPECT_NE(fresh.out.find("layers copied whole: 0 of the ranks, 0 of the reference"), std::string::npos)
      << fresh.out;
}

// A copied layer's rows are not rendered again: the first copy's templates
// (class names as placeholders) are filled with each copy's renamed classes.
// The table must read as the one a walk of every layer prints, row for row.
TEST_F(Generated, ACopiedLayersRelationsReadAsAWalkOfItWouldPrintThem) {
  std::string spec = generate("llama --preset tiny --layers 5 --world 2 --sp --no-embed");
  auto copied = runShardproof("check " + spec);
  auto walked = runShardproof("check --no-memo " + spec);
  EXPECT_EQ(copied.exitCode, 0) << copied.out;
  EXPECT_NE(copied.out.find("concat(/layers.4/mlp/up_proj/MatMul_output_0@0"), std::string::npos) << copied.out;
  EXPECT_EQ(copied.out, walked.out);
}

// A missing all-reduce in layer 3 of 5: layer 3 is no longer layer 2 again, so
// it is evaluated node by node and refuted there; only layer 2 is copied (and
// layer 4 is not layer 3 again).
TEST_F(Generated, ABugInTheMiddleOfFiveLayersStopsTheCopyAndIsRefutedThere) {
  auto r = runShardproof("check --no-table --stats " +
                         generate("gpt --preset gpt-tiny --layers 5 --world 2 --bug no_reduce --bug-layer 3"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module blocks.3.mlp.proj"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers copied whole: 1 of the ranks, 1 of the reference"), std::string::npos) << r.out;
}

// A `layers:` checkpoint inside a layer the walk would copy: the copy took
// layer 3 as layer 2 renamed, so its claim was never checked, and a wrong
// placement (the sequence axis for the head axis) came out VERIFIED. Layer 3
// is now walked; its rank side is still copied, so the claim reads rank
// values the copy left to be made when read.
TEST_F(Generated, ACheckpointInALayerThatWouldBeCopiedIsStillChecked) {
  std::string spec = generate("llama --preset tiny --layers 5 --world 2 --sp --no-embed");
  auto withCheckpoint = [&](const std::string &placement) {
    std::string text;
    {
      std::ifstream in(spec);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    std::string path = (dir / ("checkpoint_" + std::to_string(text.size() + placement.size()) + ".yaml")).string();
    std::ofstream(path) << text << "layers:\n  /layers.3/self_attn/q_proj/MatMul_output_0: " << placement << "\n";
    return runShardproof("check --no-table --stats " + path);
  };
  auto right = withCheckpoint("{shard: 2, split: even}");
  EXPECT_EQ(right.exitCode, 0) << right.out;
  EXPECT_NE(right.out.find("/layers.3/self_attn/q_proj/MatMul_output_0 (layer checkpoint): VERIFIED"),
            std::string::npos)
      << right.out;
  EXPECT_NE(right.out.find("layers copied whole: 3 of the ranks, 1 of the reference"), std::string::npos)
      << right.out;
  auto wrong = withCheckpoint("{shard: 1, split: even}");
  EXPECT_EQ(wrong.exitCode, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("REFUTED: output '/layers.3/self_attn/q_proj/MatMul_output_0'"), std::string::npos)
      << wrong.out;
}

// The last rank of layer 3 applies SiLU to up_proj instead of gate_proj: the
// same ops in the same order as every other layer, one edge rewired. The
// reference term of layer 3 has the same form as layer 2's; the rank class
// that covered layer 2 has no counterpart computing the renamed definition.
TEST_F(Generated, LlamaGateAndUpSwappedOnOneRankInTheLastOfFourLayersRefuted) {
  auto r = runShardproof("check --no-table --witness " +
                         generate("llama --preset tiny --layers 4 --world 2 --no-embed --bug swap_gate_up "
                                  "--bug-layer 3"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module layers.3.mlp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CONFIRMED: the two numbers differ"), std::string::npos) << r.out;
}

// The reference copies leave the values nothing outside their layer reads
// (LayerCopy.h, PendingReference). A wrong claim on the output of five
// layers (partial: each rank's y would be a share of the sum) is refuted past
// three copied layers, and its witness runs the whole reference graph on the
// interpreter: the copied layers' values are made for it, or the interpreter
// stops at the first one and the number comes from the relation term instead.
TEST_F(Generated, AWitnessPastCopiedLayersRunsTheReferenceGraphThroughThem) {
  std::string spec = generate("llama --preset tiny --layers 5 --world 2 --no-embed");
  std::string text;
  {
    std::ifstream in(spec);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const std::string claim = "\n  y: replicated\n";
  ASSERT_NE(text.find(claim), std::string::npos) << text;
  text.replace(text.find(claim), claim.size(), "\n  y: partial\n");
  std::ofstream(spec) << text;
  auto r = runShardproof("check --no-table --stats --witness " + spec);
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED: output 'y' differs from the reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers copied whole: 3 of the ranks, 3 of the reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reference graph (interpreter) = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CONFIRMED: the two numbers differ"), std::string::npos) << r.out;
}

// Four identical layers: the later ones reuse the first's results, and
// turning that off (--no-memo) changes nothing but the work done.
TEST_F(Generated, StackedLayersReuseTheFirstLayersWork) {
  std::string spec = generate("llama --preset tiny --layers 4 --world 2 --sp --no-embed");
  auto memo = runShardproof("check -q --stats " + spec);
  auto none = runShardproof("check -q --stats --no-memo " + spec);
  EXPECT_EQ(memo.exitCode, 0) << memo.out;
  EXPECT_EQ(none.exitCode, 0) << none.out;
  EXPECT_NE(memo.out.find("VERIFIED"), std::string::npos) << memo.out;
  EXPECT_NE(none.out.find("VERIFIED"), std::string::npos) << none.out;
  auto reused = [](const std::string &out) {
    auto at = out.find("memo:");
    return at == std::string::npos ? -1L : std::stol(out.substr(at + 5));
  };
  EXPECT_GT(reused(memo.out), 100) << memo.out;
  EXPECT_EQ(reused(none.out), 0) << none.out;
}

// Megatron's vocab-parallel embedding under sequence parallelism: the masked
// lookups are reduce-scattered along the sequence, so the reference lookup is
// the concatenation over ranks of their chunks of the masked sum (vocab 10 on 4
// ranks: 3 rows each, the last rank's padded).
TEST_F(Generated, LlamaSequenceParallelVocabEmbeddingIsAConcatOfReduceScatteredLookups) {
  for (const char *world : {"--world 2", "--world 4 --kv-heads 4"}) {
    auto r = runShardproof("check " + generate(std::string("llama --preset tiny --layers 1 --sp ") + world));
    EXPECT_EQ(r.exitCode, 0) << r.out;
    EXPECT_NE(r.out.find("/embed_tokens/Gather_output_0     matched"), std::string::npos) << world << "\n" << r.out;
    EXPECT_NE(r.out.find("/embed_tokens/ReduceScatter_output_0@1"), std::string::npos) << world << "\n" << r.out;
    EXPECT_EQ(r.out.find("NO RELATION"), std::string::npos) << world << "\n" << r.out;
  }
}

// The rows of ids outside a rank's vocab range are not zeroed: every rank adds
// the row its clamped local id reads.
TEST_F(Generated, LlamaSequenceParallelUnmaskedEmbeddingRefuted) {
  auto r = runShardproof("check --no-table --witness " +
                         generate("llama --preset tiny --layers 1 --world 2 --sp --bug embed_unmasked"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("REFUTED at module embed_tokens (reference node /embed_tokens/Gather"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("CONFIRMED: the two numbers differ"), std::string::npos) << r.out;
}

TEST_F(Generated, StatsSummaryAndJson) {
  std::string spec = generate("gpt --preset gpt-tiny --layers 1 --world 2");
  std::string json = (dir / "r.json").string();
  auto r = runShardproof("check -q --stats --json " + json + " " + spec);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  for (const char *s : {"stats:", "nodes:", "classes:", "relations:", "solver:", "cache hits", "load ",
                        "build world ", "relation inference ", "output check ", "report ", "peak RSS:",
                        "slow node "})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << r.out;
  // The summary comes after the verdict line.
  EXPECT_LT(r.out.find("VERIFIED"), r.out.find("stats:")) << r.out;
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  for (const char *s : {"\"phase_seconds\"", "\"build_world\"", "\"inference\"", "\"peak_rss_kib\"",
                        "\"relations\"", "\"solver_queries_by_kind\"", "\"slowest_reference_nodes\""})
    EXPECT_NE(text.str().find(s), std::string::npos) << "missing " << s << " in\n" << text.str();
  // Where a slow check spends its time: at most ten reference nodes, each
  // named with its op, slowest first.
  size_t lines = 0;
  double last = 1e9;
  for (size_t at = r.out.find("  slow node "); at != std::string::npos; at = r.out.find("  slow node ", at + 1)) {
    double seconds = std::stod(r.out.substr(at + 12, 11));
    EXPECT_LE(seconds, last) << r.out;
    last = seconds;
    EXPECT_NE(r.out.find(" (", at), std::string::npos) << r.out;
    ++lines;
  }
  EXPECT_GE(lines, 1u) << r.out;
  EXPECT_LE(lines, 10u) << r.out;
}
