"""The two ends of a GPT-2 language model, Megatron-style: vocab-parallel
embedding, then (optionally) a tensor-parallel block (gpt2.py), a
column-parallel LM head and vocab-parallel cross-entropy, against a plain
reference (nn.Embedding, the block, nn.Linear,
-log_softmax(logits).gather(target)). Per-token losses, sequence-first [s, b].

Factories (`--world-size` 2 or 4; a vocabulary of 16):
  gpt2_lm_tp           embedding, LM head, cross-entropy        VERIFIED
  gpt2_lm_block_tp     the same with a block between them        VERIFIED (slower: ~10 s)
  gpt2_lm_tp_no_mask   the embedding forgets to zero the rows    REFUTED
                       of ids outside the rank's vocab shard
  gpt2_lm_pad_tp       a vocabulary of 15 padded to 16 on the    VERIFIED
                       ranks (Megatron's padded vocab): the last
                       rank's pad logit is masked to -inf
  gpt2_lm_pad_tp_unmasked  ... without that mask: the pad logit  REFUTED
                       joins the softmax
"""
import torch
import torch.nn.functional as F
from torch import nn

import gpt2
import tensor_parallel as tp
from shardproof.torch import Case

VOCAB = 16


class Reference(nn.Module):
    def __init__(self, block=False, vocab=VOCAB):
        super().__init__()
        self.embedding = nn.Embedding(vocab, gpt2.HIDDEN)
        self.block = gpt2.Block() if block else nn.Identity()
        self.lm_head = nn.Linear(gpt2.HIDDEN, vocab, bias=False)

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.block(self.embedding(input_ids)))
        return -torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).view_as(labels)


class Parallel(nn.Module):
    """`vocab` real ids in a table padded to VOCAB rows (Megatron pads the
    vocabulary to a multiple of the world size): the pad columns' logits are
    masked to -inf, so the softmax is over the real vocabulary only."""

    def __init__(self, block=False, vocab=VOCAB):
        super().__init__()
        self.vocab = vocab
        self.embedding = tp.VocabParallelEmbedding(VOCAB, gpt2.HIDDEN)
        self.block = gpt2.Block(parallel=True) if block else nn.Identity()
        self.lm_head = tp.ColumnParallelLinear(gpt2.HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids, labels):
        logits_parallel = self.lm_head(self.block(self.embedding(input_ids)))
        if self.vocab < VOCAB and "pad_logits_unmasked" not in tp.BUGS:
            per = logits_parallel.size(-1)
            first = tp.get_tensor_model_parallel_rank() * per
            pad = torch.arange(first, first + per) >= self.vocab
            logits_parallel = logits_parallel.masked_fill(pad, float("-inf"))
        return tp.vocab_parallel_cross_entropy(logits_parallel, labels)


def _case(block=False, bugs=(), vocab=VOCAB):
    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return Parallel(block, vocab)

    def inputs(sizes):
        shape = (sizes["seq"], sizes["batch"])
        return {"input_ids": torch.randint(0, vocab, shape), "labels": torch.randint(0, vocab, shape)}

    axes = {0: "seq", 1: "batch"}
    return Case(reference=lambda: Reference(block, vocab), implementation=implementation, inputs=inputs,
                dynamic={"input_ids": axes, "labels": axes, "loss": axes}, outputs=["loss"])


def gpt2_lm_tp():
    return _case()


def gpt2_lm_block_tp():
    return _case(block=True)


def gpt2_lm_tp_no_mask():
    return _case(bugs={"embedding_no_output_mask"})


def gpt2_lm_pad_tp():
    return _case(vocab=VOCAB - 1)


def gpt2_lm_pad_tp_unmasked():
    return _case(vocab=VOCAB - 1, bugs={"pad_logits_unmasked"})
