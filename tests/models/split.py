"""Sequence splits that do not divide: mlp.py's MLP run token-parallel on 3
ranks, each rank computing its rows of the sequence, an AllGather along the
sequence rebuilding y on every rank. The reference is mlp_ref.onnx.

Two ways ranks get their rows:
- `seqshard_rank{r}`: x arrives already sharded (`seq_local` rows); the spec's
  split policy (even, chunk, tensor_split, sizes, pad_to_multiple) says how
  many rows each rank holds, and so defines `seq_local` per rank.
- ranks receive the whole x and cut their rows inside the graph from its
  length n (Shape -> Div/Mod -> Slice, as torch exports `x[:, a:b]` with
  a, b computed from x.shape):
  * `seqchunk`: torch.chunk's rows, c = ceil(n/3), rows r*c .. (r+1)*c - 1
    (clamped to n: trailing ranks may be short or empty). Correct for all n.
  * `seqbalanced`: rows floor(r*n/3) .. floor((r+1)*n/3) - 1 (the spec states
    these sizes). Correct for all n.
  * bug `seqfloor`: c = n // 3 rows each, so the last n % 3 rows are never
    computed. Correct exactly when 3 divides n.

Position-dependent work (`seqpos`): the reference adds a learned position
table, y = mlp(x + pos[:n]); each rank holds `seq_local` rows and reads its
positions from offset r * seq_local, the offset being right only if every
rank before it holds as many rows as it does. True under an even split; under
chunk the short last rank reads the wrong positions, under tensor_split
every rank after the first n % 3 does.

Padded sequence parallelism (`seqpad`): x arrives padded to a multiple of 4
rows and split evenly over 2 ranks; the ranks compute every row, pad
included, and y is sharded the same way: the pad rows of y are junk the
caller drops. Correct for every n, whatever the pad holds.
"""
import torch
from torch import nn

import mlp
from collectives import all_gather
from export import export

WORLD = 3
SHARD_DYNAMIC = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq"}}
LOCAL_DYNAMIC = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_local"}}


class RowsMlp(nn.Module):
    """Cuts rows [start(n), end(n)) of x along the sequence, runs the MLP on
    them and gathers the rows of every rank."""

    def __init__(self, rank, bounds, gather=True):
        super().__init__()
        self.mlp = mlp.Mlp()
        self.rank, self.bounds, self.gather = rank, bounds, gather

    def forward(self, x, w1, b1, w2, b2):
        if self.bounds:
            a, b = self.bounds(x.shape[1], self.rank)
            x = x[:, a:b]
        y = self.mlp(x, w1, b1, w2, b2)
        return all_gather(y, 1, WORLD) if self.gather else y


class PosMlp(nn.Module):
    """mlp(x + positions), the positions of rank `rank` (None: reference) read
    from offset rank * (its own row count)."""

    def __init__(self, rank=None):
        super().__init__()
        self.mlp = mlp.Mlp()
        self.rank = rank

    def forward(self, x, pos, w1, b1, w2, b2):
        n = x.shape[1]
        off = 0 if self.rank is None else self.rank * n
        y = self.mlp(x + pos[off:off + n], w1, b1, w2, b2)
        return y if self.rank is None else all_gather(y, 1, WORLD)


def chunk_bounds(n, r):
    c = (n + WORLD - 1) // WORLD
    return r * c, (r + 1) * c


def balanced_bounds(n, r):
    return (r * n) // WORLD, ((r + 1) * n) // WORLD


def floor_bounds(n, r):
    c = n // WORLD
    return r * c, (r + 1) * c


def _args(seq=7):
    return mlp._args(16, 16, batch=2, seq=seq)


def generate(out):
    for r in range(WORLD):
        export(RowsMlp(r, None), _args(3), mlp.NAMES, ["y"], SHARD_DYNAMIC, f"{out}/seqshard_rank{r}.onnx")
        for name, bounds in (("seqchunk", chunk_bounds), ("seqbalanced", balanced_bounds),
                             ("seqfloor", floor_bounds)):
            export(RowsMlp(r, bounds), _args(7), mlp.NAMES, ["y"], mlp.DYNAMIC, f"{out}/{name}_rank{r}.onnx")
    names = ["x", "pos"] + mlp.NAMES[1:]
    pos_args = lambda seq: (_args(seq)[0], torch.randn(64, mlp.D_MODEL)) + _args(seq)[1:]
    export(PosMlp(), pos_args(7), names, ["y"], mlp.DYNAMIC, f"{out}/seqpos_ref.onnx")
    for r in range(WORLD):
        export(PosMlp(r), pos_args(3), names, ["y"], SHARD_DYNAMIC, f"{out}/seqpos_rank{r}.onnx")
    for r in range(2):
        export(RowsMlp(r, None, gather=False), _args(4), mlp.NAMES, ["y"], LOCAL_DYNAMIC,
               f"{out}/seqpad_rank{r}.onnx")
