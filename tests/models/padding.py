"""Padded sequences: the same attention layer run on a batch padded to
`padded` rows, with the true length passed as data (`seq_len`, an int64
scalar), against the reference run on exactly `seq` rows. The spec relates
x = slice(x@0, axis=1, start=0, end=seq) and likewise the output, binds
`seq_len: {value: seq}` and lets the pad rows hold anything.

Single-head self-attention, d = 8, weights as inputs:
    s = (x wq)(x wk)^T / sqrt(8),  y = softmax(s) (x wv)

Implementations (`padattn_<name>.onnx`, world size 1):
- `keymask`: keys at positions >= seq_len masked with masked_fill(-inf)
  (arange(padded) < seq_len): correct for every padded >= seq.
- `causal`: a causal mask only (the reference is causal too): real rows
  never look at later positions, so the pad is unreachable without a key
  mask. Correct.
- bug `offbyone`: arange <= seq_len keeps the first pad key: wrong exactly
  when padded > seq.
- bug `wronglen`: the mask is built from the padded length x.shape[1]
  instead of seq_len (it masks nothing): wrong exactly when padded > seq.
- left padding (the real rows last, as batched generation pads): `leftkey`
  adds to the causal mask a key mask keeping positions >= padded - seq_len:
  correct. The causal model alone on left-padded data (spec only) is a bug:
  every real row attends to the pad keys before it, wrong exactly when
  padded > seq.
- `finite`: an additive -1e4 mask. Numerically exp(-1e4) underflows to 0, but
  the masked columns are not exactly zero: never VERIFIED (it stays UNKNOWN).
- per-row lengths (`padlen_<name>`, reference `padlen_ref`): a key mask per
  batch row from `lengths` (int64 [batch], each in [1, seq], bound with
  `each:`), in the reference too; `ok` is correct, bug `offbyone` keeps key
  lengths[b] (wrong exactly for rows shorter than padded).
- pooling (`padpool_<name>`, reference: y = mean over the sequence of
  attention rows): `masked` sums the real rows and divides by seq_len
  (correct); bug `leak` takes the mean over all padded rows.
"""
import math

import torch
from torch import nn

from export import export

D = 8
NAMES = ["x", "wq", "wk", "wv"]


class Attention(nn.Module):
    def __init__(self, mask=None, causal=False, pool=None):
        super().__init__()
        self.mask, self.causal, self.pool = mask, causal, pool

    def forward(self, x, wq, wk, wv, seq_len=None):
        n = x.shape[1]
        s = (x @ wq) @ (x @ wk).transpose(1, 2) / math.sqrt(D)
        pos = torch.arange(n)
        if self.causal:
            s = s.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        if self.mask == "keymask":
            s = s.masked_fill(~(pos < seq_len), float("-inf"))
        elif self.mask == "offbyone":
            s = s.masked_fill(~(pos <= seq_len), float("-inf"))
        elif self.mask == "wronglen":
            s = s.masked_fill(~(pos < n), float("-inf"))
        elif self.mask == "leftkey":
            s = s.masked_fill(~(pos >= n - seq_len), float("-inf"))
        elif self.mask == "finite":
            s = s + (pos >= seq_len).to(s.dtype) * -1e4
        y = torch.softmax(s, dim=-1) @ (x @ wv)
        if self.pool == "mean":
            return y.mean(dim=1)
        if self.pool == "masked":
            keep = (pos < seq_len).to(y.dtype)
            return (y * keep[None, :, None]).sum(dim=1) / seq_len.to(y.dtype)
        return y


class LengthsAttention(nn.Module):
    """Attention with a key mask per batch row from `lengths` (int64 [batch],
    each row's true length): the reference masks keys >= lengths[b] among its
    `seq` positions, the padded implementation among `padded` positions; with
    `ok=False` the mask keeps key lengths[b] too (off by one)."""

    def __init__(self, ok=True):
        super().__init__()
        self.ok = ok

    def forward(self, x, wq, wk, wv, lengths):
        s = (x @ wq) @ (x @ wk).transpose(1, 2) / math.sqrt(D)
        pos = torch.arange(x.shape[1])
        keep = pos[None, :] < lengths[:, None] if self.ok else pos[None, :] <= lengths[:, None]
        s = s.masked_fill(~keep[:, None, :], float("-inf"))
        return torch.softmax(s, dim=-1) @ (x @ wv)


def _args(n):
    return (torch.randn(2, n, D), torch.randn(D, D), torch.randn(D, D), torch.randn(D, D))


def generate(out):
    ref_axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
    pad_axes = {"x": {0: "batch", 1: "padded"}, "y": {0: "batch", 1: "padded"}}
    pool_ref_axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch"}}
    pool_pad_axes = {"x": {0: "batch", 1: "padded"}, "y": {0: "batch"}}
    seq_len = torch.tensor(3, dtype=torch.int64)
    export(Attention(), _args(5), NAMES, ["y"], ref_axes, f"{out}/padattn_ref.onnx")
    export(Attention(causal=True), _args(5), NAMES, ["y"], ref_axes, f"{out}/padattn_causal_ref.onnx")
    for mask in ("keymask", "offbyone", "wronglen", "finite"):
        export(Attention(mask), _args(5) + (seq_len,), NAMES + ["seq_len"], ["y"], pad_axes,
               f"{out}/padattn_{mask}.onnx")
    export(Attention(causal=True), _args(5), NAMES, ["y"], pad_axes, f"{out}/padattn_causal.onnx")
    export(Attention("leftkey", causal=True), _args(5) + (seq_len,), NAMES + ["seq_len"], ["y"], pad_axes,
           f"{out}/padattn_leftkey.onnx")
    lengths = torch.tensor([3, 5], dtype=torch.int64)
    len_ref_axes = dict(ref_axes, lengths={0: "batch"})
    len_pad_axes = dict(pad_axes, lengths={0: "batch"})
    export(LengthsAttention(), _args(5) + (lengths,), NAMES + ["lengths"], ["y"], len_ref_axes,
           f"{out}/padlen_ref.onnx")
    export(LengthsAttention(), _args(7) + (lengths,), NAMES + ["lengths"], ["y"], len_pad_axes,
           f"{out}/padlen_ok.onnx")
    export(LengthsAttention(ok=False), _args(7) + (lengths,), NAMES + ["lengths"], ["y"], len_pad_axes,
           f"{out}/padlen_offbyone.onnx")
    export(Attention(pool="mean"), _args(5), NAMES, ["y"], pool_ref_axes, f"{out}/padpool_ref.onnx")
    export(Attention("keymask", pool="masked"), _args(5) + (seq_len,), NAMES + ["seq_len"], ["y"], pool_pad_axes,
           f"{out}/padpool_masked.onnx")
    export(Attention("keymask", pool="mean"), _args(5) + (seq_len,), NAMES + ["seq_len"], ["y"], pool_pad_axes,
           f"{out}/padpool_leak.onnx")
