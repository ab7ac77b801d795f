// The shipped example specs, run through the real binary on models exported
// from PyTorch at build time. Each spec's header states its verdict and where
// the report must point (ExampleHeader.h); this file runs every one of them.
#include "ExampleHeader.h"
#include "Run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using shardproof::testing::example;
using shardproof::testing::runShardproof;

namespace {

using shardproof::testing::ExampleHeader;
using shardproof::testing::exampleSpecs;
using shardproof::testing::readExampleHeader;

class Examples : public ::testing::TestWithParam<std::string> {};

// Each spec is held to its own header (ExampleHeader.h): the verdict and exit
// code, every SAYS fragment, and for a refutation a counterexample confirmed by
// executing both sides at its sizes.
TEST_P(Examples, VerdictAndLocation) {
  ExampleHeader h = readExampleHeader(example(GetParam()));
  ASSERT_TRUE(h.error.empty()) << h.error;
  auto r = runShardproof("check --witness " + h.path);
  EXPECT_EQ(r.exitCode, h.exitCode) << "expected " << h.verdict << "\n" << r.out;
  EXPECT_NE(r.out.find(h.verdict), std::string::npos) << r.out;
  for (const std::string &fragment : h.says)
    EXPECT_NE(r.out.find(fragment), std::string::npos) << "expected to find: " << fragment << "\n" << r.out;
  if (h.exitCode == 1) {
    EXPECT_NE(r.out.find("counterexample:"), std::string::npos) << r.out;
    // Every refutation is backed by execution at the counterexample's sizes.
    EXPECT_NE(r.out.find("CONFIRMED"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("NOT CONFIRMED"), std::string::npos) << r.out;
    // And it points into the implementation: the rank nodes where the
    // difference arises (same op, else same module, else a reader of the same
    // tensors; for an output, the node writing it).
    EXPECT_NE(r.out.find("rank nodes nearby:"), std::string::npos) << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, Examples, ::testing::ValuesIn(exampleSpecs()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                           return shardproof::testing::exampleTestName(i.param);
                         });

TEST(ExampleHeaders, TheFolderHoldsTheShippedExamples) {
  // A glob that found nothing would make the suite above pass vacuously.
  EXPECT_GE(exampleSpecs().size(), 90u);
}

// The header reader itself: a spec that forgot its expectation, or misspelled
// it, is a failure with its line, never a silently skipped example.
TEST(ExampleHeaders, AMissingOrMisspelledVerdictIsAnError) {
  std::string dir = ::testing::TempDir();
  auto write = [&](const std::string &name, const std::string &text) {
    std::ofstream(dir + "/" + name) << text;
    return readExampleHeader(dir + "/" + name);
  };
  auto none = write("none.yaml", "# a correct MLP\nshardproof: 1\n");
  EXPECT_NE(none.error.find("has no '# VERDICT"), std::string::npos) << none.error;
  auto typo = write("typo.yaml", "# a correct MLP\n# VERDICT: VERIFED\nshardproof: 1\n");
  EXPECT_NE(typo.error.find("typo.yaml:2: VERDICT must be VERIFIED, REFUTED or UNKNOWN, not 'VERIFED'"),
            std::string::npos)
      << typo.error;
  auto twice = write("twice.yaml", "# VERDICT: VERIFIED\n# VERDICT: REFUTED\nshardproof: 1\n");
  EXPECT_NE(twice.error.find("a second VERDICT line"), std::string::npos) << twice.error;
  // Only the leading comment block is the header.
  auto late = write("late.yaml", "shardproof: 1\n# VERDICT: VERIFIED\n");
  EXPECT_FALSE(late.error.empty());
  auto ok = write("ok.yaml", "# Bug: no all-reduce.\n# VERDICT: REFUTED\n# SAYS: REFUTED at module fc2\n"
                             "# SAYS: counterexample\nshardproof: 1\n");
  EXPECT_TRUE(ok.error.empty()) << ok.error;
  EXPECT_EQ(ok.exitCode, 1);
  EXPECT_EQ(ok.says, (std::vector<std::string>{"REFUTED at module fc2", "counterexample"}));
  EXPECT_EQ(ok.description, "Bug: no all-reduce.");
}

// The README's example tables are checked against the same headers: a spec
// name in a column headed VERIFIED (or anywhere in a
// table whose first header cell says VERIFIED) is VERIFIED; a name in a column
// headed REFUTED is not.
TEST(ExampleHeaders, TheReadmeTablesAgreeWithTheHeaders) {
  std::ifstream in(std::string(SHARDPROOF_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in.good());
  std::vector<std::string> header; // the current table's header cells
  bool expectHeader = true;
  unsigned named = 0;
  auto cells = [](const std::string &row) {
    std::vector<std::string> out;
    std::stringstream ss(row.substr(1));
    std::string c;
    while (std::getline(ss, c, '|'))
      out.push_back(c);
    return out;
  };
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '|') {
      expectHeader = true;
      continue;
    }
    auto row = cells(line);
    if (expectHeader) {
      header = row;
      expectHeader = false;
      continue;
    }
    bool wholeTableVerified = !header.empty() && header[0].find("VERIFIED") != std::string::npos;
    for (size_t c = 0; c < row.size() && c < header.size(); ++c) {
      bool wantVerified = wholeTableVerified || header[c].find("VERIFIED") != std::string::npos;
      bool wantFailing = !wholeTableVerified && header[c].find("REFUTED") != std::string::npos;
      // Each `name` in backticks that is a spec under specs/examples.
      for (size_t b = row[c].find('`'); b != std::string::npos; b = row[c].find('`', b)) {
        size_t e = row[c].find('`', b + 1);
        if (e == std::string::npos)
          break;
        std::string name = row[c].substr(b + 1, e - b - 1);
        b = e + 1;
        if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
          continue;
        std::string path = example(name + ".yaml");
        if (!std::filesystem::exists(path))
          continue; // an input's name (`lengths`), not a spec
        ++named;
        ExampleHeader h = readExampleHeader(path);
        if (wantVerified) {
          EXPECT_EQ(h.verdict, "VERIFIED") << "README lists `" << name << "` as VERIFIED";
        }
        if (wantFailing) {
          EXPECT_NE(h.verdict, "VERIFIED") << "README lists `" << name << "` among the bugs";
        }
      }
    }
  }
  EXPECT_GE(named, 50u) << "the README's example tables were not found";
}

} // namespace

TEST(Cli, OffByOneReportNamesTheColumnWithoutACounterpart) {
  auto r = runShardproof("check " + example("mlp_offbyone_tp2.yaml"));
  // fc1's output is [batch, seq, 16]; rank 1 computes columns 7..14: column 15 is missing.
  EXPECT_NE(r.out.find("[0, 0, 15]"), std::string::npos) << r.out;
}

TEST(Cli, JsonReportCarriesTheVerdict) {
  std::string path = ::testing::TempDir() + "/report.json";
  auto r = runShardproof("check " + example("mlp_bias_before_reduce.yaml") + " --json " + path);
  EXPECT_EQ(r.exitCode, 1);
  FILE *f = fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, n);
  fclose(f);
  EXPECT_NE(text.find("\"verdict\": \"REFUTED\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"counterexample\""), std::string::npos) << text;
}

