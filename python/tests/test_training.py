"""Unit tests of `export(..., train=True)`: the backward rules, the sizes
autograd bakes in written back as shape arithmetic, and the errors.

Run: PYTHONPATH=python .venv/bin/python -m unittest discover -s python/tests
"""
import os
import sys
import tempfile
import unittest
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from shardproof.torch import Case, CaptureError, export, gradients, intercepted  # noqa: E402
from shardproof.torch.sizes import _fit, _rewrite  # noqa: E402


class Activations(nn.Module):
    """Every op with a backward rule, on a [batch, 8] input; returns the loss."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(self.norm(x))
        h = torch.tanh(h) + torch.sigmoid(h) + F.relu(h) + F.silu(h) + F.gelu(h) + F.gelu(h, approximate="tanh")
        h = h + torch.exp(-h * h) + torch.rsqrt(h * h + 1) + torch.sqrt(h * h + 1)
        h = F.softmax(h, dim=-1) + F.log_softmax(h, dim=-1)
        return torch.matmul(h.unsqueeze(0), self.proj.weight.unsqueeze(0).transpose(-1, -2)).sum()


class BackwardRules(unittest.TestCase):
    def test_each_rule_gives_torchs_own_gradient(self):
        torch.manual_seed(0)
        module, x = Activations(), torch.randn(3, 8)
        expected = torch.autograd.grad(module(x), list(module.parameters()))
        with gradients.replaced():
            got = torch.autograd.grad(module(x), list(module.parameters()), create_graph=True)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)

    def test_embedding_and_gather_give_torchs_own_gradient(self):
        torch.manual_seed(0)
        table = nn.Parameter(torch.randn(6, 4))
        ids = torch.tensor([[0, 5, 5], [2, 0, 1]])

        def loss():
            h = F.embedding(ids, table) + F.embedding(ids, table, padding_idx=-1)   # [2, 3, 4]
            picked = torch.gather(F.log_softmax(h, -1), -1, ids.unsqueeze(-1) % 4)
            return (h * h).sum() + picked.sum()
        expected, = torch.autograd.grad(loss(), [table])
        with gradients.replaced():
            got, = torch.autograd.grad(loss(), [table], create_graph=True)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)

    def test_the_functions_are_restored_afterwards(self):
        before = (torch.tanh, F.softmax, torch.Tensor.softmax, F.layer_norm, F.linear)
        with gradients.replaced():
            self.assertIsNot(torch.tanh, before[0])
        self.assertEqual((torch.tanh, F.softmax, torch.Tensor.softmax, F.layer_norm, F.linear), before)


class SizeFit(unittest.TestCase):
    points = [{"batch": 4, "seq": 6}, {"batch": 10, "seq": 12}, {"batch": 16, "seq": 18}]

    def test_a_size_a_product_and_a_multiple(self):
        self.assertEqual(_fit([6, 12, 18], self.points, ["batch", "seq"]), (1, (0, 1)))
        self.assertEqual(_fit([192, 960, 2304], self.points, ["batch", "seq"]), (8, (1, 1)))

    def test_a_float_reciprocal_for_a_mean(self):
        k, exps = _fit([1 / 24, 1 / 120, 1 / 288], self.points, ["batch", "seq"])
        self.assertEqual(exps, (-1, -1))

    def test_no_product_of_sizes_explains_it(self):
        self.assertIsNone(_fit([7, 13, 20], self.points, ["batch", "seq"]))


class FilledConstant(unittest.TestCase):
    """autograd bakes the zeros of a gradient that flows nowhere as a constant
    tensor shaped by the example sizes: it becomes ConstantOfShape of the
    shape computed from the inputs, and nothing else does."""
    points = [{"batch": 4, "seq": 3}, {"batch": 12, "seq": 7}, {"batch": 20, "seq": 11}]
    axes = {"batch": ("x", 0), "seq": ("x", 1)}

    def rewrite(self, arrays):
        node = helper.make_node("Constant", [], ["c"], name="/Constant_9",
                                value=numpy_helper.from_array(arrays[0]))
        return _rewrite(node, arrays, self.points, ["batch", "seq"], self.axes)

    def test_zeros_shaped_by_the_sizes(self):
        nodes = self.rewrite([np.zeros((p["seq"], p["batch"], 32), np.float32) for p in self.points])
        self.assertEqual(nodes[-1].op_type, "ConstantOfShape")
        self.assertEqual(nodes[-1].output[0], "c")  # consumers keep reading the constant's name
        self.assertEqual(numpy_helper.to_array(nodes[-1].attribute[0].t).tolist(), [0.0])

    def test_a_tensor_with_different_values_is_not_a_fill(self):
        arrays = [np.zeros((p["seq"], p["batch"]), np.float32) for p in self.points]
        arrays[1][0, 0] = 1.0
        self.assertIsNone(self.rewrite(arrays))

    def test_a_shape_no_product_of_sizes_explains(self):
        self.assertIsNone(self.rewrite([np.zeros((n, 2), np.float32) for n in (5, 6, 9)]))


class ShardLength(unittest.TestCase):
    """Under sequence parallelism a rank's shard of a sequence every rank
    holds whole (the embedding's reduce-scatter output) is seq / P, a size no
    input declares: it is computed as an exact integer division of seq."""
    points = [{"batch": 4, "seq": 6}, {"batch": 10, "seq": 12}, {"batch": 16, "seq": 18}]
    axes = {"batch": ("ids", 1), "seq": ("ids", 0)}

    def test_half_the_sequence(self):
        self.assertEqual(_fit([3, 6, 9], self.points, ["batch", "seq"]), (Fraction(1, 2), (0, 1)))
        arrays = [np.zeros((p["seq"] // 2, p["batch"], 8), np.float32) for p in self.points]
        node = helper.make_node("Constant", [], ["c"], name="/Constant_3", value=numpy_helper.from_array(arrays[0]))
        nodes = _rewrite(node, arrays, self.points, ["batch", "seq"], self.axes)
        self.assertEqual(nodes[-1].op_type, "ConstantOfShape")
        divisors = [numpy_helper.to_array(n.attribute[0].t).tolist() for n in nodes if n.op_type == "Constant"
                    and any(m.op_type == "Div" and n.output[0] in m.input for m in nodes)]
        self.assertEqual(divisors, [2])

    def test_a_length_no_fraction_of_a_size_explains(self):
        self.assertIsNone(_fit([3, 7, 9], self.points, ["batch", "seq"]))


class Mlp(nn.Module):
    def __init__(self, parallel):
        super().__init__()
        world = dist.get_world_size() if parallel else 1
        self.up = nn.Linear(8, 16 // world)

    def forward(self, x):
        y = self.up(x)
        return (y * y).sum()


class TrainStep(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def test_outputs_are_the_loss_and_every_parameters_gradient(self):
        case = Case(reference=lambda: Mlp(False), implementation=lambda: Mlp(True),
                    inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], 8)},
                    dynamic={"x": {0: "batch", 1: "seq"}})
        with intercepted():
            export(case, 2, self.out, train=True)
        for name in ("reference", "rank0", "rank1"):
            graph = onnx.load(os.path.join(self.out, f"{name}.onnx")).graph
            self.assertEqual([o.name for o in graph.output], ["loss", "grad:up.weight", "grad:up.bias"])
            # The sum's backward expands to the input's shape: read from the
            # input, not the example size.
            self.assertTrue(any(n.name.startswith("/shardproof_sizes") for n in graph.node))

    def test_a_mean_loss_writes_its_float_divisor_back(self):
        # mean's backward divides by the element count, saved as a float:
        # written back as a Cast of the input's sizes (onnx 1.12 has no
        # helper.np_dtype_to_tensor_dtype; this export failed on it).
        class MeanMlp(Mlp):
            def forward(self, x):
                y = self.up(x)
                return (y * y).mean()

        case = Case(reference=lambda: MeanMlp(False), implementation=lambda: MeanMlp(True),
                    inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], 8)},
                    dynamic={"x": {0: "batch", 1: "seq"}})
        with intercepted():
            export(case, 2, self.out, train=True)
        graph = onnx.load(os.path.join(self.out, "reference.onnx")).graph
        self.assertTrue(any(n.op_type == "Cast" and n.name.startswith("/shardproof_sizes") for n in graph.node))

    def test_a_forward_that_does_not_return_the_loss(self):
        case = Case(reference=lambda: nn.Linear(8, 8), implementation=lambda: nn.Linear(8, 8),
                    inputs=lambda s: {"x": torch.randn(s["batch"], 8)}, dynamic={"x": {0: "batch"}})
        with intercepted():
            with self.assertRaises(CaptureError) as e:
                export(case, 2, self.out, train=True)
        self.assertIn("must return the scalar loss, it returned [", str(e.exception))
        self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    unittest.main()
