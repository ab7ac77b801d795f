"""The GPT-2 block of gpt.py under Megatron sequence parallelism plus tensor
parallelism, and a version of that block with its own head count (gpt.py
fixes HEADS = 4; tp8.py needs 8 heads for 8 ranks).

Sequence parallelism (Korthikanti et al., Megatron-LM `sequence_parallel`):
the residual stream is sharded along the sequence axis, rank r holding rows
r*seq/P .. (r+1)*seq/P - 1. LayerNorms run on the sequence shard (they are
per token, so nothing is communicated). Before the column-parallel q/k/v (and
fc) an AllGather along the sequence axis rebuilds the whole sequence; after
the row-parallel o_proj (and proj) a ReduceScatter along the sequence axis
sums the partial products and hands each rank its rows back, replacing
tensor parallelism's all-reduce; the biases of those row-parallel layers are
added after the reduce-scatter, on the sequence shard.

The reference is gpt.py's plain block (gpt_ref.onnx, 4 heads) or this file's
Block(heads=8) (tp8.py). Parameter names equal gpt.py's (ln_1.weight,
attn.q_proj.weight, ...), so the same specs' weight placements apply.

Rank graphs name the sequence axis of x `seq_local` (the shard's length): a
dim_param is one symbol across all graphs, so the rank's rows cannot be called
`seq`; the specs tie the two with `seq == P * seq_local`.

Bug variants (`Layout`): the AllGather/ReduceScatter on the batch axis
(Megatron's sequence-parallel helpers work on dim 0 because Megatron keeps
activations [seq, batch, hidden]; called on batch-first tensors they gather
and scatter the batch); o_proj's partial sums sliced to the rank's rows with
no reduction; ln_1 treated as a tensor-parallel layer (weight and bias sharded
along hidden, each rank normalizing only its hidden slice).
"""
from dataclasses import dataclass

import torch
from torch import nn

import gpt
from collectives import all_gather, all_reduce, reduce_scatter
from export import export

D_MODEL, D_FF = gpt.D_MODEL, gpt.D_FF
REF_DYNAMIC = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
SP_DYNAMIC = {"x": {0: "batch", 1: "seq_local"}, "y": {0: "batch", 1: "seq_local"}}


@dataclass(frozen=True)
class Layout:
    """How a rank distributes the block. The defaults are Megatron's sequence
    parallelism; `seq_parallel=False` is plain tensor parallelism (replicated
    residual stream, all-reduce after row-parallel layers)."""
    seq_parallel: bool = True
    comm_axis: int = 1                # axis of AllGather/ReduceScatter; 0 is the batch-axis bug
    attn_reduce_scatter: bool = True  # False: o_proj's partial sums sliced to the rank's rows, never reduced
    ln_1_hidden_shard: bool = False   # True: ln_1 normalizes the rank's hidden slice with a sharded weight


SP = Layout()
TP = Layout(seq_parallel=False)


class RowParallelLinear(gpt.Linear):
    """x @ weight, the partial products combined across ranks, then + bias:
    all-reduce (tensor parallel), reduce-scatter along `axis` (sequence
    parallel) or, as a bug, the rank's rows of its own partial product."""

    def __init__(self, d_in, d_out, world, rank, combine, axis=1):
        super().__init__(d_in, d_out)
        self.world, self.rank, self.combine, self.axis = world, rank, combine, axis

    def forward(self, x):
        y = torch.matmul(x, self.weight)
        if self.combine == "all_reduce":
            y = all_reduce(y)
        elif self.combine == "reduce_scatter":
            y = reduce_scatter(y, self.axis, self.world)
        elif self.combine == "slice":
            n = y.shape[1] // self.world
            y = y[:, self.rank * n:(self.rank + 1) * n]
        return y + self.bias


def _combine(world, layout, reduce_scatter_ok=True):
    if world == 1:
        return None
    if not layout.seq_parallel:
        return "all_reduce"
    return "reduce_scatter" if reduce_scatter_ok else "slice"


