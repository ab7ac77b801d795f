"""A Llama-style decoder block (RMSNorm, rotary position embeddings,
grouped-query causal attention, SwiGLU MLP, residuals) as a reference model
and as Megatron tensor-parallel ranks: q/k/v and gate/up column-parallel (each
rank owns whole heads), o_proj and down_proj row-parallel followed by an
all-reduce, RMSNorms replicated. Llama has no biases.

Names follow Hugging Face's LlamaDecoderLayer (input_layernorm,
self_attn.q_proj, mlp.down_proj, ...), so nodes read /self_attn/o_proj/MatMul.
Weights are nn.Parameters, so they are initializers named after the module
path ("self_attn.q_proj.weight"); linear weights are stored [in, out] so the
graph reads them directly.

Rotary tables: the shardproof op table has no Cos/Sin/Range, so the block
takes the rotary cache `cos`, `sin` of shape [max_pos, head_dim] as graph
inputs (as older HF code kept cos_cached/sin_cached) and slices the rows of
its positions, offset .. offset + seq, inside the graph.

GQA with more ranks than kv heads (TP4 with 2 kv heads): vLLM-style kv
replication, rank r needs kv head r * KV_HEADS // P, so two ranks hold the same
kv weights. The spec format only states reference = f(rank tensors), which
cannot say "rank 1 holds a copy of rank 0's shard", so these ranks hold the
whole k/v projections (replicated) and keep their kv head by slicing the
projection's output. (Slicing the weight itself gets constant-folded by the
exporter into an unnamed initializer.)
"""
import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from collectives import all_gather, all_reduce, reduce_scatter
from export import export

D_MODEL, HEADS, KV_HEADS, D_FF = 16, 4, 2, 32
HEAD_DIM = D_MODEL // HEADS
EPS = 1e-6
NAMES = ["x", "cos", "sin"]
DYNAMIC = {"x": {0: "batch", 1: "seq"}, "cos": {0: "max_pos"}, "sin": {0: "max_pos"},
           "y": {0: "batch", 1: "seq"}}


class Linear(nn.Module):
    """x @ weight, no bias; `reduce` all-reduces the product (Megatron's
    RowParallelLinear), or with `scatter` = P > 0 reduce-scatters it along
    the sequence over P ranks (sequence parallelism)."""

    def __init__(self, d_in, d_out, reduce=False, scatter=0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.reduce, self.scatter = reduce, scatter

    def forward(self, x):
        y = torch.matmul(x, self.weight)
        if not self.reduce:
            return y
        return reduce_scatter(y, 1, self.scatter) if self.scatter else all_reduce(y)


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2, -1) + eps) * weight, written out as Llama code does."""

    def __init__(self, d):
        super().__init__()
        # Distinct values: identical initializers get merged by the exporter.
        self.weight = nn.Parameter(torch.empty(d).uniform_(0.5, 1.5))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + EPS))


class Rotary(nn.Module):
    """Rows offset .. offset + seq of the rotary cache (positions start at
    `offset`; 0 for a fresh sequence)."""

    def __init__(self, offset=0):
        super().__init__()
        self.offset = offset

    def forward(self, cos, sin, s):
        return cos[self.offset:self.offset + s], sin[self.offset:self.offset + s]


def rotate_half(x):
    x1, x2 = x[..., :HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(t, cos, sin):
    return t * cos + rotate_half(t) * sin


def repeat_kv(t, n_rep):
    """HF's repeat_kv: [b, kv, s, hd] -> [b, kv * n_rep, s, hd]."""
    if n_rep == 1:
        return t
    b, kv, s, hd = t.shape
    return t[:, :, None, :, :].expand(b, kv, n_rep, s, hd).reshape(b, kv * n_rep, s, hd)


