"""Megatron-style tensor-parallel layers, written against torch.distributed the
way Megatron-LM's megatron/core/tensor_parallel writes them (mappings with the
f/g autograd Functions, column- and row-parallel linears, sequence-parallel
regions, vocab-parallel embedding and cross-entropy). This is *user code*: it
knows nothing of shardproof, and shardproof.torch captures it by intercepting
torch.distributed. Activations are sequence-first, [s, b, h], as in Megatron.

`BUGS` switches on realistic mistakes for the demonstrations (a missing `g` in
the row-parallel layer, an embedding that does not zero the rows of ids
outside its shard); all off by default.
"""
import math

import torch
import torch.distributed
import torch.nn.functional as F
from torch import nn

BUGS = set()

_TP_GROUP = None


def get_tensor_model_parallel_group():
    global _TP_GROUP
    if _TP_GROUP is None:
        _TP_GROUP = torch.distributed.new_group(ranks=list(range(torch.distributed.get_world_size())))
    return _TP_GROUP


def reset_groups():
    global _TP_GROUP
    _TP_GROUP = None


def get_tensor_model_parallel_world_size():
    return torch.distributed.get_world_size(group=get_tensor_model_parallel_group())


def get_tensor_model_parallel_rank():
    return torch.distributed.get_rank(group=get_tensor_model_parallel_group())


def divide(numerator, denominator):
    assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
    return numerator // denominator


# --- mappings (megatron/core/tensor_parallel/mappings.py) -------------------

def _reduce(input_):
    """All-reduce the input tensor across the model parallel group."""
    if get_tensor_model_parallel_world_size() == 1:
        return input_
    torch.distributed.all_reduce(input_, group=get_tensor_model_parallel_group())
    return input_


def _split_along_last_dim(input_):
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    last_dim = input_.dim() - 1
    last_dim_size = divide(input_.size()[last_dim], world_size)
    input_list = torch.split(input_, last_dim_size, dim=last_dim)
    return input_list[get_tensor_model_parallel_rank()].contiguous()


def _split_along_first_dim(input_):
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    dim_size = input_.size()[0]
    local_dim_size = dim_size // world_size
    dim_offset = get_tensor_model_parallel_rank() * local_dim_size
    return input_[dim_offset:dim_offset + local_dim_size].contiguous()


def _gather_along_last_dim(input_):
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    last_dim = input_.dim() - 1
    rank = get_tensor_model_parallel_rank()
    tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
    tensor_list[rank] = input_
    torch.distributed.all_gather(tensor_list, input_, group=get_tensor_model_parallel_group())
    return torch.cat(tensor_list, dim=last_dim).contiguous()


def _gather_along_first_dim(input_):
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
    torch.distributed._all_gather_base(output, input_.contiguous(), group=get_tensor_model_parallel_group())
    return output


def _reduce_scatter_along_first_dim(input_):
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] // world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
    torch.distributed._reduce_scatter_base(output, input_.contiguous(), group=get_tensor_model_parallel_group())
    return output


class _CopyToModelParallelRegion(torch.autograd.Function):
    """f: identity forward, all-reduce backward."""

    @staticmethod
    def symbolic(graph, input_):
        return input_

    @staticmethod
    def forward(ctx, input_):
        return input_

    @staticmethod
    def backward(ctx, grad_output):
        if "f_backward_without_all_reduce" in BUGS:
            return grad_output  # the input gradient keeps only this rank's part
        return _reduce(grad_output)


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def symbolic(graph, input_):
        return _reduce(input_)

    @staticmethod
    def forward(ctx, input_):
        return _reduce(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class _GatherFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def symbolic(graph, input_):
        return _gather_along_last_dim(input_)

    @staticmethod
    def forward(ctx, input_):
        return _gather_along_last_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _split_along_last_dim(grad_output)


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def symbolic(graph, input_):
        return _gather_along_first_dim(input_)

    @staticmethod
    def forward(ctx, input_):
        return _gather_along_first_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _reduce_scatter_along_first_dim(grad_output)


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def symbolic(graph, input_):
        return _reduce_scatter_along_first_dim(input_)

    @staticmethod
    def forward(ctx, input_):
        return _reduce_scatter_along_first_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_along_first_dim(grad_output)


def copy_to_tensor_model_parallel_region(input_):
    return _CopyToModelParallelRegion.apply(input_)


def reduce_from_tensor_model_parallel_region(input_):
    return _ReduceFromModelParallelRegion.apply(input_)


def gather_from_tensor_model_parallel_region(input_):
    return _GatherFromModelParallelRegion.apply(input_)


def gather_from_sequence_parallel_region(input_):
    return _GatherFromSequenceParallelRegion.apply(input_)


def reduce_scatter_to_sequence_parallel_region(input_):
    return _ReduceScatterToSequenceParallelRegion.apply(input_)


# --- layers (megatron/core/tensor_parallel/layers.py) -----------------------

class ColumnParallelLinear(nn.Module):
    """Y = XA + b with A split by columns: rank r holds A's output rows
    [r * out/P, (r+1) * out/P) (weights stored [out, in], as torch does)."""

    def __init__(self, input_size, output_size, bias=True, gather_output=False, sequence_parallel=False):
        super().__init__()
        world_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = divide(output_size, world_size)
        self.gather_output = gather_output
        self.sequence_parallel = sequence_parallel
        self.weight = nn.Parameter(torch.empty(self.output_size_per_partition, input_size))
        nn.init.normal_(self.weight, std=1 / math.sqrt(input_size))
        self.bias = nn.Parameter(torch.empty(self.output_size_per_partition).uniform_(-0.1, 0.1)) if bias else None

    def forward(self, input_):
        if self.sequence_parallel:
            input_parallel = gather_from_sequence_parallel_region(input_)
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)
        output_parallel = F.linear(input_parallel, self.weight, self.bias)
        if self.gather_output:
            return gather_from_tensor_model_parallel_region(output_parallel)
        return output_parallel


