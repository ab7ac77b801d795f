"""Llama blocks whose rotary tables are computed inside the graph, as current
Hugging Face code does (LlamaRotaryEmbedding): positions from arange (ONNX
Range), `freqs = (inv_freq[:, None] @ positions[None, :]).T`,
`emb = cat(freqs, freqs)`, then Cos and Sin. inv_freq = 1 / base^(2i /
head_dim) is a buffer (an initializer named rotary_emb.inv_freq in every graph,
stored as a column [head_dim / 2, 1]).

Two distributions:
- Tensor parallelism (rope_tp2): llama.py's block with the in-graph tables;
  every rank computes positions 0 .. seq - 1.
- Sequence (context) parallelism of the attention (rope_sp2): rank r holds rows
  r*seq_local .. (r+1)*seq_local - 1 of x, projects them with the whole
  (replicated) q/k/v weights, applies the rotary tables of ITS positions
  (arange(r * seq_local, (r + 1) * seq_local)), all-gathers k and v along the sequence
  (all-gather context parallelism, as Llama 3 training does) and attends its
  query rows to every key with the causal mask of those global positions
  (written arange(seq_local) + r * seq_local, the other common form).
  o_proj is replicated; the output stays sharded along the sequence.

Bug: rope_sp_no_offset, rank 1 builds positions 0 .. seq_local - 1 (it forgot
its shard start) for the rotary tables; its causal mask still uses the right
positions, so only the rotary module is wrong.

Shifted positions (rope_shift_tp2): a tensor-parallel attention (heads split
over 2 ranks) whose rank r rotates BOTH q and k by the angles of positions
shifted by 7 * (r + 1) (a position base carried over from elsewhere). Rotary
scores depend only on the difference of the two positions,
cos(a)cos(b) + sin(a)sin(b) = cos(a - b), so the attention is unchanged.
Bug: rope_shift_q_only, the ranks shift only the queries' positions.
"""
import math

import torch
from torch import nn

import llama
from collectives import all_gather
from export import export

D_MODEL = llama.D_MODEL
BASE = 10000.0


