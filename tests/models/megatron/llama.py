"""A Llama decoder layer built from the Megatron-style layers of
tensor_parallel.py (q/k/v and gate/up column-parallel, o_proj and down_proj
row-parallel; rank r owns query heads and kv heads r*H/P ..), batch-first, with
the same parameter names as the Hugging Face-style reference in
modeling_llama_ref.py, which it is checked against.

Factories for `shardproof.torch export FILE.py:FACTORY --world-size P`
(P = 2 or 4: 8 query heads, 4 kv heads):
  llama_tp                the layer, tensor parallel             VERIFIED
  llama_sp                tensor + sequence parallel: each rank  VERIFIED
                          holds a sequence shard; the norms run
                          on it, column-parallel layers
                          all-gather, row-parallel ones
                          reduce-scatter (Megatron's layout is
                          sequence-first inside the layer)
  llama_tp_missing_g      o_proj's partial sums not reduced      REFUTED
"""
import torch
import torch.nn.functional as F
from torch import nn

import modeling_llama_ref as ref
import tensor_parallel as tp
from shardproof.torch import Case


class ParallelAttention(nn.Module):
    """Batch-first, or sequence-first [s, b, h] under sequence parallelism."""

    def __init__(self, sequence_parallel=False):
        super().__init__()
        self.sp = sequence_parallel
        world = tp.get_tensor_model_parallel_world_size()
        self.num_heads, self.num_kv_heads = ref.HEADS // world, ref.KV_HEADS // world
        self.head_dim = ref.HEAD_DIM
        sp = sequence_parallel
        self.q_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.HEADS * ref.HEAD_DIM, bias=False, sequence_parallel=sp)
        self.k_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.KV_HEADS * ref.HEAD_DIM, bias=False,
                                              sequence_parallel=sp)
        self.v_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.KV_HEADS * ref.HEAD_DIM, bias=False,
                                              sequence_parallel=sp)
        self.o_proj = tp.RowParallelLinear(ref.HEADS * ref.HEAD_DIM, ref.HIDDEN, bias=False, sequence_parallel=sp)
        self.rotary_emb = ref.LlamaRotaryEmbedding(ref.HEAD_DIM)

    def heads(self, t, n):
        if self.sp:  # [s, b, n * d] -> [b, n, s, d]
            return t.view(t.size(0), t.size(1), n, self.head_dim).permute(1, 2, 0, 3)
        return t.view(t.size(0), t.size(1), n, self.head_dim).transpose(1, 2)

    def forward(self, x, position_ids):
        q = self.heads(self.q_proj(x), self.num_heads)
        k = self.heads(self.k_proj(x), self.num_kv_heads)
        v = self.heads(self.v_proj(x), self.num_kv_heads)
        b, s = q.size(0), q.size(2)
        cos, sin = self.rotary_emb(v, position_ids)
        q, k = ref.apply_rotary_pos_emb(q, k, cos, sin)
        k = ref.repeat_kv(k, self.num_heads // self.num_kv_heads)
        v = ref.repeat_kv(v, self.num_heads // self.num_kv_heads)
        scores = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim ** 0.5)
        scores = scores + torch.full((s, s), float("-inf")).triu(1)
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        if self.sp:  # [b, n, s, d] -> [s, b, n * d]
            return self.o_proj(out.permute(2, 0, 1, 3).reshape(s, b, self.num_heads * self.head_dim))
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim))


class ParallelMLP(nn.Module):
    def __init__(self, sequence_parallel=False):
        super().__init__()
        sp = sequence_parallel
        self.gate_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.FFN, bias=False, sequence_parallel=sp)
        self.up_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.FFN, bias=False, sequence_parallel=sp)
        self.down_proj = tp.RowParallelLinear(ref.FFN, ref.HIDDEN, bias=False, sequence_parallel=sp)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class ParallelDecoderLayer(nn.Module):
    def __init__(self, sequence_parallel=False):
        super().__init__()
        self.sp = sequence_parallel
        self.self_attn = ParallelAttention(sequence_parallel)
        self.mlp = ParallelMLP(sequence_parallel)
        self.input_layernorm = ref.LlamaRMSNorm(ref.HIDDEN)
        self.post_attention_layernorm = ref.LlamaRMSNorm(ref.HIDDEN)

    def forward(self, x):
        if self.sp:
            # [b, s/P, h] -> [s/P, b, h]; positions count the whole gathered sequence.
            x = x.transpose(0, 1)
            position_ids = torch.arange(x.size(0) * tp.get_tensor_model_parallel_world_size()).unsqueeze(0)
        else:
            position_ids = torch.arange(x.size(1)).unsqueeze(0)
        x = x + self.self_attn(self.input_layernorm(x), position_ids)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x.transpose(0, 1) if self.sp else x


def _case(bugs=(), sequence_parallel=False):
    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return ParallelDecoderLayer(sequence_parallel)

    def inputs(sizes):
        return {"x": torch.randn(sizes["batch"], sizes["seq"], ref.HIDDEN)}

    axes = {0: "batch", 1: "seq"}
    if not sequence_parallel:
        return Case(reference=ref.LlamaDecoderLayer, implementation=implementation, inputs=inputs,
                    dynamic={"x": axes, "y": axes})
    local = {0: "batch", 1: "seq_local"}
    return Case(reference=ref.LlamaDecoderLayer, implementation=implementation, inputs=inputs,
                rank_inputs=lambda sizes, r, p: {"x": torch.chunk(inputs(sizes)["x"], p, dim=1)[r]},
                dynamic={"x": axes, "y": axes}, rank_dynamic={"x": local, "y": local})


def llama_tp():
    return _case()


def llama_sp():
    return _case(sequence_parallel=True)


def llama_tp_missing_g():
    return _case(bugs={"row_parallel_missing_g"})
