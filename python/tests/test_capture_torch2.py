"""The torch 2 capture (shardproof.capture) on the programs the TorchScript
exporter got wrong, each checked end to end: export, init, check.

Run: PYTHONPATH=python .venv/bin/python -m unittest python/tests/test_capture_torch2.py
(SHARDPROOF_BINARY names the CLI; default build/shardproof).
"""
import os
import subprocess
import sys
import tempfile
import unittest

import onnx
import torch
import torch.distributed as dist
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "models", "capture"))

import aliases  # noqa: E402
import complex_rope  # noqa: E402
import dtensor_mlp  # noqa: E402
import row_bias  # noqa: E402
import steps  # noqa: E402
from shardproof.capture import Case, CaptureError, export  # noqa: E402

BINARY = os.environ.get("SHARDPROOF_BINARY", os.path.join(ROOT, "build", "shardproof"))


def check(case, world_size=2, train=False):
    """export -> init -> check --witness: (exit code, report)."""
    with tempfile.TemporaryDirectory() as tmp:
        export(case, world_size, tmp, train=train)
        spec = os.path.join(tmp, "spec.yaml")
        init = subprocess.run([BINARY, "init", os.path.join(tmp, "reference.onnx"), "--ranks",
                               os.path.join(tmp, "rank{r}.onnx"), "--world-size", str(world_size), "-o", spec],
                              capture_output=True, text=True)
        if init.returncode != 0:
            raise AssertionError(init.stdout + init.stderr)
        r = subprocess.run([BINARY, "check", "--witness", spec], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


class AllReduceThroughAnAlias(unittest.TestCase):
    def verified(self, variant):
        code, report = check(aliases.case(variant))
        self.assertEqual(code, 0, report)
        self.assertIn("VERIFIED", report)

    def refuted(self, case, where="REFUTED at module fc2"):
        code, report = check(case)
        self.assertEqual(code, 1, report)
        self.assertIn(where, report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_a_single_reduction_through_a_view_or_data_is_verified(self):
        for variant in ("plain", "view", "data", "async"):
            with self.subTest(variant):
                self.verified(variant)

    def test_a_double_reduction_through_a_view_or_data_is_refuted(self):
        # Was: VERIFIED. The TorchScript exporter dropped the in-place
        # all_reduce on the alias, leaving one reduction in the graph.
        for variant in ("view_twice", "data_twice", "missing"):
            with self.subTest(variant):
                self.refuted(aliases.case(variant))

    def test_a_reduction_of_a_contiguous_copy_is_refuted_at_every_example_batch(self):
        # Was: VERIFIED when exported at batch = 1, where the transposed
        # tensor is contiguous and the reduction reaches it.
        for batch in (2, 3):
            with self.subTest(batch=batch):
                self.refuted(aliases.contiguous_case({"batch": batch, "seq": 4}), "REFUTED at module fc2")

    def test_an_example_size_of_1_is_refused_not_specialized(self):
        with self.assertRaisesRegex(CaptureError, r"example size of 'batch' \(x axis 0\) is 1: torch "
                                                  r"specializes sizes 0 and 1"):
            check(aliases.contiguous_case({"batch": 1, "seq": 4}))


class Refusals(unittest.TestCase):
    """Programs the capture cannot express as a graph valid at every size:
    an error naming the cause and the user's line, and nothing written."""

    def test_a_read_before_wait_names_both_lines(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(CaptureError) as e:
                export(aliases.read_before_wait_case(), 2, tmp)
            self.assertRegex(str(e.exception), r"all_reduce\(op=sum\) at \S*aliases\.py:\d+ in forward is read at "
                                               r"\S*aliases\.py:\d+ in forward before its wait\(\)")
            self.assertEqual(os.listdir(tmp), [])

    def test_a_cache_written_in_forward_is_refused_in_one_line_naming_it(self):
        class Cached(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.register_buffer("kv_cache", torch.zeros(2, 4))

            def forward(self, x):
                y = self.proj(x)
                self.kv_cache.copy_(y[:, -1])  # the last position, kept for the next call
                return y

        case = Case(reference=Cached, implementation=Cached, inputs=lambda s: {"x": torch.randn(2, s["seq"], 4)},
                    dynamic={"x": {1: "seq"}})
        with tempfile.TemporaryDirectory() as tmp, self.assertRaises(CaptureError) as e:
            export(case, 2, tmp)
        message = str(e.exception)
        self.assertIn("writes its buffer 'kv_cache' during forward", message)
        self.assertNotIn("\n", message)
        self.assertLess(len(message), 400)

    def test_a_size_baked_into_the_graph_is_refused_naming_it(self):
        class Six(nn.Module):
            def forward(self, x):
                return x + torch.ones(6)  # holds only for seq = 6

        case = Case(reference=Six, implementation=Six, inputs=lambda s: {"x": torch.randn(3, s["seq"])},
                    dynamic={"x": {1: "seq"}}, sizes={"seq": 6})
        with tempfile.TemporaryDirectory() as tmp, self.assertRaisesRegex(CaptureError, r"tracing the reference "
                                                                                        r"failed: .*seq"):
            export(case, 2, tmp)

    def test_ranks_calling_other_collectives_are_refused(self):
        class Diverging(nn.Module):
            def forward(self, x):
                y = x * 2
                if dist.get_rank() == 0:
                    dist.all_reduce(y)
                return y

        case = Case(reference=Diverging, implementation=Diverging, inputs=lambda s: {"x": torch.randn(s["n"])},
                    dynamic={"x": {0: "n"}})
        with tempfile.TemporaryDirectory() as tmp, self.assertRaisesRegex(CaptureError, "rank 1 calls other "
                                                                                        "collectives than rank 0"):
            export(case, 2, tmp)

    def test_an_unsupported_reduce_op_is_named(self):
        class Product(nn.Module):
            def forward(self, x):
                y = x * 1
                dist.all_reduce(y, op=dist.ReduceOp.PRODUCT)
                return y

        case = Case(reference=Product, implementation=Product, inputs=lambda s: {"x": torch.randn(s["n"])},
                    dynamic={"x": {0: "n"}})
        with tempfile.TemporaryDirectory() as tmp, self.assertRaisesRegex(
                CaptureError, r"all_reduce\(op=PRODUCT\) at \S*test_capture_torch2\.py:\d+"):
            export(case, 2, tmp)


class Guards(unittest.TestCase):
    """A condition torch traced under becomes what the graph claims."""

    class Halves(nn.Module):
        def forward(self, x):
            return x.view(x.shape[0], 2, x.shape[1] // 2)  # holds only for an even seq

    def case(self):
        return Case(reference=self.Halves, implementation=self.Halves,
                    inputs=lambda s: {"x": torch.randn(3, s["seq"])}, dynamic={"x": {1: "seq"}}, sizes={"seq": 6})

    def test_an_even_size_guard_is_drafted_and_the_check_holds_under_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            export(self.case(), 2, tmp)
            props = {p.key: p.value for p in onnx.load(os.path.join(tmp, "rank0.onnx")).metadata_props}
            guard = props["shardproof.assume"]
            # Even, and not 2: at seq = 2 the half is 1, a size torch specializes.
            self.assertIn("((seq % 2) == 0)", guard)
            self.assertIn("(seq != 2)", guard)
            spec = os.path.join(tmp, "spec.yaml")
            subprocess.run([BINARY, "init", os.path.join(tmp, "reference.onnx"), "--ranks",
                            os.path.join(tmp, "rank{r}.onnx"), "--world-size", "2", "-o", spec], check=True,
                           capture_output=True)
            with open(spec) as f:
                drafted = f.read()
            self.assertIn(f'- "{guard}"  # torch.export traced', drafted)
            r = subprocess.run([BINARY, "check", spec], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # Without the guard the spec claims odd sizes no graph covers.
            with open(spec, "w") as f:
                f.write(drafted.replace(f'- "{guard}"', '- "seq >= 2"'))
            r = subprocess.run([BINARY, "check", spec], capture_output=True, text=True)
            self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
            self.assertIn(f"torch traced it under `{guard}`", r.stderr)


class ComplexRotary(unittest.TestCase):
    """Meta's complex RoPE (torch.polar, view_as_complex): heads over ranks."""

    def test_heads_split_over_ranks_are_verified_up_to_the_tables_length(self):
        code, report = check(complex_rope.case())
        self.assertEqual(code, 0, report)
        self.assertIn("VERIFIED", report)

    def test_the_table_drafted_as_a_bound_on_seq(self):
        # freqs_cis[:seq] of a 64-row table: torch narrows seq to [2, 64],
        # which is the graph's claim and init's constraint.
        with tempfile.TemporaryDirectory() as tmp:
            export(complex_rope.case(), 2, tmp)
            props = {p.key: p.value for p in onnx.load(os.path.join(tmp, "reference.onnx")).metadata_props}
        self.assertEqual(props.get("shardproof.assume"), "((seq <= 64))")

    def test_a_table_read_one_position_late_is_refuted(self):
        code, report = check(complex_rope.case("shifted"))
        self.assertEqual(code, 1, report)
        self.assertIn("CONFIRMED: the two numbers differ", report)


class RowParallelBias(unittest.TestCase):
    """The bias added before the all-reduce, a 1/P share on each rank (what
    DTensor's RowwiseParallel does). Was: UNKNOWN on correct code."""

    def test_shares_of_the_bias_on_2_and_4_ranks_are_verified(self):
        for variant in ("share", "scaled", "rank0"):
            for world in (2, 4):
                with self.subTest(variant, world=world):
                    code, report = check(row_bias.case(variant), world)
                    self.assertEqual(code, 0, report)

    def test_the_whole_bias_on_every_rank_is_refuted_at_the_row_parallel_linear(self):
        code, report = check(row_bias.case("whole"), 4)
        self.assertEqual(code, 1, report)
        self.assertIn("REFUTED at module fc2", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)


class DTensorForward(unittest.TestCase):
    """parallelize_module's forward: torch.export stops at DTensorSpec, so a
    module with DTensor parameters is traced by make_fx on its shards."""

    def test_colwise_then_rowwise_is_verified(self):
        code, report = check(dtensor_mlp.step(loss=False))
        self.assertEqual(code, 0, report)

    def test_a_rowwise_output_left_partial_is_refuted(self):
        code, report = check(dtensor_mlp.step(partial_output=True, loss=False))
        self.assertEqual(code, 1, report)
        self.assertIn("output 'y' on rank 0 differs", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)


class Doubled(nn.Module):
    def forward(self, x):
        return x * 2


class Groups(unittest.TestCase):
    def test_a_reduction_over_a_sub_group_is_unknown_naming_the_group(self):
        # Each rank reduces over its TP group of 2 inside DP 2 on 4 ranks:
        # read as a reduction over all four it would be wrong.
        class Local(nn.Module):
            def __init__(self):
                super().__init__()
                self.groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]

            def forward(self, x):
                y = x * 2
                dist.all_reduce(y, group=self.groups[dist.get_rank() // 2])
                return y

        case = Case(reference=Doubled, implementation=Local, inputs=lambda s: {"x": torch.randn(s["n"])},
                    dynamic={"x": {0: "n"}})
        code, report = check(case, world_size=4)
        self.assertEqual(code, 2, report)
        self.assertIn("runs over a group of 2 of the 4 ranks", report)

    def test_a_reduction_over_a_group_of_one_rank_is_the_identity(self):
        # A TP group of 1 (tensor parallelism off): all_reduce returns its input.
        class Alone(nn.Module):
            def __init__(self):
                super().__init__()
                self.group = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]

            def forward(self, x):
                y = x * 2
                dist.all_reduce(y, group=self.group)
                return y

        case = Case(reference=Doubled, implementation=Alone, inputs=lambda s: {"x": torch.randn(s["n"])},
                    dynamic={"x": {0: "n"}})
        code, report = check(case)
        self.assertEqual(code, 0, report)

    def test_a_group_kept_from_an_earlier_world_is_refused(self):
        # A module-level cache (Megatron's parallel_state) filled while an
        # earlier rank was traced: its group belongs to no live world.
        kept = []

        class Cached(nn.Module):
            def forward(self, x):
                if not kept:
                    kept.append(dist.new_group(list(range(dist.get_world_size()))))
                y = x * 2
                dist.all_reduce(y, group=kept[0])
                return y

        case = Case(reference=Cached, implementation=Cached, inputs=lambda s: {"x": torch.randn(s["n"])},
                    dynamic={"x": {0: "n"}})
        with self.assertRaisesRegex(CaptureError, r"at \S*test_capture_torch2\.py:\d+ .*belongs to no live world"):
            check(case)


class TrainingStep(unittest.TestCase):
    """export(train=True): torch's own backward, with the program's autograd
    Functions and their collectives, checked end to end."""

    def test_fs_backward_all_reduce_through_a_view_is_verified(self):
        for variant in ("plain", "view"):
            with self.subTest(variant):
                code, report = check(steps.case(variant), train=True)
                self.assertEqual(code, 0, report)
                self.assertIn("grad:norm.weight: VERIFIED", report)

    def test_fs_backward_reducing_twice_or_not_at_all_is_refuted_at_the_norm(self):
        for variant in ("view_twice", "missing"):
            with self.subTest(variant):
                code, report = check(steps.case(variant), train=True)
                self.assertEqual(code, 1, report)
                self.assertIn("grad:norm.weight: REFUTED", report)
                self.assertIn("grad:fc1.weight: VERIFIED", report)
                self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_gradient_nodes_name_the_forward_line_they_differentiate(self):
        with tempfile.TemporaryDirectory() as tmp:
            export(steps.case("plain"), 2, tmp, train=True)
            model = onnx.load(os.path.join(tmp, "rank0.onnx"))
        sites = {n.doc_string for n in model.graph.node}
        self.assertTrue(any(s.startswith("gradient of ") and "steps.py" in s for s in sites), sites)
        self.assertEqual([o.name for o in model.graph.output][:3], ["loss", "grad:norm.weight", "grad:norm.bias"])

    def test_dtensor_parameters_are_traced_as_the_ranks_shards(self):
        # parallelize_module's parameters are DTensors: each rank's graph
        # reads its shard, and DTensor's own all-reduce is in the graph.
        with tempfile.TemporaryDirectory() as tmp:
            export(dtensor_mlp.step(), 2, tmp, train=True)
            model = onnx.load(os.path.join(tmp, "rank1.onnx"))
        dims = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
        self.assertEqual(dims["up.weight"], [8, 8])     # Colwise: rows 8..15 of [16, 8]
        self.assertEqual(dims["down.weight"], [8, 8])   # Rowwise: columns 8..15 of [8, 16]
        self.assertEqual(dims["down.bias"], [8])
        reduces = [n for n in model.graph.node if n.op_type == "AllReduce"]
        self.assertEqual(len(reduces), 1)
        self.assertEqual([o.name for o in model.graph.output][1:], ["grad:up.weight", "grad:up.bias",
                                                                    "grad:down.weight", "grad:down.bias"])

    def test_torchs_own_tensor_parallel_styles_are_verified(self):
        # RowwiseParallel adds the replicated bias as b/P on each rank before
        # its all-reduce (was UNKNOWN).
        code, report = check(dtensor_mlp.step(), train=True)
        self.assertEqual(code, 0, report)
        self.assertIn("grad:down.bias: VERIFIED", report)

    def test_a_rowwise_output_left_partial_is_refuted_at_its_module(self):
        code, report = check(dtensor_mlp.step(partial_output=True), train=True)
        self.assertEqual(code, 1, report)
        self.assertIn("REFUTED at module down", report)
        self.assertIn("CONFIRMED: the two numbers differ", report)

    def test_a_buffer_written_during_the_step_is_refused_naming_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(CaptureError, r"^the reference writes its buffer 'calls' during the step"):
                export(steps.counting_case(), 2, tmp, train=True)
            self.assertEqual(os.listdir(tmp), [])

    def test_a_forward_that_is_not_a_scalar_loss_is_refused(self):
        case = aliases.case("plain")
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(CaptureError, r"forward must return the scalar loss for a training step, "
                                                      r"it returned \[batch, seq, 8\]"):
                export(case, 2, tmp, train=True)


if __name__ == "__main__":
    unittest.main()
