"""A token embedding followed by a small replicated linear, as a reference
model and as Megatron vocab-parallel ranks (VocabParallelEmbedding), plus
ranks carrying the bugs users hit in the masked lookup.

Reference: y = embed(input_ids) @ proj.weight + proj.bias, with
embed = nn.Embedding(VOCAB, D) (exported as Gather(embed.weight, input_ids))
and input_ids int64 [batch, seq].

Vocab parallelism (Megatron-LM `VocabParallelEmbedding`): rank r holds rows
start .. end-1 of the (padded) table, start = r * per_rank, end = start +
per_rank, as its own `embed.weight` [per_rank, D]. It looks up every token:
ids outside [start, end) are masked, their index set to 0 and their output
row zeroed, so after the all-reduce each token carries exactly its owner's
row. start and end are Python ints, baked into each rank's graph as
constants. The vocab is padded to a multiple of the world size: VOCAB = 10
over 4 ranks gives 3 rows each, 12 in all, rank 3's last two rows padding
that no valid id reaches.

Megatron writes the two masks as index assignments (`masked_input[mask] = 0`,
`output_parallel[mask, :] = 0.0`); the second one exports as a
NonZero/ScatterND chain, so the ranks use torch.where, which exports as
Where nodes (and no Cast of the mask).

Bug variants (`Options`): the upper bound checked with `>` instead of `>=`
(on every rank but the last, the first id of the next shard passes the mask
and its index, per_rank, is out of range for the rank's table); rank 1's
range starting one row late (start = per_rank + 1); the output mask
forgotten (every rank adds row 0 of its shard for tokens it does not own).
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import gpt
from collectives import all_reduce
from export import export

VOCAB, D = 10, 8
DYNAMIC = {"input_ids": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}


@dataclass(frozen=True)
class Options:
    upper_inclusive: bool = False  # True: mask ids > end instead of ids >= end (off by one)
    start_offset: int = 0          # added to the rank's start (and end): a wrong rank offset
    mask_output: bool = True       # False: out-of-range tokens keep row 0 of the shard


def per_rank_rows(vocab, world):
    """Rows per rank of the vocab padded to a multiple of `world`."""
    return -(-vocab // world)


class VocabParallelEmbedding(nn.Module):
    """Rank `rank`'s shard of the embedding table and Megatron's masked
    lookup, all-reduced over the ranks."""

    def __init__(self, rows, rank, opts=Options()):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(rows, D))
        # Megatron's VocabUtility.vocab_range_from_per_partition_vocab_size.
        self.start = rank * rows + opts.start_offset
        self.end = self.start + rows
        self.opts = opts

    def forward(self, input_ids):
        start, end = self.start, self.end
        below = input_ids < start
        above = input_ids > end if self.opts.upper_inclusive else input_ids >= end
        mask = below | above
        masked = input_ids - start
        masked = torch.where(mask, torch.zeros_like(masked), masked)
        out = F.embedding(masked, self.weight)
        if self.opts.mask_output:
            out = torch.where(mask.unsqueeze(-1), torch.zeros_like(out), out)
        return all_reduce(out)


class Model(nn.Module):
    """embed (the full table or a rank's shard), then a replicated linear."""

    def __init__(self, embed):
        super().__init__()
        self.embed = embed
        self.proj = gpt.Linear(D, D)

    def forward(self, input_ids):
        return self.proj(self.embed(input_ids))


def reference():
    return Model(nn.Embedding(VOCAB, D))


def rank_model(world, rank, opts=Options()):
    return Model(VocabParallelEmbedding(per_rank_rows(VOCAB, world), rank, opts))


def export_model(module, path, batch=2, seq=5):
    """The example ids are all 0: every variant looks them up in range (the
    off-by-one ranks would fail in eager mode on id `end`), and their values
    do not reach the graph."""
    ids = torch.zeros(batch, seq, dtype=torch.int64)
    export(module, (ids,), ["input_ids"], ["y"], DYNAMIC, path)


def generate(out, batch=2, seq=5):
    """Writes the vocab-parallel models into `out`. Seeded on a forked RNG:
    these files do not depend on, or shift, what other generators draw."""
    with torch.random.fork_rng():
        torch.manual_seed(4)
        _generate(out, batch, seq)


def _generate(out, batch, seq):
    export_model(reference(), f"{out}/vocab_ref.onnx", batch, seq)

    def ranks(name, world, opts=lambda r: Options()):
        for r in range(world):
            export_model(rank_model(world, r, opts(r)), f"{out}/vocab_{name}_rank{r}.onnx", batch, seq)

    ranks("tp2", 2)
    ranks("pad_tp4", 4)  # 10 rows over 4 ranks: 3 each, rank 3's last two are padding
    ranks("range_offbyone", 2, lambda r: Options(upper_inclusive=True))
    ranks("wrong_offset", 2, lambda r: Options(start_offset=1 if r == 1 else 0))
    ranks("no_mask_output", 2, lambda r: Options(mask_output=False))
    # 10 rows over 8 ranks: 2 each (16 in all); ranks 5, 6 and 7 hold only padding.
    ranks("pad_tp8", 8)