class Attention(nn.Module):
    """Causal grouped-query attention over this rank's HEADS // world query
    heads. kv_head=None: k/v are column-parallel (the rank owns KV_HEADS //
    world kv heads). kv_head=h: k/v projections are whole (replicated) and the
    rank keeps kv head h of their output. `seq_parallel` (Megatron sequence
    parallelism): x holds the rank's rows of the sequence, all-gathered before
    q/k/v; o_proj reduce-scatters along the sequence."""

    def __init__(self, world=1, kv_head=None, rope_offset=0, seq_parallel=False):
        super().__init__()
        self.gather = world if seq_parallel and world > 1 else 0
        self.heads = HEADS // world
        self.kv_head = kv_head
        self.kv_heads = KV_HEADS // world if kv_head is None else 1
        kv_out = (KV_HEADS if kv_head is not None else self.kv_heads) * HEAD_DIM
        self.q_proj = Linear(D_MODEL, self.heads * HEAD_DIM)
        self.k_proj = Linear(D_MODEL, kv_out)
        self.v_proj = Linear(D_MODEL, kv_out)
        self.o_proj = Linear(self.heads * HEAD_DIM, D_MODEL, reduce=world > 1, scatter=self.gather)
        self.rotary_emb = Rotary(rope_offset)

    def split_heads(self, t, b, s, n):
        return t.view(b, s, n, HEAD_DIM).transpose(1, 2)

    def own_kv(self, t):
        if self.kv_head is None:
            return t
        start = self.kv_head * HEAD_DIM
        return t[..., start:start + HEAD_DIM]

    def forward(self, x, cos, sin):
        if self.gather:
            x = all_gather(x, 1, self.gather)
        b, s, _ = x.shape
        q = self.split_heads(self.q_proj(x), b, s, self.heads)
        k = self.split_heads(self.own_kv(self.k_proj(x)), b, s, self.kv_heads)
        v = self.split_heads(self.own_kv(self.v_proj(x)), b, s, self.kv_heads)
        cos, sin = self.rotary_emb(cos, sin, s)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        n_rep = self.heads // self.kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        att = att + torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        o = torch.matmul(torch.softmax(att, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, self.heads * HEAD_DIM))


