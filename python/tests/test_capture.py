"""Unit tests of shardproof.torch: what the simulated process group turns each
torch.distributed call into, and every error a user can meet.

Run: PYTHONPATH=python .venv/bin/python -m unittest discover -s python/tests
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

import onnx
import torch
import torch.distributed as dist
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from shardproof.torch import Case, CaptureError, export, intercepted  # noqa: E402

THIS_FILE = os.path.basename(__file__)


class Scale(nn.Module):
    """x @ w on each rank's column shard, then `body(y)` runs collectives."""

    def __init__(self, body, cols=4):
        super().__init__()
        world = dist.get_world_size() if dist.is_initialized() else 1
        self.weight = nn.Parameter(torch.randn(8, cols // world if body else cols))
        self.body = body

    def forward(self, x):
        y = torch.matmul(x, self.weight)
        return self.body(y) if self.body else y


def case(body, reference_cols=4, **kw):
    return Case(reference=lambda: Scale(None, reference_cols), implementation=lambda: Scale(body),
                inputs=lambda s: {"x": torch.randn(s["batch"], 8)}, dynamic={"x": {0: "batch"}}, **kw)


def nodes(path):
    return [(n.domain, n.op_type, {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute})
            for n in onnx.load(path).graph.node]


def collectives(path):
    return [n for n in nodes(path) if n[0] in ("com.microsoft", "shardproof")]


class Intercepted(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def export(self, body, world=2, **kw):
        with intercepted():
            return export(case(body, **kw), world, self.out)

    def test_all_reduce_in_place_is_read_by_what_follows(self):
        def body(y):
            dist.all_reduce(y)
            return y * 2
        self.export(body, reference_cols=2)
        model = onnx.load(os.path.join(self.out, "rank0.onnx"))
        ar = [n for n in model.graph.node if n.op_type == "AllReduce"]
        self.assertEqual(len(ar), 1)
        self.assertEqual(ar[0].domain, "com.microsoft")
        # The multiplication reads the collective's result (through the
        # in-place copy), not the rank's partial product.
        produced = {o: n for n in model.graph.node for o in n.output}
        mul = [n for n in model.graph.node if n.op_type == "Mul"][0]
        seen, todo = set(), list(mul.input)
        while todo:
            name = todo.pop()
            if name in produced and name not in seen:
                seen.add(name)
                todo.extend(produced[name].input)
        self.assertIn(ar[0].output[0], seen)
        self.assertIn(THIS_FILE, ar[0].doc_string)  # the user's call site

    def test_max_and_min_become_the_shardproof_all_reduce(self):
        def body(y):
            dist.all_reduce(y, op=dist.ReduceOp.MAX)
            dist.all_reduce(y, op=dist.ReduceOp.MIN)
            return y
        self.export(body, reference_cols=2)
        self.assertEqual([(d, t, a.get("op", b"").decode()) for d, t, a in collectives(
            os.path.join(self.out, "rank1.onnx"))], [("shardproof", "AllReduce", "max"),
                                                     ("shardproof", "AllReduce", "min")])

    def test_gathers_scatters_and_all_to_all(self):
        def body(y):
            full = torch.empty(y.size(0) * 2, y.size(1))
            dist.all_gather_into_tensor(full, y)
            parts = [torch.empty_like(y) for _ in range(2)]
            dist.all_gather(parts, y)
            half = torch.empty(full.size(0) // 2, full.size(1))
            dist.reduce_scatter_tensor(half, full)
            swapped = torch.empty_like(half)
            dist.all_to_all_single(swapped, half)
            return torch.cat([swapped, swapped], dim=1) + torch.cat(parts, dim=1)
        self.export(body, reference_cols=2)
        got = [(t, a.get("axis"), a.get("group_size")) for _, t, a in collectives(
            os.path.join(self.out, "rank0.onnx"))]
        self.assertEqual(got, [("AllGather", 0, 2), ("AllGather", 0, 2), ("ReduceScatter", 0, 2),
                               ("AllToAll", None, 2)])

    def test_parameters_keep_their_module_names(self):
        self.export(lambda y: y)
        for f in ("reference.onnx", "rank0.onnx"):
            names = [i.name for i in onnx.load(os.path.join(self.out, f)).graph.input]
            self.assertEqual(names, ["x", "weight"])

    def test_every_node_names_the_users_line(self):
        # Reports and SARIF point at the user's code: the MatMul is Scale.forward's
        # line, the all-reduce the lambda's; no node names torch or this package.
        self.export(lambda y: dist.all_reduce(y) or y)
        rank0 = onnx.load(os.path.join(self.out, "rank0.onnx")).graph.node
        matmul = [n.doc_string for n in rank0 if n.op_type == "MatMul"]
        self.assertEqual(len(matmul), 1)
        self.assertRegex(matmul[0], rf"{THIS_FILE}:\d+ in forward$")
        reduce = [n.doc_string for n in rank0 if n.op_type == "AllReduce"]
        self.assertRegex(reduce[0], rf"{THIS_FILE}:\d+ in ")
        for n in rank0:
            self.assertNotIn("dist-packages/torch", n.doc_string)
            self.assertNotIn("shardproof/torch", n.doc_string)
            self.assertNotIn("\n", n.doc_string)

    def test_rank_and_world_size_inside_the_module(self):
        seen = []

        def body(y):
            seen.append((dist.get_rank(), dist.get_world_size(), dist.is_initialized()))
            return y
        self.export(body, world=4)
        self.assertIn((3, 4, True), seen)
        self.assertIn((0, 4, True), seen)

    def test_ranks_exported_in_worker_processes_are_the_same_files(self):
        def body(y):
            parts = [torch.empty_like(y) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, y)
            return torch.cat(parts, dim=-1)
        with intercepted():
            one = export(case(body), 4, self.out + "1")
            two = export(case(body), 4, self.out + "2", workers=3)
        self.assertEqual(one.collectives, two.collectives)
        for a, b in zip([one.reference] + one.ranks, [two.reference] + two.ranks):
            with open(a, "rb") as fa, open(b, "rb") as fb:
                self.assertEqual(fa.read(), fb.read(), f"{os.path.basename(a)} differs with workers=3")

    def test_the_api_is_restored_afterwards(self):
        real = dist.all_reduce
        self.export(lambda y: y)
        self.assertIs(dist.all_reduce, real)
        self.assertFalse(dist.is_initialized())


class Errors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def fails(self, c, *fragments, world=2, workers=1):
        with intercepted():
            with self.assertRaises(CaptureError) as e:
                export(c, world, self.out, workers=workers)
        for f in fragments:
            self.assertIn(f, str(e.exception))
        self.assertFalse(os.path.exists(self.out), "nothing is written when the export fails")
        return str(e.exception)

    def test_unsupported_collectives_name_the_call_and_its_line(self):
        def body(y):
            dist.broadcast(y, src=0)
            return y
        self.fails(case(body), "torch.distributed.broadcast at ", THIS_FILE, "is not supported")

    def test_uneven_all_to_all_splits(self):
        def body(y):
            out = torch.empty_like(y)
            dist.all_to_all_single(out, y, output_split_sizes=[1, 3], input_split_sizes=[1, 3])
            return out
        self.fails(case(body), "uneven input_split_sizes=[1, 3]", THIS_FILE)

    def test_a_second_process_group(self):
        def body(y):
            g = dist.new_group(ranks=[0])
            dist.all_reduce(y, group=g)
            return y
        self.fails(case(body), "new_group(ranks=[0])", "only a group of all 2 ranks")

    def test_a_reduce_op_other_than_sum_max_min(self):
        def body(y):
            dist.all_reduce(y, op=dist.ReduceOp.PRODUCT)
            return y
        self.fails(case(body), "reduce op", "SUM, MAX and MIN")

    def test_a_size_baked_into_the_graph(self):
        def body(y):
            n = int(y.shape[0])  # a Python int: traced as a constant
            return y + torch.ones(n, 1)
        msg = self.fails(case(body), "depends on the example size", "keep sizes as tensors")
        self.assertIn("batch=", msg)

    def test_an_example_size_equal_to_a_width_is_named(self):
        # The tracer cannot tell batch=8 from x's width 8: the message says
        # so, next to the usual causes, so that the user tries other sizes.
        def body(y):
            return y + torch.ones(int(y.shape[0]), 1)
        msg = self.fails(case(body, sizes=[{"batch": 4}, {"batch": 8}]), "depends on the example size",
                         "batch=8 (export 2)", "Case.sizes")
        self.assertNotIn("batch=4 (export 1)", msg)

    def test_ranks_that_call_different_collectives(self):
        def body(y):
            if dist.get_rank() == 1:
                dist.all_reduce(y)
            return y
        self.fails(case(body), "rank 1 calls other collectives than rank 0", "rank 0: (none)", "all_reduce(op=sum)")

    def test_a_module_that_fails_to_build(self):
        def broken():
            raise ValueError("hidden size 7 is not divisible by 2 heads")
        c = case(lambda y: y)
        c.implementation = broken
        self.fails(c, "building the implementation on rank 0 failed", "hidden size 7", THIS_FILE)

    def test_a_rank_that_fails_in_a_worker_process_is_named(self):
        def body(y):
            if dist.get_rank() == 2:
                raise ValueError("rank 2 has no shard")
            return y
        self.fails(case(body), "running the implementation on rank 2 failed", "rank 2 has no shard", THIS_FILE,
                   world=4, workers=2)

    def test_a_worker_process_that_dies_is_named_not_waited_for(self):
        # A worker killed for lack of memory sends nothing: the export fails
        # naming its rank instead of waiting for a result forever.
        def body(y):
            if dist.get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return y
        self.fails(case(body), "the process exporting the implementation on rank 1 ended without a result",
                   "exit code -9", "fewer --jobs", world=3, workers=2)

    def test_a_module_whose_forward_fails(self):
        c = case(lambda y: y @ torch.ones(3, 3))
        self.fails(c, "running the implementation on rank 0 failed", "RuntimeError")


class Factories(unittest.TestCase):
    def test_a_factory_imports_its_neighbour_not_a_same_named_module_loaded_before(self):
        # tests/models/llama.py (forward fixtures) is imported before
        # tests/models/megatron/training.py, whose `import llama` means
        # megatron/llama.py: the build's fixture generation once failed so.
        from shardproof.torch import load_factory
        with tempfile.TemporaryDirectory() as tmp:
            for d, marker in (("elsewhere", "other"), ("user", "mine")):
                os.makedirs(os.path.join(tmp, d))
                with open(os.path.join(tmp, d, "blocks.py"), "w") as f:
                    f.write(f"MARKER = '{marker}'\n")
            with open(os.path.join(tmp, "user", "step.py"), "w") as f:
                f.write(textwrap.dedent("""\
                    import blocks
                    from shardproof.torch import Case

                    def make():
                        assert blocks.MARKER == "mine", blocks.MARKER
                        return Case(reference=lambda: None, implementation=lambda: None, inputs=lambda s: {})
                    """))
            sys.path.insert(0, os.path.join(tmp, "elsewhere"))
            try:
                import blocks
                self.assertEqual(blocks.MARKER, "other")
                load_factory(os.path.join(tmp, "user", "step.py") + ":make")
                # What was imported before is left as it was.
                self.assertIs(sys.modules["blocks"], blocks)
            finally:
                sys.path.remove(os.path.join(tmp, "elsewhere"))
                sys.modules.pop("blocks", None)


class Cli(unittest.TestCase):
    def run_cli(self, *args):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        return subprocess.run([sys.executable, "-m", "shardproof.torch", *args], capture_output=True, text=True,
                              env=env)

    def test_export_then_an_error_exit(self):
        with tempfile.TemporaryDirectory() as tmp:
            user = os.path.join(tmp, "user.py")
            with open(user, "w") as f:
                f.write(textwrap.dedent("""\
                    import torch, torch.distributed as dist
                    from torch import nn
                    from shardproof.torch import Case

                    class M(nn.Module):
                        def __init__(self, shard):
                            super().__init__()
                            p = dist.get_world_size() if shard else 1
                            self.w = nn.Parameter(torch.randn(4 // p, 4))
                        def forward(self, x):
                            y = x @ self.w.t()
                            if dist.is_initialized() and dist.get_world_size() > 1:
                                parts = [torch.empty_like(y) for _ in range(dist.get_world_size())]
                                dist.all_gather(parts, y)
                                y = torch.cat(parts, dim=-1)
                            return y

                    def make():
                        return Case(reference=lambda: M(False), implementation=lambda: M(True),
                                    inputs=lambda s: {"x": torch.randn(s["n"], 4)})

                    class Sends(nn.Module):
                        def forward(self, x):
                            dist.send(x, dst=1)
                            return x

                    def broken():
                        return Case(reference=nn.Identity, implementation=Sends,
                                    inputs=lambda s: {"x": torch.randn(s["n"], 4)}, dynamic={"x": {0: "n"}})
                    """))
            out = os.path.join(tmp, "out")
            r = self.run_cli("export", f"{user}:make", "--world-size", "2", "--out", out, "--dynamic", "x=0:n")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(out)), ["rank0.onnx", "rank1.onnx", "reference.onnx"])
            self.assertIn("all_gather() at " + user, r.stdout)  # the torch 2 path, the default
            r = self.run_cli("export", f"{user}:make", "--world-size", "2", "--out", out, "--dynamic", "x=0:n",
                             "--legacy")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("all_gather(axis=0, stacked=True) at " + user, r.stdout)
            r = self.run_cli("export", f"{user}:nope", "--world-size", "2", "--out", out)
            self.assertEqual(r.returncode, 1)
            self.assertIn("has no 'nope' (callables there: ", r.stderr)
            r = self.run_cli("export", f"{user}:broken", "--world-size", "2", "--out", out)
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stderr, r"send at " + re.escape(user) + r":\d+ in forward: point-to-point "
                                       r"communication is not supported yet")
            r = self.run_cli("export", "missing.py:make", "--world-size", "2", "--out", out)
            self.assertEqual(r.returncode, 1)
            self.assertIn("missing.py: no such file", r.stderr)
            r = self.run_cli("export", f"{user}:make", "--world-size", "2", "--out", out, "--jobs", "0")
            self.assertEqual(r.returncode, 2)
            self.assertIn("--jobs", r.stderr)
            self.assertIn("at least 1, got '0'", r.stderr)


if __name__ == "__main__":
    unittest.main()
