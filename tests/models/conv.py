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
    world 1 is the reference; otherwise rank `rank` of `world`, gathering the
    sequence first (halo=True) or convolving its shard alone (the bug)."""

    def __init__(self, world=1, rank=0, halo=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(D, D, 3))
        self.bias = nn.Parameter(torch.randn(D))
        self.world, self.rank, self.halo = world, rank, halo

    def conv(self, x):
        return F.conv1d(x.transpose(1, 2), self.weight, self.bias, padding=1).transpose(1, 2)

    def forward(self, x):
        if self.world == 1 or not self.halo:
            return self.conv(x)
        n = x.shape[1]
        y = self.conv(all_gather(x, 1, self.world))
        return y[:, self.rank * n:(self.rank + 1) * n]


def generate(out):
    with torch.random.fork_rng():
        torch.manual_seed(5)
        x = torch.randn(2, 8, D)
        ref = SeqConv()
        export(ref, (x,), ["x"], ["y"], DYNAMIC, os.path.join(out, "conv_ref.onnx"))
        for name, halo in (("conv_sp2", True), ("conv_nohalo_sp2", False)):
            for r in range(WORLD):
                m = SeqConv(WORLD, r, halo)
                m.load_state_dict(ref.state_dict())
                export(m, (x[:, :4],), ["x"], ["y"], LOCAL, os.path.join(out, f"{name}_rank{r}.onnx"))
