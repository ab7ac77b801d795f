"""Cross-attention (queries from x [b, tgt, h], keys and values from memory
[b, src, h]) with heads split over the ranks, Megatron-style, against a plain
reference. Three sizes, so a bug that needs src >= 2 to show (a softmax over
one key is 1 whatever its scale) is found only if the witness search looks
past the smallest sizes.

Factories (`--world-size 2`):
  cross_tp               VERIFIED
  cross_tp_wrong_scale   scores divided by sqrt(rank width), not sqrt(head dim): REFUTED, at src >= 2
"""
import math

import torch
from torch import nn

import tensor_parallel as tp
from shardproof.torch import Case

HIDDEN, HEADS = 8, 4
HEAD_DIM = HIDDEN // HEADS


class CrossAttention(nn.Module):
    def __init__(self, parallel=False):
        super().__init__()
        world = tp.get_tensor_model_parallel_world_size() if parallel else 1
        self.np = HEADS // world
        if parallel:
            self.query = tp.ColumnParallelLinear(HIDDEN, HIDDEN, bias=False)
            self.key_value = tp.ColumnParallelLinear(HIDDEN, 2 * HIDDEN, bias=False)
            self.dense = tp.RowParallelLinear(HIDDEN, HIDDEN, bias=False)
        else:
            self.query = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.key_value = nn.Linear(HIDDEN, 2 * HIDDEN, bias=False)
            self.dense = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x, memory):
        b, t, s = x.size(0), x.size(1), memory.size(1)
        q = self.query(x).view(b, t, self.np, HEAD_DIM).transpose(1, 2)
        kv = self.key_value(memory).view(b, s, self.np, 2 * HEAD_DIM)
        k, v = torch.split(kv, HEAD_DIM, dim=-1)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        norm = self.np * HEAD_DIM if "softmax_scale_per_partition" in tp.BUGS else HEAD_DIM
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(norm), dim=-1)
        return self.dense(torch.matmul(probs, v).transpose(1, 2).reshape(b, t, self.np * HEAD_DIM))


def _case(bugs=()):
    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return CrossAttention(parallel=True)

    return Case(reference=CrossAttention, implementation=implementation,
                inputs=lambda s: {"x": torch.randn(s["batch"], s["tgt"], HIDDEN),
                                  "memory": torch.randn(s["batch"], s["src"], HIDDEN)},
                dynamic={"x": {0: "batch", 1: "tgt"}, "memory": {0: "batch", 1: "src"}, "y": {0: "batch", 1: "tgt"}})


def cross_tp():
    return _case()


def cross_tp_wrong_scale():
    return _case(bugs={"softmax_scale_per_partition"})
