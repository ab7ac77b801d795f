"""The README's three commands on user code written against torch.distributed
(tests/models/megatron/): `shardproof.torch export`, `shardproof init`,
`shardproof check`, with nothing written by hand in between.

Run by ctest in the project venv: .venv/bin/python test_demonstrations.py SHARDPROOF_BINARY
"""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "tests", "models", "megatron")
WRAPPER = os.path.join(ROOT, "tools", "shardproof-torch")
BINARY = os.environ.get("SHARDPROOF_BINARY", os.path.join(ROOT, "build", "shardproof"))


def three_commands(factory, world_size, train=False, edit=None, onnx_chunk=None, legacy=False):
    """export -> init -> check --witness; returns (exit code, report). `edit`
    rewrites the drafted spec's text where a user would correct a guess;
    `onnx_chunk` sets how many nodes the TorchScript exporter (`legacy`)
    converts to ONNX at a time."""
    env = dict(os.environ, SHARDPROOF_ONNX_CHUNK=str(onnx_chunk)) if onnx_chunk else None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "export")
        spec = os.path.join(tmp, "spec.yaml")
        steps = [
            [WRAPPER, "export", os.path.join(MODELS, factory), "--world-size", str(world_size), "--out", out, "-q"]
            + (["--train"] if train else []) + (["--legacy"] if legacy else []),
            [BINARY, "init", os.path.join(out, "reference.onnx"), "--ranks", os.path.join(out, "rank{r}.onnx"),
             "--world-size", str(world_size), "-o", spec],
        ]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        if edit:
            with open(spec) as f:
                text = f.read()
            with open(spec, "w") as f:
                f.write(edit(text))
        r = subprocess.run([BINARY, "check", "--witness", spec], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


class Demonstration(unittest.TestCase):
    def verified(self, factory, world_size, every_layer=True, **kw):
        code, report = three_commands(factory, world_size, **kw)
        self.assertEqual(code, 0, report)
        self.assertIn("VERIFIED: every reference output is rebuilt", report)
        if every_layer:  # not only the outputs: every reference tensor has a counterpart
            self.assertNotIn("NO RELATION", report)

    def refuted(self, factory, world_size, where, python=None, **kw):
        code, report = three_commands(factory, world_size, **kw)
        self.assertEqual(code, 1, report)
        self.assertIn(where, report)
        self.assertIn("CONFIRMED: the two numbers differ", report)
        if python:  # the user's line, from the capture package's doc_strings
            self.assertRegex(report, python)


class MegatronGpt2(Demonstration):
    def test_tensor_parallel_on_2_and_4_ranks(self):
        self.verified("gpt2.py:gpt2_tp", 2)
        self.verified("gpt2.py:gpt2_tp", 4)

    def test_sequence_parallel_on_2_and_4_ranks(self):
        self.verified("gpt2.py:gpt2_sp", 2)
        self.verified("gpt2.py:gpt2_sp", 4)

    def test_row_parallel_linear_without_its_g_is_refuted_at_its_module(self):
        self.refuted("gpt2.py:gpt2_tp_missing_g", 2, "REFUTED at module attention.dense",
                     python=r"python: \S*tests/models/megatron/tensor_parallel\.py:\d+ in forward \(rank 0 node "
                            r"'/attention/dense/Add'\)")

    def test_sequence_parallel_regions_on_batch_first_activations_are_refuted(self):
        # all-gather and reduce-scatter on dim 0, which is the batch here:
        # attention only sees the rank's own chunk of the sequence.
        self.refuted("gpt2.py:gpt2_sp_batch_first", 2, "REFUTED at module attention (reference node /attention/MatMul")


class SoftmaxScale(Demonstration):
    """Scores divided by the square root of the rank's projection width
    instead of the head dimension: invisible while attention has one key."""

    def test_self_attention(self):
        self.refuted("gpt2.py:gpt2_tp_wrong_scale", 2, "REFUTED at module attention")

    def test_cross_attention_is_refuted_at_a_source_of_two_or_more(self):
        # Three sizes (batch, tgt, src): the smallest sizes all have src = 1;
        # the witness search must go past them (issue 17: it stopped at src = 1).
        self.verified("cross_attention.py:cross_tp", 2)
        code, report = three_commands("cross_attention.py:cross_tp_wrong_scale", 2)
        self.assertEqual(code, 1, report)
        self.assertIn("src=2", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)


class MegatronVocabParallelEnds(Demonstration):
    def test_embedding_lm_head_and_cross_entropy_on_2_and_4_ranks(self):
        # The LogSoftmax itself has no rank counterpart (Megatron never forms
        # it); the per-token loss is proven.
        self.verified("gpt2_lm.py:gpt2_lm_tp", 2, every_layer=False)
        self.verified("gpt2_lm.py:gpt2_lm_tp", 4, every_layer=False)

    def test_an_embedding_that_keeps_other_shards_rows_is_refuted(self):
        self.refuted("gpt2_lm.py:gpt2_lm_tp_no_mask", 2, "REFUTED at module embedding (reference node /embedding/Gather")


class MegatronLlamaAgainstHfStyleReference(Demonstration):
    def test_tensor_parallel_on_2_and_4_ranks(self):
        self.verified("llama.py:llama_tp", 2)
        self.verified("llama.py:llama_tp", 4)

    def test_sequence_parallel_on_2_and_4_ranks(self):
        self.verified("llama.py:llama_sp", 2)
        self.verified("llama.py:llama_sp", 4)

    def test_o_proj_without_its_all_reduce_is_refuted(self):
        self.refuted("llama.py:llama_tp_missing_g", 2, "REFUTED at module self_attn.o_proj")


class TrainingStep(Demonstration):
    """`export --train`: the loss and every parameter's gradient, through
    torch's own backward (Megatron's f and g and their backward), captured by
    make_fx on torch 2 (docs/capture.md, "The training step")."""

    def test_tensor_parallel_mlp_with_layernorm(self):
        self.verified("training.py:mlp_tp", 2, train=True)

    def test_f_whose_backward_forgets_the_all_reduce_refutes_the_layernorm_gradients(self):
        # The MLP's own gradients are right; the input gradient keeps one
        # rank's part, so the replicated LayerNorm before it learns wrongly.
        self.refuted("training.py:mlp_tp_f_without_reduce", 2, "output 'grad:norm.weight' on rank 0 differs",
                     train=True)

    def test_sequence_parallel_mlp_with_its_gradients_all_reduced(self):
        # init drafts `loss: partial`: each rank's ReduceSum covers its sequence shard.
        self.verified("training.py:mlp_sp", 2, every_layer=False, train=True)

    def test_sequence_parallel_gradients_not_all_reduced_are_refuted(self):
        # Megatron-LM #1446: LayerNorm weights under sequence parallelism
        # each see one sequence shard; without the all-reduce they drift apart.
        code, report = three_commands("training.py:mlp_sp_grads_unsynced", 2, train=True)
        self.assertEqual(code, 1, report)
        for p in ("norm.weight", "norm.bias", "down.bias"):
            self.assertIn(f"grad:{p}: REFUTED", report)
        self.assertIn("grad:up.weight: VERIFIED", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_data_parallel_mlp_with_ddp_averaging(self):
        # init drafts the batch shard, replicated parameters and gradients,
        # and `loss: "mean(loss@*)"`: each rank's ReduceMean covers its rows.
        self.verified("data_parallel.py:mlp_dp", 2, every_layer=False, train=True)

    def test_data_parallel_gradients_summed_but_not_averaged_are_refuted(self):
        code, report = three_commands("data_parallel.py:mlp_dp_not_averaged", 2, train=True)
        self.assertEqual(code, 1, report)
        self.assertIn("loss: VERIFIED", report)
        self.assertIn("grad:up.weight: REFUTED", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_gpt2_block_step_attention_and_mlp(self):
        # Attention's backward: softmax, the head reshapes, the fused QKV laid
        # out per head, the input gradient summed over ranks by f.
        self.verified("training.py:gpt2_block_tp", 2, every_layer=False, train=True)

    def test_gpt2_block_step_with_f_forgetting_its_all_reduce_is_refuted(self):
        code, report = three_commands("training.py:gpt2_block_tp_f_without_reduce", 2, train=True)
        self.assertEqual(code, 1, report)
        self.assertIn("grad:model.input_layernorm.weight: REFUTED", report)
        self.assertIn("grad:model.mlp.dense_h_to_4h.weight: VERIFIED", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_llama_layer_step_proves_every_gradient(self):
        # Rotary halves and grouped-query heads. The input RMSNorm's gradient
        # (q, k and v input gradients summed over the ranks) was UNKNOWN until
        # sums over ranks were compared as linear combinations.
        code, report = three_commands("training.py:llama_tp_step", 2, train=True)
        self.assertEqual(code, 0, report)
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            self.assertIn(f"grad:model.self_attn.{p}.weight: VERIFIED", report)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            self.assertIn(f"grad:model.{norm}.weight: VERIFIED", report)

    def test_llama_layer_step_without_fs_backward_all_reduce_is_refuted(self):
        code, report = three_commands("training.py:llama_tp_step_f_without_reduce", 2, train=True)
        self.assertEqual(code, 1, report)
        self.assertIn("grad:model.input_layernorm.weight: REFUTED", report)
        self.assertIn("CONFIRMED", report)
        self.assertIn("the reduction is missing", report)

    def test_llama_layer_step_under_sequence_parallelism_proves_every_gradient(self):
        # The issue's own check: export --train, init, check on a TP + SP
        # Llama layer. The input RMSNorm's gradient (through the
        # reduce-scattered q, k and v input gradients) was UNKNOWN until the
        # rank's read of a broadcast class took index 0 on the broadcast axis.
        code, report = three_commands("training.py:llama_sp_step", 2, train=True)
        self.assertEqual(code, 0, report)
        self.assertIn("loss: VERIFIED", report)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            self.assertIn(f"grad:model.{norm}.weight: VERIFIED", report)

    def test_llama_sp_step_converted_to_onnx_in_pieces_proves_and_refutes_alike(self):
        # The TorchScript path (`--legacy`) converts deep graphs 400 nodes at a
        # time (the whole-graph conversion is quadratic); these graphs are
        # small, so force pieces of 32 nodes.
        code, report = three_commands("training.py:llama_sp_step", 2, train=True, legacy=True, onnx_chunk=32)
        self.assertEqual(code, 0, report)
        self.assertIn("grad:model.input_layernorm.weight: VERIFIED", report)
        code, report = three_commands("training.py:llama_sp_step_norm_grads_unsynced", 2, train=True, legacy=True,
                                      onnx_chunk=32)
        self.assertEqual(code, 1, report)
        self.assertIn("grad:model.input_layernorm.weight: REFUTED", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_llama_sp_step_without_the_norm_gradients_all_reduce_is_refuted(self):
        code, report = three_commands("training.py:llama_sp_step_norm_grads_unsynced", 2, train=True)
        self.assertEqual(code, 1, report)
        self.assertIn("grad:model.input_layernorm.weight: REFUTED", report)
        self.assertIn("grad:model.self_attn.o_proj.weight: VERIFIED", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_lm_ends_step_with_megatrons_cross_entropy_backward(self):
        # The reference's log-softmax gradient needs the sum of the target's
        # one-hot (one column) and Megatron's softmax is shifted by the max.
        code, report = three_commands("training.py:gpt2_lm_tp_step", 2, train=True)
        self.assertEqual(code, 0, report)
        for p in ("embedding", "lm_head"):
            self.assertIn(f"grad:model.{p}.weight: VERIFIED", report)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = sys.argv.pop(1)
    unittest.main()
