"""A row-parallel linear whose bias is added before the all-reduce, as
DTensor's RowwiseParallel does when a replicated bias meets a partial sum:
each rank adds its 1/P share. VARIANT picks the share; each comment says
whether the program is correct.
"""
import torch
import torch.distributed as dist
from torch import nn

from shardproof.capture import Case

VARIANT = ["share"]
HIDDEN, FFN = 8, 16


class Reference(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(HIDDEN, FFN)
        self.down = nn.Linear(FFN, HIDDEN)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class RowParallelLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in // dist.get_world_size()))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        p = dist.get_world_size()
        if VARIANT[0] == "share":  # correct: P shares of b / P sum to b
            y = x @ self.weight.t() + self.bias / p
        elif VARIANT[0] == "scaled":  # correct: the same share, written as a product
            y = x @ self.weight.t() + self.bias * (1.0 / p)
        elif VARIANT[0] == "whole":  # bug: every rank adds b, the sum holds P * b
            y = x @ self.weight.t() + self.bias
        elif VARIANT[0] == "rank0":  # correct: only rank 0 adds b
            y = x @ self.weight.t() + (self.bias if dist.get_rank() == 0 else 0)
        else:
            raise ValueError(VARIANT[0])
        dist.all_reduce(y)
        return y


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(HIDDEN, FFN // dist.get_world_size())
        self.down = RowParallelLinear(FFN, HIDDEN)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def case(variant="share"):
    def implementation():
        VARIANT[0] = variant
        return Parallel()

    return Case(reference=Reference, implementation=implementation,
                inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], HIDDEN)},
                dynamic={"x": {0: "batch", 1: "seq"}})