class Mlp(nn.Module):
    """SwiGLU: down(silu(x @ gate) * (x @ up)); `seq_parallel` as in Attention."""

    def __init__(self, world=1, reduce=None, seq_parallel=False):
        super().__init__()
        if reduce is None:
            reduce = world > 1
        self.gather = world if seq_parallel and world > 1 else 0
        self.gate_proj = Linear(D_MODEL, D_FF // world)
        self.up_proj = Linear(D_MODEL, D_FF // world)
        self.down_proj = Linear(D_FF // world, D_MODEL, reduce=reduce, scatter=self.gather)

    def forward(self, x):
        if self.gather:
            x = all_gather(x, 1, self.gather)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """`seq_parallel`: the residual stream and both RMSNorms on the rank's
    sequence shard (Megatron sequence parallelism)."""

    def __init__(self, world=1, kv_head=None, rope_offset=0, reduce_down=None, seq_parallel=False):
        super().__init__()
        self.input_layernorm = RMSNorm(D_MODEL)
        self.self_attn = Attention(world, kv_head, rope_offset, seq_parallel)
        self.post_attention_layernorm = RMSNorm(D_MODEL)
        self.mlp = Mlp(world, reduce_down, seq_parallel)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Stack(nn.Module):
    """`n` decoder layers in a row sharing the rotary cache, as Hugging Face's
    LlamaModel (parameters `layers.<i>.<module>...`). `buggy_down`: the layer
    whose row-parallel down projection never all-reduces. `kv_head`: as in
    Attention (replicated k/v projections)."""

    def __init__(self, n, world=1, buggy_down=None, kv_head=None):
        super().__init__()
        self.layers = nn.ModuleList(
            [Block(world, kv_head, reduce_down=False if i == buggy_down else None) for i in range(n)])

    def forward(self, x, cos, sin):
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


def kv_head_of(rank, world):
    """The kv head whose query group rank `rank` owns (replicated kv heads)."""
    return rank * KV_HEADS // world


SP_DYNAMIC = dict(DYNAMIC, x={0: "batch", 1: "seq_local"}, y={0: "batch", 1: "seq_local"})


def _export(module, path, seq=5, dynamic=DYNAMIC, max_pos=8):
    args = (torch.randn(2, seq, D_MODEL), torch.randn(max_pos, HEAD_DIM), torch.randn(max_pos, HEAD_DIM))
    export(module, args, NAMES, ["y"], dynamic, path)


class heads(contextlib.ContextDecorator):
    """Temporarily a block with `n` query heads (head size D_MODEL // n; the
    module reads the constants when built and when exported)."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        global HEADS, HEAD_DIM
        self.saved = HEADS, HEAD_DIM
        HEADS, HEAD_DIM = self.n, D_MODEL // self.n

    def __exit__(self, *exc):
        global HEADS, HEAD_DIM
        HEADS, HEAD_DIM = self.saved
        return False


def generate_tp8(out):
    """TP8: a block with 8 query heads of size 2 (D_MODEL 16) and 2 kv heads,
    its own reference llama8h_ref.onnx; one query head per rank, each kv head
    replicated on 4 ranks (whole k/v projections, each rank keeping its kv
    head's columns), D_FF 32 split 4 columns per rank. Seeded on a forked RNG."""
    with torch.random.fork_rng(), heads(8):
        torch.manual_seed(88)
        _export(Block(), f"{out}/llama8h_ref.onnx")
        for r in range(8):
            _export(Block(8, kv_head=kv_head_of(r, 8)), f"{out}/llama8h_tp8_rank{r}.onnx")


def generate(out):
    """Writes every Llama model into directory `out`."""
    _export(Block(), f"{out}/llama_ref.onnx")

    # TP2: each rank owns 2 query heads and exactly one kv head (k/v sharded).
    for r in range(2):
        _export(Block(2), f"{out}/llama_tp2_rank{r}.onnx")
    # TP4: one query head per rank, 2 kv heads: ranks 2h, 2h+1 share kv head h
    # (whole k/v projections on every rank, each keeping its kv head's columns).
    for r in range(4):
        _export(Block(4, kv_head=kv_head_of(r, 4)), f"{out}/llama_tp4_rank{r}.onnx")

    bugs = {
        # Rank 1's positions start at 1: it reads rotary rows 1 .. seq.
        "rope_offset": lambda r: Block(2, rope_offset=1 if r == 1 else 0),
        # Whole k/v projections; the kv head index divides by the number of query
        # heads instead of the world size, so rank 1 of 2 picks kv head 0.
        "gqa_wrong_kv": lambda r: Block(2, kv_head=r * KV_HEADS // HEADS),
        # The row-parallel down projection never all-reduces its partial sums.
        "no_allreduce_down": lambda r: Block(2, reduce_down=False),
    }
    for name, make in bugs.items():
        for r in range(2):
            _export(make(r), f"{out}/llama_{name}_rank{r}.onnx")

    # Three layers under TP2 (GQA: 2 query heads and one kv head per rank); the
    # bug: the last layer's down projection never all-reduces.
    with torch.random.fork_rng():
        torch.manual_seed(33)
        _export(Stack(3), f"{out}/llama_l3_ref.onnx")
        for r in range(2):
            _export(Stack(3, 2), f"{out}/llama_l3_tp2_rank{r}.onnx")
            _export(Stack(3, 2, buggy_down=2), f"{out}/llama_l3_no_allreduce_down2_rank{r}.onnx")


def _kv_head(world):
    """Stack/Block kv_head argument of rank r: column-parallel k/v while every
    rank owns a kv head, else replicated k/v and the rank's kv head."""
    return (lambda r: None) if world <= KV_HEADS else (lambda r: kv_head_of(r, world))


def generate_worlds(out):
    """The three-layer stack on 4 and 8 ranks, and one block under sequence
    plus tensor parallelism on 2, 4 and 8 ranks (llama_sp{P}: x and y sharded
    along the sequence, RMSNorms on the shard, AllGather before q/k/v and
    gate/up, ReduceScatter after o_proj and down_proj; llama8h_sp8 on 8). 8 ranks use 8 query
    heads of size 2 (references llama8h_l3_ref.onnx and llama8h_ref.onnx).
    Seeded on a forked RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(48)
        for world in (4, 8):
            with heads(8 if world == 8 else HEADS):
                kv = _kv_head(world)
                if world == 8:
                    _export(Stack(3), f"{out}/llama8h_l3_ref.onnx")
                name = "llama8h" if world == 8 else "llama"
                for r in range(world):
                    _export(Stack(3, world, kv_head=kv(r)), f"{out}/{name}_l3_tp{world}_rank{r}.onnx")
        for world in (2, 4, 8):
            # The export traces one rank: the gathered sequence is `world` shards of 2 rows.
            with heads(8 if world == 8 else HEADS):
                kv = _kv_head(world)
                for r in range(world):
                    name = "llama8h" if world == 8 else "llama"
                    _export(Block(world, kv(r), seq_parallel=True), f"{out}/{name}_sp{world}_rank{r}.onnx",
                            seq=2, dynamic=SP_DYNAMIC, max_pos=2 * world)
