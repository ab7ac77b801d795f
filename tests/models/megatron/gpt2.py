"""A GPT-2 block, Megatron-style (sequence-first [s, b, h], fused QKV laid out
per head as Megatron does, tanh-GELU MLP), as a plain reference and as a
tensor-parallel implementation built from tensor_parallel.py, with and without
sequence parallelism. Parameters have the same names on both sides
(`attention.query_key_value.weight`, ...); the rank holds its shard.

Factories for `shardproof.torch export FILE.py:FACTORY --world-size P`:
  gpt2_tp                 tensor parallel                      VERIFIED
  gpt2_sp                 tensor + sequence parallel           VERIFIED
  gpt2_tp_missing_g       RowParallelLinear without its g      REFUTED
  gpt2_tp_wrong_scale     softmax scaled by the rank's width    REFUTED (only where
                          instead of the head dim               seq >= 2)
  gpt2_sp_batch_first     batch-first activations through the  REFUTED
                          sequence-first SP regions (all-gather
                          and reduce-scatter on the batch axis)
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

import tensor_parallel as tp
from shardproof.torch import Case

HIDDEN, HEADS, FFN = 16, 4, 64


class Attention(nn.Module):
    def __init__(self, parallel, sequence_parallel=False, batch_first=False):
        super().__init__()
        self.batch_first = batch_first
        self.hn = HIDDEN // HEADS
        if parallel:
            self.np = HEADS // tp.get_tensor_model_parallel_world_size()
            self.query_key_value = tp.ColumnParallelLinear(HIDDEN, 3 * HIDDEN, sequence_parallel=sequence_parallel)
            self.dense = tp.RowParallelLinear(HIDDEN, HIDDEN, sequence_parallel=sequence_parallel)
        else:
            self.np = HEADS
            self.query_key_value = nn.Linear(HIDDEN, 3 * HIDDEN)
            self.dense = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        qkv = self.query_key_value(x)                       # [s, b, np * 3 * hn]
        a, c = qkv.size(0), qkv.size(1)                     # (s, b), or (b, s) batch-first
        qkv = qkv.view(a, c, self.np, 3 * self.hn)
        q, k, v = torch.split(qkv, self.hn, dim=-1)         # each [s, b, np, hn]
        to_heads = (0, 2, 1, 3) if self.batch_first else (1, 2, 0, 3)
        q, k, v = (t.permute(*to_heads) for t in (q, k, v))  # [b, np, s, hn]
        s = q.size(2)
        # Megatron's norm factor is sqrt(head dim); the bug divides by the
        # square root of the rank's whole projection width (np * hn).
        norm = self.np * self.hn if "softmax_scale_per_partition" in tp.BUGS else self.hn
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(norm)
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        probs = torch.softmax(scores + mask, dim=-1)
        from_heads = (0, 2, 1, 3) if self.batch_first else (2, 0, 1, 3)
        ctx = torch.matmul(probs, v).permute(*from_heads)   # back to [s, b, np, hn] (or [b, s, ...])
        return self.dense(ctx.reshape(a, c, self.np * self.hn))


class Mlp(nn.Module):
    def __init__(self, parallel, sequence_parallel=False):
        super().__init__()
        if parallel:
            self.dense_h_to_4h = tp.ColumnParallelLinear(HIDDEN, FFN, sequence_parallel=sequence_parallel)
            self.dense_4h_to_h = tp.RowParallelLinear(FFN, HIDDEN, sequence_parallel=sequence_parallel)
        else:
            self.dense_h_to_4h = nn.Linear(HIDDEN, FFN)
            self.dense_4h_to_h = nn.Linear(FFN, HIDDEN)

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, parallel=False, sequence_parallel=False, batch_first=False):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.attention = Attention(parallel, sequence_parallel, batch_first)
        self.post_attention_layernorm = nn.LayerNorm(HIDDEN)
        self.mlp = Mlp(parallel, sequence_parallel)

    def forward(self, x):
        x = x + self.attention(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


def _case(sequence_parallel=False, bugs=(), batch_first=False):
    seq_axis = 1 if batch_first else 0

    def inputs(sizes):
        shape = (sizes["batch"], sizes["seq"]) if batch_first else (sizes["seq"], sizes["batch"])
        return {"x": torch.randn(*shape, HIDDEN)}

    def reference():
        return Block(batch_first=batch_first)

    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return Block(parallel=True, sequence_parallel=sequence_parallel, batch_first=batch_first)

    axes = {seq_axis: "seq", 1 - seq_axis: "batch"}
    dynamic = {"x": axes, "y": axes}
    if not sequence_parallel:
        return Case(reference=reference, implementation=implementation, inputs=inputs, dynamic=dynamic)

    def rank_inputs(sizes, rank, world):
        return {"x": torch.chunk(inputs(sizes)["x"], world, dim=seq_axis)[rank]}

    local = {seq_axis: "seq_local", 1 - seq_axis: "batch"}
    return Case(reference=reference, implementation=implementation, inputs=inputs, rank_inputs=rank_inputs,
                dynamic=dynamic, rank_dynamic={"x": local, "y": local})


def gpt2_tp():
    return _case()


def gpt2_sp():
    return _case(sequence_parallel=True)


def gpt2_tp_missing_g():
    return _case(bugs={"row_parallel_missing_g"})


def gpt2_tp_wrong_scale():
    return _case(bugs={"softmax_scale_per_partition"})


def gpt2_sp_batch_first():
    return _case(sequence_parallel=True, batch_first=True)
