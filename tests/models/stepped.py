"""Stepped slices (issue 14): sequence parallelism over 2 ranks of a layer
that keeps every other token, y = 2 * x[:, ::2] (a strided downsample as in
funnel/pooling transformers). x is sharded evenly along the sequence and so
is y. Each rank keeping x_local[:, ::2] is right when every shard starts on
an even token (seq % 4 == 0); the bug `strided_odd` keeps x_local[:, 1::2],
the other phase, so every rank returns the tokens the reference drops.
"""
import os

import torch
from torch import nn

from export import export

DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq_half"}}
LOCAL = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_local_half"}}


class EveryOther(nn.Module):
    def __init__(self, phase):
        super().__init__()
        self.phase = phase

    def forward(self, x):
        return 2 * x[:, self.phase::2]


def generate(out):
    x = torch.randn(2, 8, 8)
    export(EveryOther(0), (x,), ["x"], ["y"], DYNAMIC, os.path.join(out, "strided_ref.onnx"))
    for name, phase in (("strided", 0), ("strided_odd", 1)):
        for r in range(2):
            export(EveryOther(phase), (x[:, :4],), ["x"], ["y"], LOCAL,
                   os.path.join(out, f"{name}_rank{r}.onnx"))
