"""A Llama decoder layer built from the Megatron-style layers of
tensor_parallel.py (q/k/v and gate/up column-parallel, o_proj and down_proj
row-parallel; rank r owns query heads and kv heads r*H/P ..), batch-first, with
the same parameter names as the Hugging Face-style reference in
modeling_llama_ref.py, which it is checked against.

Factories for `shardproof.torch export FILE.py:FACTORY --world-size P`
(P = 2 or 4: 8 query heads, 4 kv heads):
  llama_tp                the layer, tensor parallel             VERIFIED
  llama_tp_missing_g      down_proj's partial sums not reduced   REFUTED
"""
import torch
import torch.nn.functional as F
from torch import nn

import modeling_llama_ref as ref
import tensor_parallel as tp
from shardproof.torch import Case


class ParallelAttention(nn.Module):
    def __init__(self):
        super().__init__()
        world = tp.get_tensor_model_parallel_world_size()
        self.num_heads, self.num_kv_heads = ref.HEADS // world, ref.KV_HEADS // world
        self.head_dim = ref.HEAD_DIM
        self.q_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.HEADS * ref.HEAD_DIM, bias=False)
        self.k_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.KV_HEADS * ref.HEAD_DIM, bias=False)
        self.v_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.KV_HEADS * ref.HEAD_DIM, bias=False)
        self.o_proj = tp.RowParallelLinear(ref.HEADS * ref.HEAD_DIM, ref.HIDDEN, bias=False)
        self.rotary_emb = ref.LlamaRotaryEmbedding(ref.HEAD_DIM)

    def forward(self, x, position_ids):
        b, s, _ = x.size()
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, position_ids)
        q, k = ref.apply_rotary_pos_emb(q, k, cos, sin)
        k = ref.repeat_kv(k, self.num_heads // self.num_kv_heads)
        v = ref.repeat_kv(v, self.num_heads // self.num_kv_heads)
        scores = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim ** 0.5)
        scores = scores + torch.full((s, s), float("-inf")).triu(1)
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim))


class ParallelMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.FFN, bias=False)
        self.up_proj = tp.ColumnParallelLinear(ref.HIDDEN, ref.FFN, bias=False)
        self.down_proj = tp.RowParallelLinear(ref.FFN, ref.HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class ParallelDecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = ParallelAttention()
        self.mlp = ParallelMLP()
        self.input_layernorm = ref.LlamaRMSNorm(ref.HIDDEN)
        self.post_attention_layernorm = ref.LlamaRMSNorm(ref.HIDDEN)

    def forward(self, x):
        position_ids = torch.arange(x.size(1)).unsqueeze(0)
        x = x + self.self_attn(self.input_layernorm(x), position_ids)
        return x + self.mlp(self.post_attention_layernorm(x))


def _case(bugs=()):
    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        tp.BUGS.update(bugs)
        return ParallelDecoderLayer()

    axes = {0: "batch", 1: "seq"}
    return Case(reference=ref.LlamaDecoderLayer, implementation=implementation,
                inputs=lambda sizes: {"x": torch.randn(sizes["batch"], sizes["seq"], ref.HIDDEN)},
                dynamic={"x": axes, "y": axes})


def llama_tp():
    return _case()


def llama_tp_missing_g():
    return _case(bugs={"row_parallel_missing_g"})
