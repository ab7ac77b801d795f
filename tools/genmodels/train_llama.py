"""The training step of a Llama-3.1-405B-shaped language model, for tools/bench
(`tools/bench --train`): L decoder layers between a vocab-parallel embedding
and a column-parallel LM head with Megatron's vocab-parallel cross-entropy,
under tensor parallelism with sequence parallelism, against a plain
single-device reference written the way public modeling files are. The loss is
the sum of the per-token cross-entropy losses; the exported graphs output it
and every parameter's gradient (`shardproof.torch export --train`).

What is the 405B shape here: 126 layers, 128 query heads and 8 kv heads (16
query heads and 1 kv head per rank at TP8), RMSNorm, rotary, grouped-query
attention through repeat_kv, SwiGLU, the embedding's lookups reduce-scattered
along the sequence and the LM head's input all-gathered before it, the
RMSNorm weights' gradients all-reduced after backward (they saw only the
rank's sequence shard). What is NOT: the widths. torch materializes every
weight to trace the step (meta tensors do not export in torch 1.13), so the
head dim, hidden size, FFN size and vocabulary are scaled down (defaults:
head dim 2, hidden 256 = 128 x 2, FFN 832 = 3.25 x hidden as in 405B's
53248 / 16384, vocabulary 1024 instead of 128256); the bench says so.

Configuration (environment, read by the factory):
  TRAIN_LLAMA_LAYERS     decoder layers          (default 1)
  TRAIN_LLAMA_HEADS      query heads             (default 128)
  TRAIN_LLAMA_KV_HEADS   kv heads                (default 8)
  TRAIN_LLAMA_HEAD_DIM   head dim (even)         (default 2)
  TRAIN_LLAMA_FFN        SwiGLU width            (default 3.25 x hidden)
  TRAIN_LLAMA_VOCAB      vocabulary              (default 1024)
  TRAIN_LLAMA_SP         0: tensor parallelism without sequence parallelism (default 1)

  tools/shardproof-torch export tools/genmodels/train_llama.py:llama_sp_step --legacy --train --world-size 8 --out DIR

Parameters have the same names in the reference and on every rank
(embed_tokens.weight, layers.N.self_attn.q_proj.weight, ..., norm.weight,
lm_head.weight), so `grads: like_params` places each gradient.
Ids and labels are sequence-first [s, b] on both sides (as in
tests/models/megatron/gpt2_lm.py). The reference runs its Hugging Face-style
decoder layers batch-first (the embeddings transposed to [b, s, h] and back
before the final norm); the ranks run sequence-first [s, b, h] throughout, as
Megatron does. Status and figures: docs/performance.md, "Training step"
(one layer at TP8 + SP, the scaled widths: 11 to 12 s CPU; the forward alone,
exported without --train, 126 layers: 12 s CPU). Without sequence
parallelism (TRAIN_LLAMA_SP=0) one layer is VERIFIED at world 2, all 12
gradients, in 1.7 s CPU.
Other layouts measured at world 2 with tiny widths did worse: batch-first
ids with the rank transposing before its reduce-scatter, as Megatron's
embedding does, leave the reference lookup NO RELATION; a reference that
transposes the logits back before its cross-entropy leaves the cross-entropy's
backward NO RELATION.
"""
import dataclasses
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

_MEGATRON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models", "megatron")
sys.path.insert(0, os.path.normpath(_MEGATRON))
import modeling_llama_ref as hf  # noqa: E402  (RMSNorm, rotary, repeat_kv: width-free helpers)
import tensor_parallel as tp  # noqa: E402
from shardproof.torch import Case  # noqa: E402

sys.path.pop(0)


@dataclasses.dataclass(frozen=True)
class Config:
    layers: int = 1
    heads: int = 128
    kv_heads: int = 8
    head_dim: int = 2
    ffn: int = 0  # 0: 3.25 x hidden, 405B's ratio
    vocab: int = 1024
    sp: bool = True  # False: plain TP (all-reduces, every rank holds the whole sequence), for comparison

    @property
    def hidden(self):
        return self.heads * self.head_dim

    @property
    def ffn_size(self):
        return self.ffn or (self.hidden * 13) // 4

    @staticmethod
    def from_env():
        def get(name, default):
            return int(os.environ.get("TRAIN_LLAMA_" + name, default))
        return Config(layers=get("LAYERS", 1), heads=get("HEADS", 128), kv_heads=get("KV_HEADS", 8),
                      head_dim=get("HEAD_DIM", 2), ffn=get("FFN", 0), vocab=get("VOCAB", 1024), sp=bool(get("SP", 1)))

    def describe(self):
        return (f"{self.layers} layers, {self.heads} q / {self.kv_heads} kv heads of {self.head_dim}, "
                f"hidden {self.hidden}, FFN {self.ffn_size}, vocab {self.vocab}")