class InGraphRotary(nn.Module):
    """cos, sin [s, head_dim] of positions offset .. offset + s - 1."""

    def __init__(self, head_dim):
        super().__init__()
        inv = 1.0 / BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        # Kept as a column [head_dim / 2, 1] (Hugging Face's inv_freq[:, None]):
        # the exporter folds an unsqueeze of a buffer into an unnamed initializer.
        self.register_buffer("inv_freq", inv[:, None].contiguous())

    def positions(self, s, offset):
        # Hugging Face's cache_position: arange(past, past + seq).
        return torch.arange(offset, offset + s)

    def forward(self, s, offset):
        # Hugging Face's form: inv_freq[:, None] @ positions[None, :], transposed.
        pos = self.positions(s, offset).float()
        freqs = torch.matmul(self.inv_freq, pos[None, :]).transpose(0, 1)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class TpAttention(llama.Attention):
    """llama.Attention (tensor parallel over heads, `kv_head` as there) with
    in-graph rotary tables."""

    def __init__(self, world=1, kv_head=None):
        super().__init__(world, kv_head)
        self.rotary_emb = InGraphRotary(llama.HEAD_DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.split_heads(self.q_proj(x), b, s, self.heads)
        k = self.split_heads(self.own_kv(self.k_proj(x)), b, s, self.kv_heads)
        v = self.split_heads(self.own_kv(self.v_proj(x)), b, s, self.kv_heads)
        cos, sin = self.rotary_emb(s, 0)
        q, k = llama.apply_rotary(q, cos, sin), llama.apply_rotary(k, cos, sin)
        n_rep = self.heads // self.kv_heads
        k, v = llama.repeat_kv(k, n_rep), llama.repeat_kv(v, n_rep)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(llama.HEAD_DIM)
        att = att + torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        o = torch.matmul(torch.softmax(att, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, self.heads * llama.HEAD_DIM))


class ShiftedTpAttention(TpAttention):
    """TpAttention whose queries are rotated by positions q_shift .. q_shift +
    s - 1 and keys by k_shift .. k_shift + s - 1 (a single rotary module)."""

    def __init__(self, world, q_shift, k_shift):
        super().__init__(world)
        self.q_shift, self.k_shift = q_shift, k_shift

    def forward(self, x):
        b, s, _ = x.shape
        q = self.split_heads(self.q_proj(x), b, s, self.heads)
        k = self.split_heads(self.k_proj(x), b, s, self.kv_heads)
        v = self.split_heads(self.v_proj(x), b, s, self.kv_heads)
        q_cos, q_sin = self.rotary_emb(s, self.q_shift)
        k_cos, k_sin = self.rotary_emb(s, self.k_shift)
        q, k = llama.apply_rotary(q, q_cos, q_sin), llama.apply_rotary(k, k_cos, k_sin)
        n_rep = self.heads // self.kv_heads
        k, v = llama.repeat_kv(k, n_rep), llama.repeat_kv(v, n_rep)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(llama.HEAD_DIM)
        att = att + torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        o = torch.matmul(torch.softmax(att, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, self.heads * llama.HEAD_DIM))


class TpBlock(llama.Block):
    def __init__(self, world=1, kv_head=None):
        super().__init__(world, kv_head)
        self.self_attn = TpAttention(world, kv_head)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class SpAttention(nn.Module):
    """Causal GQA attention over the rank's rows of the sequence, keys and
    values all-gathered. world=1 is the reference (all rows, positions from
    0). `rope_offset_ok=False`: the rank builds its rotary positions from 0."""

    def __init__(self, world=1, rank=0, rope_offset_ok=True):
        super().__init__()
        hd = llama.HEAD_DIM
        self.world, self.rank, self.rope_offset_ok = world, rank, rope_offset_ok
        self.q_proj = llama.Linear(D_MODEL, llama.HEADS * hd)
        self.k_proj = llama.Linear(D_MODEL, llama.KV_HEADS * hd)
        self.v_proj = llama.Linear(D_MODEL, llama.KV_HEADS * hd)
        self.o_proj = llama.Linear(llama.HEADS * hd, D_MODEL)
        self.rotary_emb = InGraphRotary(hd)

    def split_heads(self, t, b, s, n):
        return t.view(b, s, n, llama.HEAD_DIM).transpose(1, 2)

    def forward(self, x):
        b, s, _ = x.shape
        start = self.rank * s
        q = self.split_heads(self.q_proj(x), b, s, llama.HEADS)
        k = self.split_heads(self.k_proj(x), b, s, llama.KV_HEADS)
        v = self.split_heads(self.v_proj(x), b, s, llama.KV_HEADS)
        cos, sin = self.rotary_emb(s, start if self.rope_offset_ok else 0)
        q, k = llama.apply_rotary(q, cos, sin), llama.apply_rotary(k, cos, sin)
        if self.world > 1:
            k, v = all_gather(k, 2, self.world), all_gather(v, 2, self.world)
        n_rep = llama.HEADS // llama.KV_HEADS
        k, v = llama.repeat_kv(k, n_rep), llama.repeat_kv(v, n_rep)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(llama.HEAD_DIM)
        q_pos = torch.arange(s) + start  # the other common way to write offset positions
        k_pos = torch.arange(k.shape[2])
        att = att.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
        o = torch.matmul(torch.softmax(att, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, llama.HEADS * llama.HEAD_DIM))


def _export(module, path, seq):
    export(module, (torch.randn(2, 4, D_MODEL),), ["x"], ["y"],
           {"x": {0: "batch", 1: seq}, "y": {0: "batch", 1: seq}}, path)


def generate(out):
    """Writes every in-graph rotary model into directory `out`."""
    with torch.random.fork_rng():
        torch.manual_seed(7)
        _export(TpBlock(), f"{out}/rope_ref.onnx", "seq")
        for r in range(2):
            _export(TpBlock(2), f"{out}/rope_tp2_rank{r}.onnx", "seq")
        _export(SpAttention(), f"{out}/rope_attn_ref.onnx", "seq")
        for r in range(2):
            _export(SpAttention(2, r), f"{out}/rope_sp2_rank{r}.onnx", "seq_local")
            _export(SpAttention(2, r, rope_offset_ok=r != 1), f"{out}/rope_sp_no_offset_rank{r}.onnx",
                    "seq_local")


def generate_shifted(out):
    """rope_shift_tp2 (q and k shifted alike on each rank) and
    rope_shift_q_only (only q shifted), against rope_shift_ref.onnx. Seeded
    on a forked RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(17)
        _export(TpAttention(), f"{out}/rope_shift_ref.onnx", "seq")
        for r in range(2):
            shift = 7 * (r + 1)
            _export(ShiftedTpAttention(2, shift, shift), f"{out}/rope_shift_tp2_rank{r}.onnx", "seq")
            _export(ShiftedTpAttention(2, shift, 0), f"{out}/rope_shift_q_only_rank{r}.onnx", "seq")


def generate_worlds(out):
    """rope_tp2 and rope_sp2 on 4 and 8 ranks: TP4 one query head per rank,
    each of the 2 kv heads on 2 ranks (replicated k/v projections, as
    llama_tp4); TP8 a block of 8 query heads of size 2 (its own reference
    rope8h_ref.onnx); context parallelism on 4 and 8 ranks against
    rope_attn_ref.onnx. Seeded on a forked RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(77)
        for r in range(4):
            _export(TpBlock(4, llama.kv_head_of(r, 4)), f"{out}/rope_tp4_rank{r}.onnx", "seq")
        with llama.heads(8):
            _export(TpBlock(), f"{out}/rope8h_ref.onnx", "seq")
            for r in range(8):
                _export(TpBlock(8, llama.kv_head_of(r, 8)), f"{out}/rope8h_tp8_rank{r}.onnx", "seq")
        for world in (4, 8):
            for r in range(world):
                _export(SpAttention(world, r), f"{out}/rope_sp{world}_rank{r}.onnx", "seq_local")
