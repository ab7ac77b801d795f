"""A language model whose input embedding and output projection share one
weight (tied embeddings, as GPT-2 and Megatron's `share_embeddings_and_
output_weights`): logits = h @ W^T, so W's gradient is the sum of both uses.
Megatron-style and sequence-first [s, b]. Under tensor parallelism the
vocab-parallel embedding and the vocab-parallel LM head use the same shard:
each rank's gradient shard must hold the embedding use (its rows of the ids
it owns, with the full gradient of h) plus the head use (its logit columns).

The loss is the sum of the squared logits (a stand-in for cross-entropy that
keeps the gradient at the LM end plain); each rank's loss is the part of its
vocab shard (the spec places it `partial`).

Used by training.py (`tied_tp`, `tied_tp_head_without_f`).
"""
import torch
import torch.nn.functional as F
from torch import nn

import tensor_parallel as tp

VOCAB, HIDDEN = 16, 8


class TiedLm(nn.Module):
    def __init__(self, parallel=False):
        super().__init__()
        self.parallel = parallel
        self.embedding = tp.VocabParallelEmbedding(VOCAB, HIDDEN) if parallel else nn.Embedding(VOCAB, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids):
        h = self.norm(self.embedding(input_ids))                     # [s, b, h], whole on every rank
        if not self.parallel:
            logits = F.linear(h, self.embedding.weight)              # the same table, transposed
            return (logits * logits).sum()
        if "tied_head_without_f" not in tp.BUGS:
            # f: the head's input gradient is summed over the vocab shards,
            # so the embedding use sees every logit's part, not its rank's.
            h = tp.copy_to_tensor_model_parallel_region(h)
        logits_parallel = F.linear(h, self.embedding.weight)         # [s, b, V/P]: this rank's rows
        return (logits_parallel * logits_parallel).sum()               # this shard's part of the loss
