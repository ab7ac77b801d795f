"""Multi-query attention (one K/V head shared by every query head, as in
StarCoder / bigcode's Megatron-LM), Megatron-style and sequence-first
[s, b, h]. Under tensor parallelism the query heads are split across the
ranks (a column-parallel projection) and the single K/V projection is
replicated: every rank applies it to the same input, but its output feeds
only that rank's query heads, so each rank's K/V gradient is the part of its
own heads. The ranks' copies stay equal only if those gradients are summed
across the tensor-parallel group after the backward pass (bigcode
Megatron-LM #35), which `allreduce_replicated_kv_grads` does.

Used by training.py (`mqa_tp`, `mqa_tp_kv_grad_unsynced`).
"""
import math

import torch
from torch import nn

import tensor_parallel as tp

HIDDEN, HEADS = 16, 4
HEAD_DIM = HIDDEN // HEADS


class MultiQueryAttention(nn.Module):
    def __init__(self, parallel=False):
        super().__init__()
        self.parallel = parallel
        if parallel:
            self.np = HEADS // tp.get_tensor_model_parallel_world_size()
            self.query = tp.ColumnParallelLinear(HIDDEN, HIDDEN)
            self.dense = tp.RowParallelLinear(HIDDEN, HIDDEN)
        else:
            self.np = HEADS
            self.query = nn.Linear(HIDDEN, HIDDEN)
            self.dense = nn.Linear(HIDDEN, HIDDEN)
        # One K and one V head, whole on every rank.
        self.key_value = nn.Linear(HIDDEN, 2 * HEAD_DIM)
        if parallel:
            for p in self.key_value.parameters():
                p.replicated_in_tp_region = True  # its gradient is partial per rank

    def forward(self, x):
        if self.parallel:
            # The query projection and K/V read the same copy of x, so f's
            # backward sums both parts of x's gradient across the ranks.
            x = tp.copy_to_tensor_model_parallel_region(x)
            q = torch.nn.functional.linear(x, self.query.weight, self.query.bias)
        else:
            q = self.query(x)
        s, b = q.size(0), q.size(1)
        q = q.view(s, b, self.np, HEAD_DIM).permute(1, 2, 0, 3)          # [b, np, s, hn]
        k, v = torch.split(self.key_value(x), HEAD_DIM, dim=-1)          # each [s, b, hn]
        k = k.permute(1, 0, 2).unsqueeze(1)                               # [b, 1, s, hn]
        v = v.permute(1, 0, 2).unsqueeze(1)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)  # K broadcast over the heads
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        probs = torch.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(2, 0, 1, 3)                  # [s, b, np, hn]
        return self.dense(ctx.reshape(s, b, self.np * HEAD_DIM))


class Block(nn.Module):
    """LayerNorm and multi-query attention with a residual."""

    def __init__(self, parallel=False):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.attention = MultiQueryAttention(parallel)

    def forward(self, x):
        return x + self.attention(self.input_layernorm(x))


def allreduce_replicated_kv_grads(module):
    """After backward: sum the K/V gradients, each rank's being its heads' part."""
    if "mqa_kv_grad_unsynced" in tp.BUGS:
        return
    for p in module.parameters():
        if getattr(p, "replicated_in_tp_region", False) and p.grad is not None:
            torch.distributed.all_reduce(p.grad, group=tp.get_tensor_model_parallel_group())
