"""Sequence-parallel prefix sum (CumSum) over 2 ranks: y = x.cumsum(1), x and y
sharded evenly along the sequence. A running sum over a sharded axis needs
what the earlier shards summed to: each rank all-gathers every rank's shard
total and adds those of the ranks before it to its local cumsum (the
`offset` of a sequence-parallel scan or of cumulative positions). The bug
`cumsum_local` cumsums only its own shard, so rank 1 restarts from zero.

`cumsum_gather` is the other correct way: all-gather x, cumsum the whole
sequence, keep the rank's rows.
"""
import os

import torch
from torch import nn

from collectives import all_gather
from export import export

WORLD = 2
DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
LOCAL = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_local"}}


class Reference(nn.Module):
    def forward(self, x):
        return x.cumsum(1)


class Offset(nn.Module):
    """Local cumsum plus the totals of the lower ranks' shards."""

    def __init__(self, rank):
        super().__init__()
        self.rank = rank

    def forward(self, x):
        totals = all_gather(x.sum(1, keepdim=True), 1, WORLD)  # [batch, WORLD, d]
        return x.cumsum(1) + totals[:, :self.rank].sum(1, keepdim=True)


class Local(nn.Module):
    """The bug: each shard's own prefix sum, no offset."""

    def forward(self, x):
        return x.cumsum(1)


class Gathered(nn.Module):
    """The whole sequence gathered, scanned, and the rank's rows kept."""

    def __init__(self, rank):
        super().__init__()
        self.rank = rank

    def forward(self, x):
        n = x.shape[1]
        return all_gather(x, 1, WORLD).cumsum(1)[:, self.rank * n:(self.rank + 1) * n]


def generate(out):
    x = torch.randn(2, 8, 4)
    export(Reference(), (x,), ["x"], ["y"], DYNAMIC, os.path.join(out, "cumsum_ref.onnx"))
    for r in range(WORLD):
        xl = x[:, r * 4:(r + 1) * 4]
        export(Offset(r), (xl,), ["x"], ["y"], LOCAL, os.path.join(out, f"cumsum_rank{r}.onnx"))
        export(Local(), (xl,), ["x"], ["y"], LOCAL, os.path.join(out, f"cumsum_local_rank{r}.onnx"))
        export(Gathered(r), (xl,), ["x"], ["y"], LOCAL, os.path.join(out, f"cumsum_gather_rank{r}.onnx"))


if __name__ == "__main__":
    generate(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "specs", "examples"))
