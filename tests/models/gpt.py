"""A GPT-2 style transformer block (pre-LayerNorm, causal multi-head attention,
tanh-GELU MLP, residuals) as a reference model and as Megatron tensor-parallel
ranks: q/k/v and fc column-parallel (each rank owns whole heads), o_proj and
proj row-parallel followed by an all-reduce, biases of row-parallel layers
added once after the reduce, LayerNorms replicated.

Weights are nn.Parameters, so they are initializers named after the module
path ("attn.q_proj.weight"). Linear weights are stored [in, out] so the graph
reads them directly (no exporter-renamed transposed copies).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from collectives import all_reduce
from export import export

D_MODEL, HEADS, D_FF = 16, 4, 64
DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}


class Linear(nn.Module):
    """x @ weight (+ bias); `reduce` all-reduces the product before the bias
    (Megatron's RowParallelLinear)."""

    def __init__(self, d_in, d_out, bias=True, reduce=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.bias = nn.Parameter(torch.randn(d_out)) if bias else None
        self.reduce = reduce

    def forward(self, x):
        y = torch.matmul(x, self.weight)
        if self.reduce:
            y = all_reduce(y)
        return y + self.bias if self.bias is not None else y


class LayerNorm(nn.LayerNorm):
    def __init__(self, d):
        super().__init__(d)
        # Distinct values: identical initializers get merged by the exporter.
        with torch.no_grad():
            self.weight.uniform_(0.5, 1.5)
            self.bias.uniform_(-0.1, 0.1)


class Attention(nn.Module):
    def __init__(self, world=1):
        super().__init__()
        self.local_heads = HEADS // world
        self.hd = D_MODEL // HEADS
        local = self.local_heads * self.hd
        self.q_proj = Linear(D_MODEL, local)
        self.k_proj = Linear(D_MODEL, local)
        self.v_proj = Linear(D_MODEL, local)
        self.o_proj = Linear(local, D_MODEL, reduce=world > 1)

    def heads(self, t, b, s):
        return t.view(b, s, self.local_heads, self.hd).transpose(1, 2)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (self.heads(p(x), b, s) for p in (self.q_proj, self.k_proj, self.v_proj))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        att = att + torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        o = torch.matmul(torch.softmax(att, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, self.local_heads * self.hd))


class Mlp(nn.Module):
    def __init__(self, world=1):
        super().__init__()
        self.fc = Linear(D_MODEL, D_FF // world)
        self.proj = Linear(D_FF // world, D_MODEL, reduce=world > 1)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, world=1):
        super().__init__()
        self.ln_1 = LayerNorm(D_MODEL)
        self.attn = Attention(world)
        self.ln_2 = LayerNorm(D_MODEL)
        self.mlp = Mlp(world)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def _export(module, path):
    export(module, (torch.randn(2, 5, D_MODEL),), ["x"], ["y"], DYNAMIC, path)


def generate(out):
    _export(Block(), f"{out}/gpt_ref.onnx")
    for world in (2, 4):
        for r in range(world):
            _export(Block(world), f"{out}/gpt_tp{world}_rank{r}.onnx")
