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

Block-local attention with integer `//` and `%` on positions (`blockattn_*`,
world size 1): single-head attention (d = 8) where a query sees only the keys
of its block of 4 positions, block(t) = t // 4. The reference runs on exactly
`seq` rows; the implementation on a batch padded to `padded` rows with the
true length as data (`seq_len`) and a key mask arange(padded) < seq_len too.
- `blockattn_ok`: correct for every padded >= seq.
- bug `blockattn_mod`: the block id taken as t % 4 (the offset inside the
  block, the `idx // heads` vs `idx % heads` confusion): strided instead of
  local attention, wrong from seq = 2.
"""
import math

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


D_ATTN, BLOCK = 8, 4


class BlockAttention(nn.Module):
    def __init__(self, padded, mod_bug=False):
        super().__init__()
        self.padded, self.mod_bug = padded, mod_bug

    def forward(self, x, wq, wk, wv, seq_len=None):
        pos = torch.arange(x.shape[1])
        s = (x @ wq) @ (x @ wk).transpose(1, 2) / math.sqrt(D_ATTN)
        block = pos % BLOCK if self.mod_bug else pos // BLOCK
        s = s.masked_fill(block[:, None] != block[None, :], float("-inf"))
        if self.padded:
            s = s.masked_fill(~(pos < seq_len), float("-inf"))
        return torch.softmax(s, dim=-1) @ (x @ wv)


def generate_block_attention(out):
    w = [torch.randn(D_ATTN, D_ATTN) for _ in range(3)]
    names = ["x", "wq", "wk", "wv"]
    export(BlockAttention(False), (torch.randn(2, 6, D_ATTN), *w), names, ["y"],
           {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}, f"{out}/blockattn_ref.onnx")
    padded = {"x": {0: "batch", 1: "padded"}, "y": {0: "batch", 1: "padded"}}
    for name, bug in (("ok", False), ("mod", True)):
        export(BlockAttention(True, bug), (torch.randn(2, 6, D_ATTN), *w, torch.tensor(5)), names + ["seq_len"],
               ["y"], padded, f"{out}/blockattn_{name}.onnx")


def generate(out):
    args = mlp._args(16, 16, batch=2, seq=7) + (torch.tensor(7),)
    for r in range(WORLD):
        for name, balanced in (("seqlen_balanced", True), ("seqlen_floor", False)):
            export(SeqLenRows(r, balanced), args, NAMES, ["y"], mlp.DYNAMIC, f"{out}/{name}_rank{r}.onnx")
    generate_block_attention(out)
