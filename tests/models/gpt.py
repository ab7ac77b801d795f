"""A GPT-2 style transformer block (pre-LayerNorm, causal multi-head attention,
tanh-GELU MLP, residuals) as a reference model and as Megatron tensor-parallel
ranks: q/k/v and fc column-parallel (each rank owns whole heads), o_proj and
proj row-parallel followed by an all-reduce, biases of row-parallel layers
added once after the reduce, LayerNorms replicated.

Weights are nn.Parameters, so they are initializers named after the module
path ("attn.q_proj.weight"). Linear weights are stored [in, out] so the graph
reads them directly (no exporter-renamed transposed copies).

Variants (`Options`): a fused QKV projection (one column-parallel linear whose
per-rank weight is [q_r | k_r | v_r]), and the bugs the fixtures model.
"""
import contextlib
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Options:
    fused_qkv: bool = False       # one qkv_proj instead of q/k/v projections
    attn_allreduce: bool = True   # False: o_proj partial sums are never reduced
    mask_diagonal: int = 1        # torch.triu diagonal of the causal mask (1 is right)


class Attention(nn.Module):
    def __init__(self, world=1, opts=Options()):
        super().__init__()
        self.local_heads = HEADS // world
        self.hd = D_MODEL // HEADS
        self.local = local = self.local_heads * self.hd
        self.opts = opts
        if opts.fused_qkv:
            self.qkv_proj = Linear(D_MODEL, 3 * local)
        else:
            self.q_proj = Linear(D_MODEL, local)
            self.k_proj = Linear(D_MODEL, local)
            self.v_proj = Linear(D_MODEL, local)
        self.o_proj = Linear(local, D_MODEL, reduce=world > 1 and opts.attn_allreduce)

    def heads(self, t, b, s):
        return t.view(b, s, self.local_heads, self.hd).transpose(1, 2)

    def forward(self, x):
        b, s, _ = x.shape
        if self.opts.fused_qkv:
            qkv = self.qkv_proj(x).split(self.local, dim=-1)
        else:
            qkv = (p(x) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k, v = (self.heads(t, b, s) for t in qkv)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=self.opts.mask_diagonal)
        o = torch.matmul(torch.softmax(att + mask, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, self.local))


class Mlp(nn.Module):
    def __init__(self, world=1):
        super().__init__()
        self.fc = Linear(D_MODEL, D_FF // world)
        self.proj = Linear(D_FF // world, D_MODEL, reduce=world > 1)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, world=1, opts=Options()):
        super().__init__()
        self.ln_1 = LayerNorm(D_MODEL)
        self.attn = Attention(world, opts)
        self.ln_2 = LayerNorm(D_MODEL)
        self.mlp = Mlp(world)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Stack(nn.Module):
    """`layers` blocks in a row: parameters `blocks.<i>.<module>...`."""

    def __init__(self, layers, world=1, opts=Options()):
        super().__init__()
        self.blocks = nn.ModuleList([Block(world, opts) for _ in range(layers)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def _export(module, path):
    export(module, (torch.randn(2, 5, D_MODEL),), ["x"], ["y"], DYNAMIC, path)


@contextlib.contextmanager
def heads(n):
    """Blocks built inside have `n` heads (of size D_MODEL // n): Attention
    reads HEADS when it is built."""
    global HEADS
    saved, HEADS = HEADS, n
    try:
        yield
    finally:
        HEADS = saved


def generate_worlds(out):
    """generate()'s fused-QKV and stacked layouts on more ranks: fused QKV on
    4 ranks (one head each, reference gpt_fused_ref.onnx), 4 blocks on 4 ranks
    (reference gpt_l4_ref.onnx) and 4 blocks of 8 heads on 8 ranks (their own
    reference gpt8h_l4_ref.onnx). Seeded on a forked RNG: nothing other
    generators draw shifts."""
    with torch.random.fork_rng():
        torch.manual_seed(44)
        for r in range(4):
            _export(Block(4, Options(fused_qkv=True)), f"{out}/gpt_fused_tp4_rank{r}.onnx")
            _export(Stack(4, 4), f"{out}/gpt_l4_tp4_rank{r}.onnx")
        with heads(8):
            _export(Stack(4), f"{out}/gpt8h_l4_ref.onnx")
            for r in range(8):
                _export(Stack(4, 8), f"{out}/gpt8h_l4_tp8_rank{r}.onnx")


def generate(out):
    _export(Block(), f"{out}/gpt_ref.onnx")
    for world in (2, 4):
        for r in range(world):
            _export(Block(world), f"{out}/gpt_tp{world}_rank{r}.onnx")
    # Four blocks deep: every layer must be related, and a spec names the
    # weights of all layers with one pattern each.
    _export(Stack(4), f"{out}/gpt_l4_ref.onnx")
    for r in range(2):
        _export(Stack(4, 2), f"{out}/gpt_l4_tp2_rank{r}.onnx")
    fused = Options(fused_qkv=True)
    _export(Block(1, fused), f"{out}/gpt_fused_ref.onnx")
    for r in range(2):
        # The same rank graphs serve the right weight layout and the wrong one:
        # the specs differ in how the fused weight is distributed.
        _export(Block(2, fused), f"{out}/gpt_fused_tp2_rank{r}.onnx")
        _export(Block(2, Options(attn_allreduce=False)), f"{out}/gpt_no_attn_allreduce_rank{r}.onnx")
        # Rank 1 also masks the diagonal: each query stops attending to itself.
        _export(Block(2, Options(mask_diagonal=0 if r == 1 else 1)), f"{out}/gpt_mask_rank1_rank{r}.onnx")
