// The shipped example specs, run through the real binary on models exported
// from PyTorch at build time. Each asserts the verdict, the exit code and where
// the report points.
#include "Run.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <ostream>
#include <vector>

using shardproof::testing::example;
using shardproof::testing::runShardproof;

namespace {

// The fragments a report must contain: one ("VERIFIED") or several
// ({"output 'loss' ... differs", "REFUTED at module ce (reference node ..."}).
struct Says {
  Says(const char *one) : all{one} {}
  Says(std::initializer_list<const char *> several) : all(several) {}
  std::vector<const char *> all;
};

struct Case {
  const char *spec;
  int exitCode;          // 0 VERIFIED, 1 REFUTED
  Says mustSay;          // fragments the report must contain
};
// gtest prints the case by this (the default dumps its bytes into test names).
inline void PrintTo(const Case &c, std::ostream *os) { *os << c.spec; }

class Examples : public ::testing::TestWithParam<Case> {};

TEST_P(Examples, VerdictAndLocation) {
  const Case &c = GetParam();
  auto r = runShardproof("check --witness " + example(c.spec));
  EXPECT_EQ(r.exitCode, c.exitCode) << r.out;
  for (const char *fragment : c.mustSay.all)
    EXPECT_NE(r.out.find(fragment), std::string::npos) << "expected to find: " << fragment << "\n" << r.out;
  if (c.exitCode == 1) {
    EXPECT_NE(r.out.find("counterexample:"), std::string::npos) << r.out;
    // Every refutation is backed by execution at the counterexample's sizes.
    EXPECT_NE(r.out.find("CONFIRMED"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("NOT CONFIRMED"), std::string::npos) << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mlp, Examples,
    ::testing::Values(
        Case{"mlp_tp2.yaml", 0, "VERIFIED"},
        Case{"mlp_tp4.yaml", 0, "VERIFIED"},
        Case{"mlp_uneven_tp3.yaml", 0, "VERIFIED"},
        Case{"mlp_slice_tp2.yaml", 0, "VERIFIED"},
        Case{"mlp_bias_before_reduce.yaml", 1, "REFUTED at module fc2"},
        Case{"mlp_no_allreduce.yaml", 1, "REFUTED at module fc2"},
        Case{"mlp_offbyone_tp2.yaml", 1, "REFUTED at module fc1"},
        // GPT-2 block: heads split across ranks, causal mask, softmax, tanh-GELU.
        Case{"gpt_tp2.yaml", 0, "VERIFIED"},
        Case{"gpt_tp4.yaml", 0, "VERIFIED"},
        Case{"gpt_fused_qkv_tp2.yaml", 0, "VERIFIED"},
        // Checkpoints (`layers:`): proven, then used; a wrong one is refuted.
        Case{"gpt_checkpoints_tp2.yaml", 0, "/attn/o_proj/Add_output_0 (layer checkpoint): VERIFIED"},
        Case{"gpt_checkpoint_wrong_tp2.yaml", 1, "(layer checkpoint): REFUTED (dim 2 is 8 on the implementation, 16"},
        // Four blocks deep, weights placed by one pattern per weight.
        Case{"gpt_l4_tp2.yaml", 0, "VERIFIED"},
        Case{"gpt_l4_tp4.yaml", 0, "VERIFIED"},
        Case{"gpt8h_l4_tp8.yaml", 0, "VERIFIED"},
        Case{"gpt_fused_qkv_tp4.yaml", 0, "VERIFIED"},
        // Bugs in attention, each found at its module with a numeric witness.
        Case{"gpt_no_attn_allreduce_tp2.yaml", 1, "REFUTED at module attn.o_proj"},
        Case{"gpt_fused_qkv_chunked_tp2.yaml", 1, "REFUTED at module attn (reference node /attn/MatMul"},
        Case{"gpt_mask_rank1_tp2.yaml", 1, "REFUTED at module attn (reference node /attn/Softmax"},
        // Llama block: RMSNorm, rotary tables, GQA via repeat_kv (dynamic expand:
        // shape arithmetic), SwiGLU.
        Case{"llama_tp2.yaml", 0, "VERIFIED"},
        Case{"llama_tp4.yaml", 0, "VERIFIED"},
        // Rank 1 rotates keys of kv head 0: the first difference is its k * cos.
        Case{"llama_gqa_wrong_kv_tp2.yaml", 1, "REFUTED at module self_attn (reference node /self_attn/Mul_2"},
        // No bias: the first node without a counterpart is the residual add, and
        // the report names the module whose partial sums are never reduced.
        Case{"llama_no_allreduce_down_tp2.yaml", 1, "REFUTED at module mlp.down_proj"},
        // Three layers deep (HF's LlamaModel: layers.0 .. layers.2); the last
        // layer's down_proj partial sums are never reduced.
        Case{"llama_l3_tp2.yaml", 0, "VERIFIED"},
        Case{"llama_l3_tp4.yaml", 0, "VERIFIED"},
        Case{"llama8h_l3_tp8.yaml", 0, "VERIFIED"},
        // Sequence plus tensor parallelism: RMSNorms on the sequence shard.
        Case{"llama_sp2.yaml", 0, "VERIFIED"},
        Case{"llama_sp4.yaml", 0, "VERIFIED"},
        Case{"llama8h_sp8.yaml", 0, "VERIFIED"},
        Case{"llama_l3_no_allreduce_down2_tp2.yaml", 1, "REFUTED at module layers.2.mlp.down_proj"},
        // Rotary tables computed in the graph (Range, inv_freq @ positions, Cos,
        // Sin): under TP every rank builds positions 0 .. seq - 1; under
        // all-gather context parallelism rank r builds arange(r * seq_local, ...),
        // and a rank that starts at 0 rotates by rank 0's angles.
        Case{"rope_tp2.yaml", 0, "VERIFIED"},
        Case{"rope_sp2.yaml", 0, "VERIFIED"},
        Case{"rope_tp4.yaml", 0, "VERIFIED"},
        Case{"rope8h_tp8.yaml", 0, "VERIFIED"},
        Case{"rope_sp4.yaml", 0, "VERIFIED"},
        Case{"rope_sp8.yaml", 0, "VERIFIED"},
        Case{"rope_sp_no_offset.yaml", 1, "REFUTED at module rotary_emb (reference node /rotary_emb/MatMul"},
        // Rank 1 reads rotary rows 1..seq: its query heads are rotated wrongly.
        Case{"llama_rope_offset_tp2.yaml", 1, "REFUTED at module self_attn (reference node /self_attn/Mul,"},
        // Vocab-parallel embedding (Megatron's masked lookup + all-reduce), token
        // ids as data bounded by the spec's `values` range; padded to 12 on 4 ranks.
        Case{"vocab_tp2.yaml", 0, "VERIFIED"},
        Case{"vocab_pad_tp4.yaml", 0, "VERIFIED"},
        // Range check `ids > end`: rank 0 looks up row 5 of its 5-row shard.
        Case{"vocab_range_offbyone_tp2.yaml", 1, "every index of '/embed/Gather' (Gather) is in range [-5, 5) fails (rank 0)"},
        Case{"vocab_wrong_offset_tp2.yaml", 1, "REFUTED at module embed (reference node /embed/Gather"},
        Case{"vocab_no_mask_output_tp2.yaml", 1, "REFUTED at module embed (reference node /embed/Gather"},
        // Ten rows over eight ranks: three ranks hold only padding rows.
        Case{"vocab_pad_tp8.yaml", 0, "VERIFIED"},
        // Vocab-parallel LM head with Megatron's cross-entropy (max all-reduce of
        // the ranks' row maxima, sum all-reduces of exp-sums and masked target
        // logits), and the all-gather-then-slice layout, against log_softmax.
        Case{"lmhead_ce_tp2.yaml", 0, "VERIFIED"},
        Case{"lmhead_ce_pad_tp4.yaml", 0, "VERIFIED"},
        Case{"lmhead_gather_pad_tp4.yaml", 0, "VERIFIED"},
        Case{"lmhead_gather_tp2.yaml", 0, "VERIFIED"},
        // Eight ranks: the reference LogSoftmax over 8 vocab shards is a term
        // of about 2,500 nodes (8 pieces, each a sum of 8 exps minus a max of
        // 8 shard maxima); it was UNKNOWN while the cover limit was 1000 nodes.
        Case{"lmhead15_ce_pad_tp8.yaml", 0, "loss: VERIFIED"},
        Case{"lmhead15_gather_pad_tp8.yaml", 0, "loss: VERIFIED"},
        // Each rank subtracts its own max: the exp-sums add up on different scales.
        Case{"lmhead_ce_no_max_allreduce_tp2.yaml", 1,
             {"output 'loss' on rank 0 differs from the reference",
              "REFUTED at module ce (reference node /ce/LogSoftmax, LogSoftmax)"}},
        // Padding columns enter the max and the exp-sum.
        Case{"lmhead_ce_pad_unmasked_tp4.yaml", 1,
             {"output 'loss' on rank 0 differs from the reference",
              "REFUTED at module ce (reference node /ce/LogSoftmax, LogSoftmax)"}},
        // Target range check `> end`: rank 0 gathers column 5 of its 5 columns.
        Case{"lmhead_ce_target_offbyone_tp2.yaml", 1,
             "every index of '/ce/GatherElements' (GatherElements) is in range [-5, 5) fails (rank 0)"},
        // Sequence parallelism: AllGather on the sequence before column-parallel
        // layers, ReduceScatter after row-parallel ones, LayerNorm on sequence shards.
        Case{"sp_tp2.yaml", 0, "VERIFIED"},
        Case{"sp_tp4.yaml", 0, "VERIFIED"},
        Case{"sp_no_reduce_scatter_tp2.yaml", 1, "REFUTED at module attn.o_proj"},
        // Sequence-first SP helpers used on batch-first tensors: shapes fit,
        // attention only sees the rank's own chunk.
        Case{"sp_batch_axis_tp2.yaml", 1, "REFUTED at module attn (reference node /attn/MatMul"},
        // LayerNorm statistics over a hidden shard instead of the whole row.
        Case{"sp_ln_hidden_shard_tp2.yaml", 1, "REFUTED at module ln_1"},
        // Without the divisibility constraint an odd sequence cannot be split evenly.
        Case{"sp_odd_seq_tp2.yaml", 1, "divides evenly by world_size 2"},
        // Split policies: the policy defines each rank's row count (`seq_local`).
        Case{"seq_chunk_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_tensor_split_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_sizes_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_even_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_even_unconstrained_tp3.yaml", 1, "counterexample: batch=1, seq=1, rank 0"},
        Case{"seq_pad_tp2.yaml", 0, "VERIFIED"},
        // Rows cut inside the rank graphs from x's length.
        Case{"seq_chunk_ingraph_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_balanced_ingraph_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_floor_ingraph_tp3.yaml", 1, "y: REFUTED (dim 1 is 0 (at batch=1, seq=1, rank 0) on the implementation"},
        Case{"seq_floor_ingraph_div3_tp3.yaml", 0, "VERIFIED"},
        // The same cuts from a length passed as data (`seq_len: {value: seq}`),
        // with integer Div (truncating) and Mod (Python's sign) on it.
        Case{"seqlen_balanced_tp3.yaml", 0, "VERIFIED"},
        Case{"seqlen_floor_tp3.yaml", 1, "y: REFUTED (dim 1 is 0 (at batch=1, seq=1, rank 0) on the implementation"},
        Case{"seqlen_floor_div3_tp3.yaml", 0, "VERIFIED"},
        // Packed variable-length sequences: a block-diagonal mask from the
        // offsets `cu_seqlens: {elements: [0, s1, s1 + s2, s1 + s2 + s3]}`.
        Case{"varlen_ok.yaml", 0, "VERIFIED"},
        Case{"varlen_offbyone.yaml", 1, "counterexample: s1=1, s2=1, s3=1, total=3, y1[0, 0]"},
        // Block-local attention: block(t) = t // 4 on positions (integer Div on
        // data); the block id taken as t % 4 is strided attention instead.
        Case{"blockattn_ok.yaml", 0, "VERIFIED"},
        Case{"blockattn_mod.yaml", 1, "counterexample: batch=1, padded=2, seq=2, y[0, 0, 0]"},
        // Position offsets that assume equal shards: wrong only where shards differ.
        Case{"seq_pos_even_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_pos_chunk_tp3.yaml", 1, "counterexample: batch=1, seq=5, /mlp/fc1/MatMul_output_0[0, 4, 0]"},
        Case{"seq_pos_tensor_split_tp3.yaml", 1, "counterexample: batch=1, seq=4, /mlp/fc1/MatMul_output_0[0, 2, 0]"},
        // Explicit sizes: the same offsets are wrong only where the sizes differ.
        Case{"seq_pos_sizes_tp3.yaml", 1, "counterexample: batch=1, seq=2, rank 0, y[0, 0, 0]"},
        Case{"seq_pos_sizes_div3_tp3.yaml", 0, "VERIFIED"},
        // Padded SP with an all-gather: the pad rows must be dropped afterwards.
        Case{"seq_pad_gather_tp3.yaml", 0, "VERIFIED"},
        Case{"seq_pad_gather_nodrop_tp3.yaml", 1, "dim 1 is 3*(2 + seq) // 3 on the implementation, seq on the reference"},
        // Padded batches against the unpadded reference, the true length passed
        // as data (`seq_len: {value: seq}`): key masks with -inf, causal masks,
        // pooling. The bugs are wrong only where padded > seq.
        Case{"pad_attn_keymask.yaml", 0, "VERIFIED"},
        Case{"pad_attn_causal.yaml", 0, "VERIFIED"},
        // Left padding (real rows last): a causal mask alone lets real rows see the pad.
        Case{"pad_attn_left_keymask.yaml", 0, "VERIFIED"},
        Case{"pad_attn_left_causal_only.yaml", 1, "counterexample: batch=1, padded=2, seq=1, y[0, 0, 0]"},
        Case{"pad_attn_offbyone.yaml", 1, "counterexample: batch=1, padded=2, seq=1, y[0, 0, 0]"},
        Case{"pad_attn_wronglen.yaml", 1, "counterexample: batch=1, padded=2, seq=1, y[0, 0, 0]"},
        Case{"pad_pool_leak.yaml", 1, "counterexample: batch=1, padded=3, seq=2, rank 0, y[0, 0]"},
        Case{"pad_pool_masked.yaml", 0, "VERIFIED"},
        // Per-row lengths as data (`lengths: {each: {min: 1, max: seq}}`).
        Case{"pad_lengths_ok.yaml", 0, "VERIFIED"},
        Case{"pad_lengths_offbyone.yaml", 1, "counterexample: batch=1, padded=2, seq=1, y[0, 0, 0]"},
        // A finite additive mask (-1e4) is not an exact proof, and the numbers
        // cannot tell it apart (exp underflows): never VERIFIED.
        Case{"pad_attn_finite.yaml", 2, "y: UNKNOWN"},
        // Eight ranks.
        Case{"mlp_tp8.yaml", 0, "VERIFIED"},
        Case{"gpt8h_tp8.yaml", 0, "VERIFIED"},
        Case{"gpt8h_sp8.yaml", 0, "VERIFIED"},
        // One fused QKV projection, one head per rank: q and k of a head are two
        // reads of one rank tensor.
        Case{"gpt8h_fused_qkv_tp8.yaml", 0, "VERIFIED"},
        // Llama with 8 query heads of size 2, one per rank; each of the 2 kv heads on 4 ranks.
        Case{"llama8h_tp8.yaml", 0, "VERIFIED"}),
    [](const ::testing::TestParamInfo<Case> &i) {
      std::string n = i.param.spec;
      n = n.substr(0, n.find('.'));
      for (auto &ch : n)
        if (!isalnum(static_cast<unsigned char>(ch)))
          ch = '_';
      return n;
    });

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