class RowParallelLinear(nn.Module):
    """Y = XA + b with A split by rows: rank r holds A's input columns; the
    partial products are all-reduced (or reduce-scattered under sequence
    parallelism) before the bias, which every rank holds whole."""

    def __init__(self, input_size, output_size, bias=True, input_is_parallel=True, sequence_parallel=False):
        super().__init__()
        world_size = get_tensor_model_parallel_world_size()
        self.input_size_per_partition = divide(input_size, world_size)
        self.input_is_parallel = input_is_parallel
        self.sequence_parallel = sequence_parallel
        self.weight = nn.Parameter(torch.empty(output_size, self.input_size_per_partition))
        nn.init.normal_(self.weight, std=1 / math.sqrt(input_size))
        self.bias = nn.Parameter(torch.empty(output_size).uniform_(-0.1, 0.1)) if bias else None

    def forward(self, input_):
        output_parallel = F.linear(input_, self.weight)
        if self.sequence_parallel:
            output_ = reduce_scatter_to_sequence_parallel_region(output_parallel)
        elif "row_parallel_missing_g" in BUGS:
            output_ = output_parallel  # the g (all-reduce) was forgotten
        else:
            output_ = reduce_from_tensor_model_parallel_region(output_parallel)
        return output_ + self.bias if self.bias is not None else output_


class VocabParallelEmbedding(nn.Module):
    """Rank r holds rows [r * V/P, (r+1) * V/P) of the table; ids outside are
    masked to 0 and their rows zeroed, then the lookups are all-reduced."""

    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        world_size = get_tensor_model_parallel_world_size()
        rank = get_tensor_model_parallel_rank()
        per_partition = divide(num_embeddings, world_size)
        self.vocab_start_index = rank * per_partition
        self.vocab_end_index = self.vocab_start_index + per_partition
        self.weight = nn.Parameter(torch.randn(per_partition, embedding_dim))

    def forward(self, input_):
        if get_tensor_model_parallel_world_size() > 1:
            input_mask = (input_ < self.vocab_start_index) | (input_ >= self.vocab_end_index)
            masked_input = input_.clone() - self.vocab_start_index
            masked_input[input_mask] = 0
        else:
            masked_input = input_
        output_parallel = F.embedding(masked_input, self.weight)
        if get_tensor_model_parallel_world_size() > 1 and "embedding_no_output_mask" not in BUGS:
            # Megatron writes output_parallel[input_mask, :] = 0.0; torch 1.13
            # exports that boolean index_put as NonZero/If/ScatterND, which the
            # prover does not read (UNKNOWN naming the If node). masked_fill is
            # the same assignment and exports as a Where.
            output_parallel = output_parallel.masked_fill(input_mask.unsqueeze(-1), 0.0)
        return reduce_from_tensor_model_parallel_region(output_parallel)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron's vocab-parallel cross-entropy: the max and the exp-sum are
    all-reduced over the vocab shards, and the target's logit comes from the
    rank that owns it. (Megatron picks the target logit with
    logits_2d[arange, masked_target]; torch.gather on the last axis is the same
    element and exports to a plain GatherElements.)"""

    @staticmethod
    def forward(ctx, vocab_parallel_logits, target):
        logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
        torch.distributed.all_reduce(logits_max, op=torch.distributed.ReduceOp.MAX,
                                     group=get_tensor_model_parallel_group())
        vocab_parallel_logits = vocab_parallel_logits - logits_max.unsqueeze(dim=-1)
        partition_vocab_size = vocab_parallel_logits.size()[-1]
        rank = get_tensor_model_parallel_rank()
        vocab_start_index = rank * partition_vocab_size
        vocab_end_index = vocab_start_index + partition_vocab_size
        target_mask = (target < vocab_start_index) | (target >= vocab_end_index)
        masked_target = target.clone() - vocab_start_index
        masked_target[target_mask] = 0
        predicted_logits = torch.gather(vocab_parallel_logits, -1, masked_target.unsqueeze(-1)).view_as(target)
        predicted_logits = predicted_logits.masked_fill(target_mask, 0.0)  # Megatron: predicted_logits[target_mask] = 0.0
        torch.distributed.all_reduce(predicted_logits, group=get_tensor_model_parallel_group())
        exp_logits = torch.exp(vocab_parallel_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        torch.distributed.all_reduce(sum_exp_logits, group=get_tensor_model_parallel_group())
        ctx.save_for_backward(exp_logits / sum_exp_logits.unsqueeze(-1), target_mask, masked_target)
        return torch.log(sum_exp_logits) - predicted_logits

    @staticmethod
    def backward(ctx, grad_output):
        # Megatron: softmax minus one at the target's column on the rank that
        # owns it, times the incoming gradient.
        softmax, target_mask, masked_target = ctx.saved_tensors
        columns = torch.arange(softmax.size(-1))
        hot = (masked_target.unsqueeze(-1) == columns).to(softmax.dtype)
        if "ce_backward_ignores_target_mask" not in BUGS:
            hot = hot * (~target_mask).unsqueeze(-1).to(softmax.dtype)
        return (softmax - hot) * grad_output.unsqueeze(-1), None


def vocab_parallel_cross_entropy(vocab_parallel_logits, target):
    return _VocabParallelCrossEntropy.apply(vocab_parallel_logits, target)