TEST(Cli, HelpTeachesTheExitCodes) {
  auto r = runShardproof("--help");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shardproof check specs/examples/mlp_tp2.yaml"), std::string::npos);
}

// VERIFIED alone could come from unfolding everything at the output; the
// relation table must show a counterpart for every layer (heads split across
// ranks, causal masks, rotate_half's mixed head/offset indices, repeat_kv, and
// two ranks holding the same kv head).
TEST(Cli, EveryLayerOfTheGptAndLlamaBlocksHasARelation) {
  for (const char *spec : {"gpt_tp2.yaml", "gpt_tp4.yaml", "gpt_l4_tp2.yaml", "gpt_l4_tp4.yaml", "gpt8h_l4_tp8.yaml",
                           "gpt_fused_qkv_tp4.yaml", "llama_tp2.yaml", "llama_tp4.yaml", "llama_l3_tp2.yaml",
                           "llama_l3_tp4.yaml", "llama8h_l3_tp8.yaml", "llama_sp2.yaml", "llama_sp4.yaml",
                           "llama8h_sp8.yaml", "rope_tp2.yaml", "rope_tp4.yaml", "rope8h_tp8.yaml"}) {
    auto r = runShardproof("check " + example(spec));
    EXPECT_EQ(r.exitCode, 0) << r.out;
    EXPECT_EQ(r.out.find("NO RELATION"), std::string::npos) << spec << "\n" << r.out;
    EXPECT_EQ(r.out.find("only part of"), std::string::npos) << spec << "\n" << r.out;
  }
}

