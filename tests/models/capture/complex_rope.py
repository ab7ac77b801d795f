"""Rotary embedding the way Meta's Llama reference writes it: a complex table
from torch.polar, queries viewed as complex pairs, one complex product. User
code for the torch 2 capture: heads split over the ranks, each rank rotating
its own heads with the whole table. VARIANT "shifted" reads the table one
position late on every rank (a wrong offset after a sequence split): wrong.
"""
import torch
import torch.distributed as dist
from torch import nn

from shardproof.capture import Case

HEADS, HEAD_DIM, MAX_SEQ = 4, 8, 64


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    angles = torch.outer(torch.arange(end), freqs).float()
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary_emb(xq, freqs_cis, start=0):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    freqs_cis = freqs_cis[start:start + xq.shape[1]].view(1, xq.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


class Rotary(nn.Module):
    """x [batch, seq, heads * HEAD_DIM] with each head rotated by position."""

    def __init__(self, heads, start=0):
        super().__init__()
        self.heads, self.start = heads, start
        self.register_buffer("freqs_cis", precompute_freqs_cis(HEAD_DIM, MAX_SEQ), persistent=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = x.view(b, s, self.heads, HEAD_DIM)
        return apply_rotary_emb(q, self.freqs_cis, self.start).reshape(b, s, -1)


def case(variant="plain"):
    def implementation():
        return Rotary(HEADS // dist.get_world_size(), start=1 if variant == "shifted" else 0)

    def rank_inputs(sizes, rank, world):
        return {"x": torch.randn(sizes["batch"], sizes["seq"], HEADS * HEAD_DIM).chunk(world, -1)[rank]}

    return Case(reference=lambda: Rotary(HEADS), implementation=implementation,
                inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], HEADS * HEAD_DIM)},
                rank_inputs=rank_inputs, dynamic={"x": {0: "batch", 1: "seq"}})
