"""A vocab-parallel LM head with cross-entropy, as Megatron-LM writes it
(`VocabParallelEmbedding`'s counterpart at the output: a column-parallel
lm_head and `_VocabParallelCrossEntropy`), against a plain reference.

Reference: logits = h @ lm_head.weight ([D, VOCAB]), loss[b, s] =
-log_softmax(logits)[b, s, target[b, s]] (log_softmax over the real vocab, the
target logit picked with torch.gather). h [batch, seq, D] float, target
[batch, seq] int64.

Ranks (vocab parallel, vocab padded to a multiple of the world size): rank r
holds columns start .. end-1 of the padded table, start = r * per_rank, as its
own `lm_head.weight` [D, per_rank]; columns past VOCAB are padding. Each rank:
  logits_r = h @ W_r, cut to its real columns (the padding must not enter the
  softmax: Megatron-style implementations that pad the vocab slice or mask it);
  m = AllReduce(max)(amax(logits_r)); z_r = logits_r - m;
  target logit: ids outside [start, end) masked, index set to 0, value zeroed,
  then AllReduce(sum) (every token gets its owner's logit);
  s = AllReduce(sum)(sum(exp(z_r)));
  loss = log(s) - target logit.

The simpler layout (`gathered`): each rank's logits shard is all-gathered
along the vocab, sliced to the real vocab, and every rank computes the plain
cross-entropy on the whole row.

Bug variants (`Options`): no max all-reduce (each rank subtracts its own
max, so the ranks' exp-sums are on different scales and add up wrongly);
padding columns kept (they enter the max and the exp-sum); the target range
check `target > end` instead of `>= end` (the first id of the next shard
passes the mask and indexes one past the rank's columns).
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import gpt
from collectives import all_gather, all_reduce, all_reduce_max
from export import export

VOCAB, D = 10, 8
DYNAMIC = {"h": {0: "batch", 1: "seq"}, "target": {0: "batch", 1: "seq"}, "loss": {0: "batch", 1: "seq"}}


@dataclass(frozen=True)
class Options:
    max_all_reduce: bool = True    # False: each rank subtracts its own max
    mask_padding: bool = True      # False: padding columns enter the softmax
    upper_inclusive: bool = False  # True: target mask `> end` (off by one)
    gathered: bool = False         # True: all-gather the logits, plain cross-entropy
    where_mask: bool = False       # True: padding columns set to -inf by a mask the export folds
    mask_late: bool = False        # True: that mask starts one column late (a padding column leaks)


def per_rank_cols(vocab, world):
    return -(-vocab // world)


def cross_entropy(logits, target):
    """Per-token cross-entropy, written as export keeps it (LogSoftmax, GatherElements; `[..., 0]`
    rather than squeeze, which exports an If on a dynamic dim)."""
    logp = F.log_softmax(logits, dim=-1)
    return -logp.gather(-1, target.unsqueeze(-1))[..., 0]


class CrossEntropy(nn.Module):
    """The plain per-token cross-entropy as a module (node names /ce/...)."""

    def forward(self, logits, target):
        return cross_entropy(logits, target)


class Reference(nn.Module):
    def __init__(self, vocab=VOCAB):
        super().__init__()
        self.lm_head = gpt.Linear(D, vocab, bias=False)
        self.ce = CrossEntropy()

    def forward(self, h, target):
        return self.ce(self.lm_head(h), target)


class ShardedCrossEntropy(nn.Module):
    """Megatron's _VocabParallelCrossEntropy on rank `rank`'s logits shard
    (vocab columns start .. end-1, of which `real` are the real vocab)."""

    def __init__(self, start, end, real, opts):
        super().__init__()
        self.start, self.end, self.real = start, end, real
        self.opts = opts

    def forward(self, logits, target):
        if self.opts.where_mask:
            # Megatron-style padding mask from Python ints: the export folds it
            # into a constant bool tensor (no Range left in the graph).
            pad = torch.arange(self.end - self.start) >= self.real + int(self.opts.mask_late)
            if self.opts.mask_padding:
                logits = torch.where(pad, torch.tensor(float("-inf")), logits)
        elif self.opts.mask_padding and self.real < self.end - self.start:
            logits = logits[..., :self.real]
        m = torch.amax(logits, dim=-1, keepdim=True)
        if self.opts.max_all_reduce:
            m = all_reduce_max(m)
        z = logits - m
        start, end = self.start, self.end
        above = target > end if self.opts.upper_inclusive else target >= end
        mask = (target < start) | above
        local = target - start
        local = torch.where(mask, torch.zeros_like(local), local)
        picked = z.gather(-1, local.unsqueeze(-1))[..., 0]
        picked = torch.where(mask, torch.zeros_like(picked), picked)
        picked = all_reduce(picked)
        s = all_reduce(torch.exp(z).sum(dim=-1))
        return torch.log(s) - picked


class VocabParallelCrossEntropy(nn.Module):
    """Rank `rank` of `world`: its lm_head columns and Megatron's
    vocab-parallel cross-entropy (or the gathered layout) for a vocab of
    `vocab` ids."""

    def __init__(self, world, rank, opts=Options(), vocab=VOCAB):
        super().__init__()
        per = per_rank_cols(vocab, world)
        self.lm_head = gpt.Linear(D, per, bias=False)
        self.world, self.per, self.vocab = world, per, vocab
        self.start = rank * per
        self.end = self.start + per
        self.real = max(0, min(per, vocab - self.start))  # columns of the real vocab
        self.opts = opts
        self.ce = CrossEntropy() if opts.gathered else ShardedCrossEntropy(self.start, self.end, self.real, opts)

    def forward(self, h, target):
        logits = self.lm_head(h)
        if self.opts.gathered:
            full = all_gather(logits, 2, self.world)
            return self.ce(full[..., :self.vocab], target)
        return self.ce(logits, target)


def export_model(module, path, batch=2, seq=3):
    h = torch.randn(batch, seq, D)
    target = torch.zeros(batch, seq, dtype=torch.int64)
    export(module, (h, target), ["h", "target"], ["loss"], DYNAMIC, path)


def generate(out):
    """Seeded on a forked RNG: these files do not shift what other generators draw."""
    with torch.random.fork_rng():
        torch.manual_seed(5)
        export_model(Reference(), f"{out}/lmhead_ref.onnx")

        def ranks(name, world, opts=Options(), vocab=VOCAB):
            for r in range(world):
                export_model(VocabParallelCrossEntropy(world, r, opts, vocab), f"{out}/lmhead_{name}_rank{r}.onnx")

        ranks("ce_tp2", 2)
        ranks("ce_pad_tp4", 4)  # 10 columns over 4 ranks: 3 each, rank 3 holds 1 real and 2 padding
        ranks("gather_pad_tp4", 4, Options(gathered=True))
        ranks("ce_no_max_allreduce_tp2", 2, Options(max_all_reduce=False))
        ranks("ce_pad_unmasked_tp4", 4, Options(mask_padding=False))
        ranks("ce_target_offbyone_tp2", 2, Options(upper_inclusive=True))


def generate_where(out):
    """The padding masked with Where(mask, -inf, logits) on every rank, the
    mask a constant the export folds (all False on ranks 0-2, [F, T, T] on
    rank 3); the same ranks without the Where, and with the mask one column
    late ([F, F, T] on rank 3: a padding column leaks). Seeded on a forked RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(61)
        for name, opts in (("ce_pad_where_tp4", Options(where_mask=True)),
                           ("ce_pad_where_unmasked_tp4", Options(where_mask=True, mask_padding=False)),
                           ("ce_pad_where_late_tp4", Options(where_mask=True, mask_late=True))):
            for r in range(4):
                export_model(VocabParallelCrossEntropy(4, r, opts), f"{out}/lmhead_{name}_rank{r}.onnx")


def generate_worlds(out):
    """Both layouts on 2, 4 and 8 ranks where generate() lacks them. 8 ranks
    take a vocab of 15 (lmhead15_ref.onnx): padded to 16, 2 columns per rank,
    rank 7 holds one real and one padding column (10 ids would leave ranks 5
    to 7 without a real column). Seeded on a forked RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(58)
        for r in range(2):
            export_model(VocabParallelCrossEntropy(2, r, Options(gathered=True)), f"{out}/lmhead_gather_tp2_rank{r}.onnx")
        export_model(Reference(15), f"{out}/lmhead15_ref.onnx")
        for r in range(8):
            for name, opts in (("ce", Options()), ("gather", Options(gathered=True))):
                export_model(VocabParallelCrossEntropy(8, r, opts, 15), f"{out}/lmhead15_{name}_pad_tp8_rank{r}.onnx")