// Megatron's masked lookups: the reference lookup (a select on the token id)
// is the ranks' all-reduce, so the layers after it start from one rank class.
TEST(Cli, VocabParallelLookupIsTheAllReduceOfTheMaskedLookups) {
  for (const char *spec : {"vocab_tp2.yaml", "vocab_pad_tp4.yaml", "vocab_pad_tp8.yaml"}) {
    auto r = runShardproof("check " + example(spec));
    EXPECT_EQ(r.exitCode, 0) << r.out;
    EXPECT_NE(r.out.find("matched      /embed/AllReduce_output_0@*"), std::string::npos) << spec << "\n" << r.out;
    EXPECT_EQ(r.out.find("NO RELATION"), std::string::npos) << spec << "\n" << r.out;
  }
}

// One head per rank: the relation reads as a concatenation, not a raw select
// on the head index.
TEST(Cli, SizeOneHeadShardsRenderAsConcat) {
  auto r = runShardproof("check " + example("gpt8h_tp8.yaml"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  for (const char *t : {"MatMul_output_0", "MatMul_1_output_0"})
    EXPECT_NE(r.out.find("concat(/attn/" + std::string(t) + "@0, /attn/" + t + "@1, /attn/" + t + "@2"),
              std::string::npos)
        << t << "\n" << r.out;
}

// Outputs that agree are proven by unfolding the rank tensors before any
// numbers are tried: the padded-vocabulary LM step once spent 5 s of its
// 5.7 s searching for a numeric difference between outputs that agree, and
// the captured 405B-shaped step with one layer 286 s of 288.
TEST(Cli, AVerifiedTrainingStepTriesNoNumbers) {
  // train_gpt2_lm_tp4: its vocab-parallel softmax is unfolded on all 4 ranks
  // in one step; a class at a time, the proposals ran out of steps and the
  // output was proven only after a numeric search (13 s, 1 s now).
  for (const char *spec :
       {"train_gpt2_lm_pad_tp2.yaml", "train_gpt2_lm_tp2.yaml", "train_llama_sp2.yaml", "train_gpt2_lm_tp4.yaml"}) {
    std::string json = ::testing::TempDir() + "/tries_no_numbers.json";
    auto r = runShardproof("check -q --json " + json + " " + example(spec));
    EXPECT_EQ(r.exitCode, 0) << spec << "\n" << r.out;
    std::ifstream in(json);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("solver_queries_by_kind"), std::string::npos) << text;
    EXPECT_EQ(text.find("\"witness."), std::string::npos) << spec << "\n" << text;
  }
}

TEST(Replay, PrintsTheTwoNumbersThatDifferAtTheCounterexample) {
  auto r = runShardproof("replay " + example("seq_pos_chunk_tp3.yaml"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("at batch=1, seq=5, rank 0, y[0, 4, 0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reference graph (interpreter) = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CONFIRMED: the two numbers differ"), std::string::npos) << r.out;
}

TEST(Replay, ASizeBugIsConfirmedByTheSizesItGives) {
  auto r = runShardproof("replay " + example("seq_floor_ingraph_tp3.yaml"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("evaluated: dim 1 is 0 on the implementation, 1 on the reference"), std::string::npos)
      << r.out;
}

TEST(Replay, AVerifiedCheckHasNothingToReplay) {
  auto r = runShardproof("replay " + example("mlp_tp2.yaml"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("nothing to replay: the verdict is VERIFIED"), std::string::npos) << r.out;
}

// --sample executes both sides at random sizes; on a correct implementation
// every element agrees (a disagreement would be exit 4, an internal error).
TEST(Sample, ExecutionAgreesWithEveryVerifiedProof) {
  for (const char *spec : {"mlp_tp2.yaml", "seq_chunk_tp3.yaml", "seq_pad_tp2.yaml", "vocab_pad_tp4.yaml",
                           "pad_attn_keymask.yaml", "pad_lengths_ok.yaml", "rope_sp2.yaml"}) {
    auto r = runShardproof("check --no-table --sample 3 " + example(spec));
    EXPECT_EQ(r.exitCode, 0) << spec << "\n" << r.out;
    EXPECT_NE(r.out.find("Sampled execution (3 random admissible sizes, "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("every compared element agrees with the reference"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(" 0 output elements"), std::string::npos) << r.out;
  }
}

TEST(Sample, TheSameSeedDrawsTheSameSizes) {
  auto a = runShardproof("check --no-table --sample 4 --seed 7 " + example("seq_chunk_tp3.yaml"));
  auto b = runShardproof("check --no-table --sample 4 --seed 7 " + example("seq_chunk_tp3.yaml"));
  EXPECT_EQ(a.out, b.out);
}
