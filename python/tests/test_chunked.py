"""The ONNX conversion in pieces (shardproof/torch/chunked.py) gives the graph
the whole-graph conversion gives: same nodes in the same order, same inputs and
outputs, on a training step whose collectives are autograd.Functions (nodes
with sub-blocks) and whose sizes are written back as shape arithmetic.

Run: PYTHONPATH=python .venv/bin/python -m unittest discover -s python/tests
"""
import os
import sys
import tempfile
import unittest
import warnings

import onnx
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from shardproof.torch import Case, CaptureError, chunked, export, intercepted  # noqa: E402


class Layer(nn.Module):
    """A row-parallel MLP block: its all-reduce is an autograd.Function."""

    def __init__(self, parallel):
        super().__init__()
        self.world = dist.get_world_size() if parallel else 1
        self.up = nn.Linear(8, 16 // self.world)
        self.down = nn.Linear(16 // self.world, 8, bias=False)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        y = self.down(F.gelu(self.up(self.norm(x))))
        if self.world > 1:
            dist.all_reduce(y)
        return x + y


class Deep(nn.Module):
    def __init__(self, parallel, depth=4):
        super().__init__()
        self.layers = nn.ModuleList([Layer(parallel) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return (x * x).mean()


def _dims(value_info):
    """A value's dimensions: a number, a name, or None where unknown."""
    return [d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in value_info.type.tensor_type.shape.dim]


def _significant(graph):
    """Node op types in order, without constants and without the size
    arithmetic the exporter writes back (a piece that reads a size constant
    recomputes it: the same numbers, once per piece)."""
    return [n.op_type for n in graph.node if n.op_type != "Constant" and not n.name.startswith("/shardproof_sizes")]


class Pieces(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.saved = chunked.CHUNK, torch._C._jit_pass_onnx

    def tearDown(self):
        chunked.CHUNK, torch._C._jit_pass_onnx = self.saved
        self.tmp.cleanup()

    def export(self, chunk, name):
        chunked.CHUNK = chunk
        calls = []
        original = self.saved[1]

        def counted(graph, export_type):
            calls.append(len(list(graph.nodes())))
            return original(graph, export_type)

        torch._C._jit_pass_onnx = counted
        case = Case(reference=lambda: Deep(False), implementation=lambda: Deep(True),
                    inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], 8)},
                    dynamic={"x": {0: "batch", 1: "seq"}})
        out = os.path.join(self.tmp.name, name)
        with intercepted():
            export(case, 2, out, train=True)
        torch._C._jit_pass_onnx = original
        return out, calls

    def test_a_training_step_in_pieces_has_the_nodes_of_the_whole_conversion(self):
        whole, whole_calls = self.export(0, "whole")
        pieces, piece_calls = self.export(16, "pieces")
        # Not a silent fallback: each graph was converted in many small pieces.
        self.assertGreater(len(piece_calls), 4 * len(whole_calls))
        self.assertLessEqual(max(piece_calls), 2 * 16)  # its nodes plus the constants and lists it clones
        for name in ("reference", "rank0", "rank1"):
            a = onnx.load(os.path.join(whole, f"{name}.onnx")).graph
            b = onnx.load(os.path.join(pieces, f"{name}.onnx")).graph
            self.assertEqual([i.name for i in a.input], [i.name for i in b.input], name)
            self.assertEqual([o.name for o in a.output], [o.name for o in b.output], name)
            self.assertEqual(_significant(a), _significant(b), name)
            # Every graph output keeps its element type and rank, and no
            # dimension differs where both exports know it. (Not equal: the
            # whole export reruns shape inference over the converted graph,
            # which knows some dimensions the per-node inference of the pieces
            # does not, and the other way round.)
            for x, y in zip(a.output, b.output):
                self.assertEqual(x.type.tensor_type.elem_type, y.type.tensor_type.elem_type, x.name)
                dx, dy = _dims(x), _dims(y)
                self.assertEqual(len(dx), len(dy), x.name)
                for i, (p, q) in enumerate(zip(dx, dy)):
                    if p is not None and q is not None:
                        self.assertEqual(p, q, f"{name}: {x.name} dimension {i}")

    def test_a_tensor_read_later_only_through_a_list_leaves_its_piece(self):
        # Seen at 24 Llama layers: a list of tensors built in one piece and
        # read in a later one, which rebuilds the list from the tensors; the
        # tensors had to leave the first piece although no later node reads
        # them directly. Missing, the whole export fell back to the quadratic
        # conversion without a word.
        with warnings.catch_warnings():  # torch 2.x calls torch.jit.trace deprecated; the exporter traces with it
            warnings.simplefilter("ignore", DeprecationWarning)
            g = torch.jit.trace(lambda x: torch.cat([x.t(), x.t()]) + 1, torch.randn(2, 3)).graph
        nodes = list(g.nodes())
        split = [n.kind() for n in nodes].index("prim::ListConstruct") + 1
        converted = {i: i for i in g.inputs()}
        _, _, outs = chunked._build_piece(nodes[:split], converted)
        transposes = [n.output() for n in nodes[:split] if n.kind() == "aten::t"]
        self.assertEqual(len(transposes), 2)
        for t in transposes:
            self.assertIn(t, outs)
        converted.update({o: o for o in outs})
        piece, ins, _ = chunked._build_piece(nodes[split:], converted)
        self.assertEqual(ins, transposes)
        self.assertIn("prim::ListConstruct", [n.kind() for n in piece.nodes()])


class Unsupported(nn.Module):
    """Deep enough for pieces of 16 nodes, with an op torch 1.13 cannot export."""

    def forward(self, x):
        for _ in range(12):
            x = F.gelu(x * 2 + 1)
        return torch.fft.fft(x).real


class Errors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.saved = chunked.CHUNK

    def tearDown(self):
        chunked.CHUNK = self.saved
        self.tmp.cleanup()

    def message(self, chunk):
        chunked.CHUNK = chunk
        case = Case(reference=Unsupported, implementation=Unsupported,
                    inputs=lambda s: {"x": torch.randn(s["batch"], 8)}, dynamic={"x": {0: "batch"}})
        with intercepted():
            with self.assertRaises(CaptureError) as e:
                export(case, 2, os.path.join(self.tmp.name, f"out{chunk}"))
        return str(e.exception)

    def test_an_op_without_an_onnx_rule_reads_as_without_pieces(self):
        whole = self.message(0)
        self.assertIn("fft", whole)
        self.assertEqual(self.message(16), whole)


if __name__ == "__main__":
    unittest.main()
