"""A "same"-padded 1-D convolution over the sequence axis (kernel 3, as in a
Conformer/Mamba-style token mixer) under sequence parallelism on 2 ranks:
x[batch, seq, D] is sharded evenly along the sequence and so is y.

y[:, s] depends on x[:, s - 1 .. s + 1], so a rank's first and last output
rows need a row of its neighbours' shards. The right ranks (`conv_sp2`)
all-gather the sequence, convolve the whole of it and keep their own rows;
the bug (`conv_nohalo_sp2`) convolves only the local shard with the same zero
padding, so the rows at every shard boundary see zeros where the reference
sees the neighbour's tokens.
"""
import os

import torch
import torch.nn.functional as F
from torch import nn

from collectives import all_gather
from export import export

D = 8
WORLD = 2
DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
LOCAL = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_local"}}


class SeqConv(nn.Module):
    """y = conv1d over the sequence of x (channels last), kernel 3, padding 1.
    world 1 is the reference; otherwise rank `rank` of `world` under `mode`:
    "gather" (all-gather the sequence, convolve it whole, keep the rank's
    rows), "halo" (exchange one boundary row with each neighbour, convolve the
    haloed shard unpadded), "halo_swapped" (the bug of taking the neighbours'
    far rows: the next rank's last row and the previous rank's first) or
    "local" (the bug of convolving the shard alone with zero padding)."""

    def __init__(self, world=1, rank=0, mode="gather"):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(D, D, 3))
        self.bias = nn.Parameter(torch.randn(D))
        self.world, self.rank, self.mode = world, rank, mode

    def conv(self, x, padding=1):
        return F.conv1d(x.transpose(1, 2), self.weight, self.bias, padding=padding).transpose(1, 2)

    def forward(self, x):
        if self.world == 1 or self.mode == "local":
            return self.conv(x)
        if self.mode == "gather":
            n = x.shape[1]
            y = self.conv(all_gather(x, 1, self.world))
            return y[:, self.rank * n:(self.rank + 1) * n]
        # One all-gather of every rank's first and last rows, [batch, 2 * world, D]:
        # rank j's first row at 2j, its last at 2j + 1. (Two all-gathers, one of
        # first rows and one of last rows, each used by only some ranks, would be
        # dropped from the ranks that do not use them and pair up wrongly.)
        ends = all_gather(torch.cat([x[:, :1], x[:, -1:]], 1), 1, self.world)
        r = self.rank
        prev_row, next_row = 2 * (r - 1) + 1, 2 * (r + 1)
        if self.mode == "halo_swapped":
            prev_row, next_row = prev_row - 1, next_row + 1
        parts = [x]
        if r > 0:
            parts.insert(0, ends[:, prev_row:prev_row + 1])
        if r + 1 < self.world:
            parts.append(ends[:, next_row:next_row + 1])
        xp = torch.cat(parts, 1)
        # The sequence's own ends are zero-padded, as in the reference.
        xp = F.pad(xp, (0, 0, 1 if r == 0 else 0, 1 if r + 1 == self.world else 0))
        return self.conv(xp, padding=0)


def generate(out):
    with torch.random.fork_rng():
        torch.manual_seed(5)
        x = torch.randn(2, 8, D)
        ref = SeqConv()
        export(ref, (x,), ["x"], ["y"], DYNAMIC, os.path.join(out, "conv_ref.onnx"))
        for name, mode in (("conv_sp2", "gather"), ("conv_nohalo_sp2", "local"), ("conv_halo_sp2", "halo"),
                           ("conv_halo_swapped_sp2", "halo_swapped")):
            for r in range(WORLD):
                m = SeqConv(WORLD, r, mode)
                m.load_state_dict(ref.state_dict())
                export(m, (x[:, :4],), ["x"], ["y"], LOCAL, os.path.join(out, f"{name}_rank{r}.onnx"))
