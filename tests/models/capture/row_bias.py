"""aliases.py's tensor-parallel MLP with the row-parallel bias added before
the all-reduce, as DTensor's RowwiseParallel does when a replicated bias
meets a partial sum: each rank adds its 1/P share. VARIANT picks the share;
each comment says whether the program is correct.
"""
import torch
import torch.distributed as dist

from shardproof.capture import Case

import aliases

VARIANT = ["share"]


class RowParallelLinear(aliases.RowParallelLinear):
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


class Parallel(aliases.Parallel):
    def __init__(self):
        super().__init__()
        self.fc2 = RowParallelLinear(aliases.FFN, aliases.HIDDEN)


def case(variant="share"):
    def implementation():
        VARIANT[0] = variant
        return Parallel()

    return Case(reference=aliases.Reference, implementation=implementation,
                inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], aliases.HIDDEN)},
                dynamic={"x": {0: "batch", 1: "seq"}})
