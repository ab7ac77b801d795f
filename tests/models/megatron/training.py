"""Training steps of Megatron-style blocks: the loss and every parameter's
gradient, exported with `shardproof.torch export --train`. The forward returns
the loss; the gradients come from torch's own backward pass, through the
Megatron Functions' `backward` (f all-reduces the input gradient there).

Factories (`--train --world-size P`):
  mlp_tp                     LayerNorm + column/row-parallel MLP       VERIFIED
  mlp_tp_f_without_reduce    f's backward forgets its all-reduce: the  REFUTED
                             LayerNorm's gradients miss the other
                             ranks' part
  mlp_sp                     the same under sequence parallelism; the  VERIFIED
                             gradients of the parameters applied to
                             the local sequence (LayerNorm, the row-
                             parallel bias) are all-reduced after the
                             backward pass, as Megatron does
  mlp_sp_grads_unsynced      ... without that all-reduce: each rank    REFUTED
                             holds its own sequence shard's gradient
  gpt2_block_tp              gpt2.py's whole block (attention + MLP),  VERIFIED
                             squared error
  gpt2_block_tp_f_without_reduce  ... where f's backward forgets its   REFUTED
                             all-reduce: the LayerNorms before attention and MLP
  llama_tp_step              llama.py's decoder layer (rotary, GQA,    VERIFIED
                             SwiGLU, RMSNorm), squared error
  llama_tp_step_f_without_reduce  ... where f's backward forgets its   REFUTED
                             all-reduce
  llama_sp_step              the same layer under tensor and sequence  VERIFIED
                             parallelism; the RMSNorm weights'
                             gradients all-reduced after backward
  llama_sp_step_norm_grads_unsynced  ... without that all-reduce      REFUTED
                             (Megatron-LM #1446)
  gpt2_lm_tp_step            gpt2_lm.py: vocab-parallel embedding, LM  VERIFIED
                             head and Megatron's cross-entropy with its
                             own backward (softmax minus the target's
                             one-hot on the rank that owns it)
  gpt2_lm_tp_step_ce_grad_unmasked  ... whose backward subtracts the   REFUTED
                             one-hot on every rank: both gradients, replayed
  gpt2_lm_pad_tp_step        the same ends with a vocabulary of 15     VERIFIED
                             padded to 16 on the ranks (Megatron's
                             padded vocab), the pad logit masked to -inf
  gpt2_lm_pad_tp_step_unmasked  ... without that mask                  REFUTED
  mqa_tp                     mqa.py: multi-query attention, the query  VERIFIED
                             heads split, the one K/V projection
                             replicated and its gradient all-reduced
                             after the backward pass
  mqa_tp_kv_grad_unsynced    ... without that all-reduce: each rank    REFUTED
                             keeps its own heads' part (bigcode
                             Megatron-LM #35)
  tied_tp                    tied.py: input embedding and LM head      VERIFIED
                             sharing one vocab-parallel weight, the
                             squared logits summed as the loss
  tied_tp_head_without_f     ... whose LM head reads h without f: the  REFUTED
                             embedding use of the tied weight (and the
                             LayerNorm) get only the rank's logits' part
"""
import torch
import torch.nn.functional as F
from torch import nn

import gpt2
import gpt2_lm
import llama
import mqa
import tied
import tensor_parallel as tp
from shardproof.torch import Case

HIDDEN, FFN = 8, 32


class MlpBlock(nn.Module):
    def __init__(self, parallel=False, sequence_parallel=False):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        if parallel:
            self.up = tp.ColumnParallelLinear(HIDDEN, FFN, sequence_parallel=sequence_parallel)
            self.down = tp.RowParallelLinear(FFN, HIDDEN, sequence_parallel=sequence_parallel)
        else:
            self.up = nn.Linear(HIDDEN, FFN)
            self.down = nn.Linear(FFN, HIDDEN)
        if sequence_parallel:
            # Applied to the local sequence shard: their gradients are partial
            # (Megatron marks them the same way).
            for p in (self.norm.weight, self.norm.bias, self.down.bias):
                p.sequence_parallel = True

    def forward(self, x, target):
        y = x + self.down(F.gelu(self.up(self.norm(x))))
        return ((y - target) * (y - target)).sum()


def allreduce_sequence_parallel_grads(module):
    """After backward: sum the partial gradients of sequence-parallel parameters."""
    if "sp_grads_unsynced" in tp.BUGS:
        return
    for p in module.parameters():
        if getattr(p, "sequence_parallel", False) and p.grad is not None:
            torch.distributed.all_reduce(p.grad, group=tp.get_tensor_model_parallel_group())


def _case(sequence_parallel=False, bugs=()):
    def inputs(sizes):
        shape = (sizes["seq"], sizes["batch"], HIDDEN)
        return {"x": torch.randn(*shape), "target": torch.randn(*shape)}

    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return MlpBlock(parallel=True, sequence_parallel=sequence_parallel)

    axes = {0: "seq", 1: "batch"}
    dynamic = {"x": axes, "target": axes}
    if not sequence_parallel:
        return Case(reference=MlpBlock, implementation=implementation, inputs=inputs, dynamic=dynamic)

    def rank_inputs(sizes, rank, world):
        return {k: torch.chunk(v, world, dim=0)[rank] for k, v in inputs(sizes).items()}

    local = {0: "seq_local", 1: "batch"}
    return Case(reference=MlpBlock, implementation=implementation, inputs=inputs, rank_inputs=rank_inputs,
                dynamic=dynamic, rank_dynamic={"x": local, "target": local},
                finalize_grads=allreduce_sequence_parallel_grads)


