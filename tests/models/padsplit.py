"""Pad (issue 14) under sequence parallelism on 2 ranks: the reference pads
the sequence with 2 zero rows at its end, y = F.pad(x, (0, 0, 0, 2)) (as a
model padding to a fixed block). x is sharded evenly along the sequence and y
is rebuilt from the ranks' rows: rank 0 returns its rows as they are, the last
rank pads its own shard at the end. The bug `padsplit_front` has the last rank
pad at the front (F.pad(x, (0, 0, 2, 0))), so the zeros land mid-sequence.
"""
import os

import torch
import torch.nn.functional as F
from torch import nn

from export import export

REF = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq_padded"}}
LOCAL = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_out"}}


class PadSeq(nn.Module):
    def __init__(self, before, after):
        super().__init__()
        self.pads = (0, 0, before, after)

    def forward(self, x):
        return F.pad(x, self.pads) * 2


def generate(out):
    x = torch.randn(2, 8, 8)
    export(PadSeq(0, 2), (x,), ["x"], ["y"], REF, os.path.join(out, "padsplit_ref.onnx"))
    export(PadSeq(0, 0), (x[:, :4],), ["x"], ["y"], LOCAL, os.path.join(out, "padsplit_rank0.onnx"))
    export(PadSeq(0, 2), (x[:, :4],), ["x"], ["y"], LOCAL, os.path.join(out, "padsplit_rank1.onnx"))
    export(PadSeq(2, 0), (x[:, :4],), ["x"], ["y"], LOCAL, os.path.join(out, "padsplit_front_rank1.onnx"))
