"""Token downsampling as in the Funnel Transformer: pool every two adjacent
tokens into one (kernel 2, stride 2, over the sequence, channels last), then
a Linear with a replicated weight. Sequence parallelism on 2 ranks: x[batch,
seq, D] is sharded evenly along the sequence and y along its halved sequence.

Each rank pools its own shard, which is right when every shard holds whole
windows, i.e. an even number of tokens (seq % 4 == 0). The same ranks under
seq % 2 == 0 only are the bug: at seq = 6 each rank holds 3 tokens, the
window (x[2], x[3]) straddles the shard boundary and each rank drops its
odd last token, so the ranks' 1 + 1 rows no longer rebuild the reference's
3. `avg` pools with F.avg_pool1d, `max` with F.max_pool1d.
"""
import os

import torch
import torch.nn.functional as F
from torch import nn

from export import export

D = 8
WORLD = 2
DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq_half"}}
LOCAL = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_local_half"}}


class PoolProject(nn.Module):
    """y = pool(x over the sequence, kernel 2, stride 2) @ weight + bias, the
    Linear written out; the same graph is the reference and every rank (a rank
    pools its own shard)."""

    def __init__(self, kind="avg"):
        super().__init__()
        # Named so the spec can call them replicated (an nn.Linear's weight
        # exports as a folded, anonymous transpose).
        self.weight = nn.Parameter(torch.randn(D, D))
        self.bias = nn.Parameter(torch.randn(D))
        self.kind = kind

    def forward(self, x):
        pool = F.avg_pool1d if self.kind == "avg" else F.max_pool1d
        h = pool(x.transpose(1, 2), kernel_size=2, stride=2).transpose(1, 2)
        return h @ self.weight + self.bias


def generate(out):
    with torch.random.fork_rng():
        torch.manual_seed(7)
        x = torch.randn(2, 8, D)
        for kind, name in (("avg", "pool"), ("max", "maxpool")):
            m = PoolProject(kind)
            export(m, (x,), ["x"], ["y"], DYNAMIC, os.path.join(out, f"{name}_ref.onnx"))
            # The ranks run the reference graph on their shard; the bug is in the
            # spec's admitted lengths, not in the graph, so both specs share them.
            for r in range(WORLD):
                export(m, (x[:, :4],), ["x"], ["y"], LOCAL, os.path.join(out, f"{name}_rank{r}.onnx"))