class Attention(gpt.Attention):
    """gpt.Attention with a head count of its own and a sequence-parallel
    AllGather in front; forward and the head reshapes are gpt.Attention's."""

    def __init__(self, heads, world=1, rank=0, layout=SP):
        nn.Module.__init__(self)
        self.local_heads = heads // world
        self.hd = D_MODEL // heads
        self.local = local = self.local_heads * self.hd
        self.opts = gpt.Options()
        self.gather = world > 1 and layout.seq_parallel
        self.world, self.axis = world, layout.comm_axis
        self.q_proj = gpt.Linear(D_MODEL, local)
        self.k_proj = gpt.Linear(D_MODEL, local)
        self.v_proj = gpt.Linear(D_MODEL, local)
        self.o_proj = RowParallelLinear(local, D_MODEL, world, rank,
                                        _combine(world, layout, layout.attn_reduce_scatter), layout.comm_axis)

    def forward(self, x):
        if self.gather:
            x = all_gather(x, self.axis, self.world)
        return super().forward(x)


class Mlp(gpt.Mlp):
    def __init__(self, world=1, rank=0, layout=SP):
        nn.Module.__init__(self)
        self.gather = world > 1 and layout.seq_parallel
        self.world, self.axis = world, layout.comm_axis
        self.fc = gpt.Linear(D_MODEL, D_FF // world)
        self.proj = RowParallelLinear(D_FF // world, D_MODEL, world, rank, _combine(world, layout),
                                      layout.comm_axis)

    def forward(self, x):
        if self.gather:
            x = all_gather(x, self.axis, self.world)
        return super().forward(x)


class HiddenShardLayerNorm(gpt.LayerNorm):
    """Bug: a LayerNorm handled like a tensor-parallel layer. Its weight and
    bias are sharded along hidden, the rank normalizes only its hidden slice
    (mean and variance over D_MODEL/P columns instead of D_MODEL) and the
    slices are gathered back along hidden."""

    def __init__(self, world, rank):
        super().__init__(D_MODEL // world)
        self.world, self.rank = world, rank

    def forward(self, x):
        k = D_MODEL // self.world
        h = super().forward(x[..., self.rank * k:(self.rank + 1) * k])
        return all_gather(h, 2, self.world)


class Block(gpt.Block):
    """gpt.Block (same forward, same parameter names) for `heads` heads on
    rank `rank` of `world` under `layout`; world 1 is the reference."""

    def __init__(self, heads=gpt.HEADS, world=1, rank=0, layout=SP):
        nn.Module.__init__(self)
        if world > 1 and layout.ln_1_hidden_shard:
            self.ln_1 = HiddenShardLayerNorm(world, rank)
        else:
            self.ln_1 = gpt.LayerNorm(D_MODEL)
        self.attn = Attention(heads, world, rank, layout)
        self.ln_2 = gpt.LayerNorm(D_MODEL)
        self.mlp = Mlp(world, rank, layout)


def export_block(module, path, seq_parallel, batch=2, seq=3):
    """Exports `module`; under sequence parallelism x holds `seq` local rows.
    The example input draws on its own generator, so the example size does
    not shift the weights of later modules."""
    x = torch.randn(batch, seq, D_MODEL, generator=torch.Generator().manual_seed(0))
    export(module, (x,), ["x"], ["y"],
           SP_DYNAMIC if seq_parallel else REF_DYNAMIC, path)


def generate(out, batch=2, seq=3):
    """Writes the sequence-parallel ranks into `out` (the reference is
    gpt.py's gpt_ref.onnx). Seeded on a forked RNG: these files do not
    depend on, or shift, what other generators draw."""
    with torch.random.fork_rng():
        torch.manual_seed(3)
        _generate(out, batch, seq)


def _generate(out, batch, seq):
    def ranks(name, world, layout):
        for r in range(world):
            export_block(Block(gpt.HEADS, world, r, layout), f"{out}/sp_{name}_rank{r}.onnx", True, batch, seq)

    for world in (2, 4):
        ranks(f"tp{world}", world, SP)
    ranks("batch_axis", 2, Layout(comm_axis=0))
    ranks("no_reduce_scatter", 2, Layout(attn_reduce_scatter=False))
    ranks("ln_hidden_shard", 2, Layout(ln_1_hidden_shard=True))
