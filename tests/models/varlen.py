"""Packed variable-length sequences (flash-attention's varlen layout): three
sequences of s1, s2 and s3 tokens packed into one tensor x of s1 + s2 + s3
rows, with their offsets passed as data, `cu_seqlens = [0, s1, s1 + s2,
s1 + s2 + s3]` (int64; the spec binds it with `elements:`). Each token may only attend to the tokens of its own
sequence: a block-diagonal key mask built from the offsets.

The reference runs single-head attention (d = 8, weights as inputs) on each
sequence separately: y1 = attn(x1), y2 = attn(x2), y3 = attn(x3).

Implementations (`varlen_<name>.onnx`, world size 1), token t's sequence is
seg(t) = #{k >= 1 : cu_seqlens[k] <= t} (searchsorted(cu_seqlens, t,
right=True) - 1, unrolled over the interior offsets), and the mask keeps
seg(q) == seg(k):
- `ok`: correct for every s1, s2, s3 >= 1.
- bug `offbyone`: seg counts offsets strictly below t (searchsorted with
  right=False), so the first token of each later sequence is counted in the
  one before: it attends to every token of that sequence (and they to it).
"""
import math

import torch
from torch import nn

from export import export

D = 8
NSEQ = 3


def attention(x, wq, wk, wv, keep=None):
    s = (x @ wq) @ (x @ wk).transpose(0, 1) / math.sqrt(D)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ (x @ wv)


class Reference(nn.Module):
    def forward(self, x1, x2, x3, wq, wk, wv):
        return attention(x1, wq, wk, wv), attention(x2, wq, wk, wv), attention(x3, wq, wk, wv)


class Packed(nn.Module):
    def __init__(self, right=True):
        super().__init__()
        self.right = right

    def forward(self, x, cu_seqlens, wq, wk, wv):
        pos = torch.arange(x.shape[0])
        seg = torch.zeros_like(pos)
        for k in range(1, NSEQ):
            c = cu_seqlens[k]
            seg = seg + ((pos >= c) if self.right else (pos > c)).to(torch.int64)
        keep = seg[:, None] == seg[None, :]
        return attention(x, wq, wk, wv, keep)


def generate(out):
    w = [torch.randn(D, D) for _ in range(3)]
    dynamic = {f"{t}{i}": {0: f"s{i}"} for t in "xy" for i in (1, 2, 3)}
    export(Reference(), (torch.randn(3, D), torch.randn(4, D), torch.randn(2, D), *w),
           ["x1", "x2", "x3", "wq", "wk", "wv"], ["y1", "y2", "y3"], dynamic, f"{out}/varlen_ref.onnx")
    for name, right in (("ok", True), ("offbyone", False)):
        export(Packed(right), (torch.randn(9, D), torch.tensor([0, 3, 7, 9]), *w), ["x", "cu_seqlens", "wq", "wk", "wv"],
               ["y"], {"x": {0: "total"}, "y": {0: "total"}}, f"{out}/varlen_{name}.onnx")
