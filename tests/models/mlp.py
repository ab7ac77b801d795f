"""A two-layer MLP, y = gelu(x @ w1 + b1) @ w2 + b2, as a reference model and
as Megatron-style tensor-parallel ranks (w1 column-parallel, w2 row-parallel,
one all-reduce), plus ranks carrying the bugs users actually hit.

Weights are forward arguments, so they become graph inputs named x, w1, b1,
w2, b2 that the YAML specs place. Submodules fc1/act/fc2 give node names such
as /fc2/MatMul, which the report turns into module paths.
"""
import torch
import torch.nn.functional as F
from torch import nn

from collectives import all_reduce, mystery
from export import export

D_MODEL = 8
NAMES = ["x", "w1", "b1", "w2", "b2"]
DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}


class Fc1(nn.Module):
    def __init__(self, cols=None):
        super().__init__()
        self.cols = cols  # (start, end): slice w1/b1 columns inside the graph

    def forward(self, x, w, b):
        if self.cols:
            s, e = self.cols
            w, b = w[:, s:e], b[s:e]
        return torch.matmul(x, w) + b


class Act(nn.Module):
    def __init__(self, mystery_op=False):
        super().__init__()
        self.mystery_op = mystery_op

    def forward(self, h):
        h = F.gelu(h)
        return mystery(h) if self.mystery_op else h


class Fc2(nn.Module):
    def __init__(self, rows=None, reduce=False, bias_before_reduce=False):
        super().__init__()
        self.rows, self.reduce, self.bias_before_reduce = rows, reduce, bias_before_reduce

    def forward(self, h, w, b):
        if self.rows:
            s, e = self.rows
            w = w[s:e, :]
        p = torch.matmul(h, w)
        if self.bias_before_reduce:
            p = p + b  # bug: every rank adds b2, so the sum holds it world_size times
        if self.reduce:
            p = all_reduce(p)
        if not self.bias_before_reduce:
            p = p + b
        return p


class Mlp(nn.Module):
    def __init__(self, fc1=None, act=None, fc2=None):
        super().__init__()
        self.fc1, self.act, self.fc2 = fc1 or Fc1(), act or Act(), fc2 or Fc2()

    def forward(self, x, w1, b1, w2, b2):
        return self.fc2(self.act(self.fc1(x, w1, b1)), w2, b2)


def _args(hidden_w1, hidden_w2, batch=2, seq=5):
    return (torch.randn(batch, seq, D_MODEL), torch.randn(D_MODEL, hidden_w1), torch.randn(hidden_w1),
            torch.randn(hidden_w2, D_MODEL), torch.randn(D_MODEL))


def _export(module, args, path):
    export(module, args, NAMES, ["y"], DYNAMIC, path)


def tensor_split_sizes(n, world):
    return [n // world + (1 if r < n % world else 0) for r in range(world)]


def generate(out):
    """Writes every MLP model into directory `out`."""
    _export(Mlp(), _args(16, 16), f"{out}/mlp_ref.onnx")
    _export(Mlp(), _args(8, 8), f"{out}/mlp_uneven_ref.onnx")

    # Correct tensor parallelism: rank r holds its column block of w1/b1 and row block of w2.
    for world in (2, 4):
        k = 16 // world
        for r in range(world):
            _export(Mlp(fc2=Fc2(reduce=True)), _args(k, k), f"{out}/mlp_tp{world}_rank{r}.onnx")

    # Uneven: hidden 8 over 3 ranks, torch.tensor_split sizes 3/3/2.
    for r, k in enumerate(tensor_split_sizes(8, 3)):
        _export(Mlp(fc2=Fc2(reduce=True)), _args(k, k), f"{out}/mlp_uneven_rank{r}.onnx")

    bugs = {
        "bias_before_reduce": lambda r: Mlp(fc2=Fc2(reduce=True, bias_before_reduce=True)),
        "no_allreduce": lambda r: Mlp(fc2=Fc2(reduce=False)),
        "unknown_op": lambda r: Mlp(act=Act(mystery_op=True), fc2=Fc2(reduce=True)),
    }
    for name, make in bugs.items():
        for r in range(2):
            _export(make(r), _args(8, 8), f"{out}/mlp_{name}_rank{r}.onnx")

    # Ranks that hold the full weights and slice their block inside the graph.
    for r in range(2):
        block = (8 * r, 8 * r + 8)
        _export(Mlp(fc1=Fc1(cols=block), fc2=Fc2(rows=block, reduce=True)), _args(16, 16),
                f"{out}/mlp_slice_rank{r}.onnx")
        # Off by one: rank 1 takes columns 7..14 of w1/b1 instead of 8..15.
        cols = (7, 15) if r == 1 else block
        _export(Mlp(fc1=Fc1(cols=cols), fc2=Fc2(rows=block, reduce=True)), _args(16, 16),
                f"{out}/mlp_offbyone_rank{r}.onnx")
