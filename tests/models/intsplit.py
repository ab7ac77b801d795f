"""Shard bounds computed from a length passed as data: mlp.py's MLP run
token-parallel on 3 ranks, every rank receiving the whole x and an int64
scalar `seq_len` (the spec binds it with `seq_len: {value: seq}`), cutting
its rows [start, end) with integer `//` and `%` on that tensor, and an
AllGather along the sequence rebuilding y. The reference is mlp_ref.onnx.
torch.onnx.export writes `//` on int64 tensors as ONNX Div (which truncates
toward zero) and `%` as Mod (fmod=0, Python's sign).

- `seqlen_balanced`: numpy.array_split's rows: q = seq_len // 3,
  rem = seq_len % 3, rank r starts at r*q + min(r, rem) and holds
  q + (r < rem) rows. Correct for every seq.
- bug `seqlen_floor`: q = seq_len // 3 rows each from r*q, so the last
  seq % 3 rows are never computed. Correct exactly when 3 divides seq.
"""
import torch
from torch import nn

import mlp
from collectives import all_gather
from export import export

WORLD = 3
NAMES = mlp.NAMES + ["seq_len"]


class SeqLenRows(nn.Module):
    def __init__(self, rank, balanced):
        super().__init__()
        self.mlp = mlp.Mlp()
        self.rank, self.balanced = rank, balanced

    def forward(self, x, w1, b1, w2, b2, seq_len):
        q = seq_len // WORLD
        if self.balanced:
            rem = seq_len % WORLD
            start = self.rank * q + torch.clamp(rem, max=self.rank)
            end = start + q + (rem > self.rank).to(torch.int64)
        else:
            start = self.rank * q
            end = start + q
        y = self.mlp(x[:, start:end], w1, b1, w2, b2)
        return all_gather(y, 1, WORLD)


def generate(out):
    args = mlp._args(16, 16, batch=2, seq=7) + (torch.tensor(7),)
    for r in range(WORLD):
        for name, balanced in (("seqlen_balanced", True), ("seqlen_floor", False)):
            export(SeqLenRows(r, balanced), args, NAMES, ["y"], mlp.DYNAMIC, f"{out}/{name}_rank{r}.onnx")