def mlp_tp():
    return _case()


def mlp_tp_f_without_reduce():
    return _case(bugs={"f_backward_without_all_reduce"})


def mlp_sp():
    return _case(sequence_parallel=True)


def mlp_sp_grads_unsynced():
    return _case(sequence_parallel=True, bugs={"sp_grads_unsynced"})


class SquaredError(nn.Module):
    """The wrapped block's squared error against `target` (shaped like its output)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        *inputs, target = args
        y = self.model(*inputs)
        return ((y - target) * (y - target)).sum()


def with_loss(case):
    """A forward Case whose block maps x to an output shaped like x, as a
    training step: one more input, `target`, placed like x on every rank."""
    rank_inputs = case.rank_inputs or (lambda sizes, r, p: case.inputs(sizes))

    def add_target(feed):
        return dict(feed, target=torch.randn_like(feed["x"]))

    def rank_dynamic_with_target(d):
        return {k: v for k, v in dict(d, target=d["x"]).items() if k not in ("y", "y0")}

    def reference():
        tp.reset_groups()  # its finalize_grads asks for the group: one of this world
        return SquaredError(case.reference())

    return Case(reference=reference,
                implementation=lambda: SquaredError(case.implementation()),
                inputs=lambda sizes: add_target(case.inputs(sizes)),
                rank_inputs=lambda sizes, r, p: add_target(rank_inputs(sizes, r, p)),
                dynamic=rank_dynamic_with_target(case.dynamic),
                rank_dynamic=(rank_dynamic_with_target(case.rank_dynamic) if case.rank_dynamic else None),
                finalize_grads=case.finalize_grads)


def gpt2_block_tp():
    return with_loss(gpt2._case())


def gpt2_block_tp_f_without_reduce():
    return with_loss(gpt2._case(bugs={"f_backward_without_all_reduce"}))


def llama_tp_step():
    return with_loss(llama._case())


def llama_tp_step_f_without_reduce():
    return with_loss(llama._case(bugs={"f_backward_without_all_reduce"}))


class TokenLossSum(nn.Module):
    """The wrapped model's per-token losses, summed: the training step's loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model(*args).sum()


def _lm_step(bugs=(), vocab=gpt2_lm.VOCAB):
    case = gpt2_lm._case(bugs=bugs, vocab=vocab)
    return Case(reference=lambda: TokenLossSum(case.reference()),
                implementation=lambda: TokenLossSum(case.implementation()),
                inputs=case.inputs, dynamic={k: v for k, v in case.dynamic.items() if k != "loss"})


def gpt2_lm_tp_step():
    return _lm_step()


def gpt2_lm_tp_step_ce_grad_unmasked():
    return _lm_step(bugs={"ce_backward_ignores_target_mask"})


def gpt2_lm_pad_tp_step():
    return _lm_step(vocab=gpt2_lm.VOCAB - 1)


def gpt2_lm_pad_tp_step_unmasked():
    return _lm_step(vocab=gpt2_lm.VOCAB - 1, bugs={"pad_logits_unmasked"})


def allreduce_norm_grads(module):
    """After backward under sequence parallelism: each rank's RMSNorm weights saw
    only its sequence shard, so their gradients are partial sums (Megatron-LM
    #1446, gpt-neox #1257); sum them over the tensor-parallel ranks."""
    if "sp_grads_unsynced" in tp.BUGS:
        return
    for name, p in module.named_parameters():
        if "layernorm" in name and p.grad is not None:
            torch.distributed.all_reduce(p.grad, group=tp.get_tensor_model_parallel_group())


def _llama_sp_step(bugs=()):
    case = with_loss(llama._case(sequence_parallel=True, bugs=bugs))
    case.finalize_grads = allreduce_norm_grads
    return case


def llama_sp_step():
    return _llama_sp_step()


def llama_sp_step_norm_grads_unsynced():
    return _llama_sp_step(bugs={"sp_grads_unsynced"})


def _mqa_step(bugs=()):
    def inputs(sizes):
        shape = (sizes["seq"], sizes["batch"], mqa.HIDDEN)
        return {"x": torch.randn(*shape), "target": torch.randn(*shape)}

    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return SquaredError(mqa.Block(parallel=True))

    axes = {0: "seq", 1: "batch"}
    return Case(reference=lambda: SquaredError(mqa.Block()), implementation=implementation, inputs=inputs,
                dynamic={"x": axes, "target": axes}, finalize_grads=mqa.allreduce_replicated_kv_grads)


def mqa_tp():
    return _mqa_step()


def mqa_tp_kv_grad_unsynced():
    return _mqa_step(bugs={"mqa_kv_grad_unsynced"})


def _tied_step(bugs=()):
    def inputs(sizes):
        return {"input_ids": torch.randint(0, tied.VOCAB, (sizes["seq"], sizes["batch"]))}

    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return tied.TiedLm(parallel=True)

    return Case(reference=tied.TiedLm, implementation=implementation, inputs=inputs,
                dynamic={"input_ids": {0: "seq", 1: "batch"}})


def tied_tp():
    return _tied_step()


def tied_tp_head_without_f():
    return _tied_step(bugs={"tied_head_without_f"})