# --- reference: one device, Hugging Face-style decoder layers (batch-first) ----

class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim = c.heads, c.kv_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)
        self.rotary_emb = hf.LlamaRotaryEmbedding(c.head_dim)

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, position_ids)
        q, k = hf.apply_rotary_pos_emb(q, k, cos, sin)
        k = hf.repeat_kv(k, self.num_heads // self.num_key_value_heads)
        v = hf.repeat_kv(v, self.num_heads // self.num_key_value_heads)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim ** 0.5)
        attn_weights = attn_weights + torch.full((q_len, q_len), float("-inf")).triu(1)
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v)
        return self.o_proj(attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1))


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden, c.ffn_size, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.ffn_size, bias=False)
        self.down_proj = nn.Linear(c.ffn_size, c.hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = LlamaAttention(c)
        self.mlp = LlamaMLP(c)
        self.input_layernorm = hf.LlamaRMSNorm(c.hidden)
        self.post_attention_layernorm = hf.LlamaRMSNorm(c.hidden)

    def forward(self, hidden_states, position_ids):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), position_ids)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class LlamaForCausalLM(nn.Module):
    """Returns the summed per-token cross-entropy of `labels` (already shifted)."""

    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList([LlamaDecoderLayer(c) for _ in range(c.layers)])
        self.norm = hf.LlamaRMSNorm(c.hidden)
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)

    def forward(self, input_ids, labels):
        hidden_states = self.embed_tokens(input_ids).transpose(0, 1)  # [s, b] ids -> [b, s, h]
        position_ids = torch.arange(hidden_states.size(1)).unsqueeze(0)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_ids)
        logits = self.lm_head(self.norm(hidden_states.transpose(0, 1)))  # [s, b, V], like the labels
        losses = -torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).view_as(labels)
        return losses.sum()


# --- implementation: Megatron-style, TP + SP, sequence-first [s, b, h] -------

class ParallelAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        world = tp.get_tensor_model_parallel_world_size()
        self.num_heads, self.num_kv_heads = tp.divide(c.heads, world), tp.divide(c.kv_heads, world)
        self.head_dim = c.head_dim
        self.q_proj = tp.ColumnParallelLinear(c.hidden, c.heads * c.head_dim, bias=False, sequence_parallel=c.sp)
        self.k_proj = tp.ColumnParallelLinear(c.hidden, c.kv_heads * c.head_dim, bias=False, sequence_parallel=c.sp)
        self.v_proj = tp.ColumnParallelLinear(c.hidden, c.kv_heads * c.head_dim, bias=False, sequence_parallel=c.sp)
        self.o_proj = tp.RowParallelLinear(c.heads * c.head_dim, c.hidden, bias=False, sequence_parallel=c.sp)
        self.rotary_emb = hf.LlamaRotaryEmbedding(c.head_dim)

    def heads(self, t, n):  # [s, b, n * d] -> [b, n, s, d]
        return t.view(t.size(0), t.size(1), n, self.head_dim).permute(1, 2, 0, 3)

    def forward(self, x, position_ids):
        q = self.heads(self.q_proj(x), self.num_heads)
        k = self.heads(self.k_proj(x), self.num_kv_heads)
        v = self.heads(self.v_proj(x), self.num_kv_heads)
        b, s = q.size(0), q.size(2)
        cos, sin = self.rotary_emb(v, position_ids)
        q, k = hf.apply_rotary_pos_emb(q, k, cos, sin)
        k = hf.repeat_kv(k, self.num_heads // self.num_kv_heads)
        v = hf.repeat_kv(v, self.num_heads // self.num_kv_heads)
        scores = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim ** 0.5)
        scores = scores + torch.full((s, s), float("-inf")).triu(1)
        out = torch.matmul(F.softmax(scores, dim=-1), v)  # [b, n, s, d] -> [s, b, n * d]
        return self.o_proj(out.permute(2, 0, 1, 3).reshape(s, b, self.num_heads * self.head_dim))


class ParallelMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = tp.ColumnParallelLinear(c.hidden, c.ffn_size, bias=False, sequence_parallel=c.sp)
        self.up_proj = tp.ColumnParallelLinear(c.hidden, c.ffn_size, bias=False, sequence_parallel=c.sp)
        self.down_proj = tp.RowParallelLinear(c.ffn_size, c.hidden, bias=False, sequence_parallel=c.sp)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class ParallelDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = ParallelAttention(c)
        self.mlp = ParallelMLP(c)
        self.input_layernorm = hf.LlamaRMSNorm(c.hidden)
        self.post_attention_layernorm = hf.LlamaRMSNorm(c.hidden)

    def forward(self, x, position_ids):
        x = x + self.self_attn(self.input_layernorm(x), position_ids)
        return x + self.mlp(self.post_attention_layernorm(x))


class SequenceParallelEmbedding(tp.VocabParallelEmbedding):
    """Megatron's VocabParallelEmbedding with reduce_scatter_embeddings: the
    masked lookups [s, b, h] are reduce-scattered along the sequence instead
    of all-reduced."""

    def forward(self, input_):
        input_mask = (input_ < self.vocab_start_index) | (input_ >= self.vocab_end_index)
        masked_input = input_.clone() - self.vocab_start_index
        masked_input[input_mask] = 0
        output_parallel = F.embedding(masked_input, self.weight)
        output_parallel = output_parallel.masked_fill(input_mask.unsqueeze(-1), 0.0)  # as in tensor_parallel.py
        return tp.reduce_scatter_to_sequence_parallel_region(output_parallel)


class ParallelLlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        embedding = SequenceParallelEmbedding if c.sp else tp.VocabParallelEmbedding
        self.embed_tokens = embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList([ParallelDecoderLayer(c) for _ in range(c.layers)])
        self.norm = hf.LlamaRMSNorm(c.hidden)
        self.lm_head = tp.ColumnParallelLinear(c.hidden, c.vocab, bias=False, sequence_parallel=c.sp)

    def forward(self, input_ids, labels):
        x = self.embed_tokens(input_ids)  # [s/P, b, h]
        # Rotary positions count the whole (gathered) sequence, whose ids every rank holds.
        position_ids = torch.arange(input_ids.size(0)).unsqueeze(0)
        for layer in self.layers:
            x = layer(x, position_ids)
        logits_parallel = self.lm_head(self.norm(x))  # all-gathered: [s, b, V/P]
        return tp.vocab_parallel_cross_entropy(logits_parallel, labels).sum()  # per-token losses [s, b]


def allreduce_norm_grads(module):
    """After backward: every RMSNorm ran on the rank's sequence shard, so its
    weight's gradient is a partial sum (Megatron-LM #1446): sum it over the
    tensor-parallel ranks, as Megatron's finalize_model_grads does."""
    for name, p in module.named_parameters():
        if name.endswith("norm.weight") and p.grad is not None:
            torch.distributed.all_reduce(p.grad, group=tp.get_tensor_model_parallel_group())


def llama_sp_step(config=None):
    c = config or Config.from_env()

    def implementation():
        tp.reset_groups()
        tp.BUGS.clear()
        return ParallelLlamaForCausalLM(c)

    def inputs(sizes):
        shape = (sizes["seq"], sizes["batch"])
        return {"input_ids": torch.randint(0, c.vocab, shape), "labels": torch.randint(0, c.vocab, shape)}

    axes = {0: "seq", 1: "batch"}
    # Only the sequence is split: the batch stays small (the default makes it a
    # multiple of P too, and tracing the step holds a per-example weight
    # gradient in every linear: 9 GB at 126 layers, TP8). No size is a
    # multiple of another across the three exports (batch 2, 3, 4; seq 3P,
    # 4P, 5P), so sizes.py can tell which one a number is.
    sizes = lambda p: [{"seq": 3 * p, "batch": 2}, {"seq": 4 * p, "batch": 3}]
    return Case(reference=lambda: LlamaForCausalLM(c), implementation=implementation, inputs=inputs,
                dynamic={"input_ids": axes, "labels": axes}, sizes=sizes,
                finalize_grads=allreduce_norm_grads if c.sp else None)
