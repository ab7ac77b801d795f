"""Transformer layers written into a graph.Graph with the op patterns of the
PyTorch exports in tests/models/:

* GPT-2 block (tests/models/gpt.py, sp.py): LayerNormalization, q/k/v with
  bias, heads via view + transpose, causal mask from Trilu, Softmax,
  tanh-GELU written out, row-parallel layers all-reduced before their bias.
* Llama decoder layer (tests/models/llama.py): RMSNorm written out (Pow,
  ReduceMean, Sqrt, Div), rotary tables sliced from graph inputs cos/sin,
  rotate_half as Slice/Neg/Concat, GQA via HF repeat_kv (the dynamic Expand
  chain), SwiGLU, no biases.
* Vocab-parallel embedding (tests/models/vocab.py): masked lookup, then the
  rank's rows summed across ranks.

`Par` says how one graph is distributed: world size, rank, sequence
parallelism (AllGather along the sequence before column-parallel layers,
ReduceScatter along it after row-parallel ones, as sp.py does) and a bug to
inject in one layer.
"""
from dataclasses import dataclass
import math

import numpy as np

from graph import INT64_MAX

# Bugs the generators can inject into layer `Par.bug_layer`:
#   no_reduce   the row-parallel MLP output is never combined across ranks
#               (TP: no AllReduce; SP: ReduceScatter replaced by the rank's
#               own rows of its partial sum, as sp.py's "slice" bug)
#   swap_gate_up  (Llama) the last rank applies SiLU to up_proj instead of
#               gate_proj: the same ops in the same order, wired differently,
#               so the layer looks like its neighbours but for one edge
#   embed_unmasked  the vocab-parallel embedding never zeroes the rows of ids
#               outside the rank's vocab range (vocab.py's no_mask_output bug);
#               not a layer's bug: --bug-layer is ignored
BUGS = ("no_reduce", "swap_gate_up", "embed_unmasked")


@dataclass(frozen=True)
class Par:
    world: int = 1
    rank: int = 0
    sp: bool = False           # sequence parallelism (Megatron sequence_parallel)
    bug: str = ""              # one of BUGS, "" for none
    bug_layer: int = -1

    @property
    def ref(self):
        return self.world == 1

    def shard(self, n, what):
        if n % self.world:
            raise ValueError(f"{what} = {n} is not divisible by the world size {self.world}")
        return n // self.world


def weight(g, name, dims):
    if name not in {i.name for i in g.inputs}:
        g.input(name, dims)
    return name


def combine(g, scope, t, par, layer, what):
    """The row-parallel partial products combined across ranks (nothing on
    the reference); `what` names the site for bug injection."""
    if par.ref:
        return t
    buggy = par.bug == "no_reduce" and par.bug_layer == layer and what == "mlp"
    if not par.sp:
        return t if buggy else g.all_reduce(scope, t)
    if buggy:
        # The rank's rows of its own partial product, never reduced.
        n = g.op(scope, "Div", [g.dim(scope, t, 1), g.const(scope, par.world)])
        start = g.op(scope, "Mul", [n, g.const(scope, par.rank)])
        end = g.op(scope, "Mul", [n, g.const(scope, par.rank + 1)])
        return g.op(scope, "Slice", [t, g.unsqueeze0(scope, start), g.unsqueeze0(scope, end),
                                     g.const(scope, [1]), g.const(scope, [1])])
    return g.reduce_scatter(scope, t, 1, par.world)


def gather_seq(g, scope, t, par):
    return g.all_gather(scope, t, 1, par.world) if par.sp and not par.ref else t


# --- GPT-2 ------------------------------------------------------------------

def layer_norm(g, scope, pname, x, d):
    w = weight(g, f"{pname}.weight", [d])
    b = weight(g, f"{pname}.bias", [d])
    return g.op(scope, "LayerNormalization", [x, w, b], axis=-1, epsilon=1e-5)


def linear(g, scope, pname, x, d_in, d_out, bias=True):
    y = g.op(scope, "MatMul", [x, weight(g, f"{pname}.weight", [d_in, d_out])])
    if bias:
        y = g.op(scope, "Add", [y, weight(g, f"{pname}.bias", [d_out])])
    return y


def gpt_attention(g, scope, pname, x, cfg, par, layer):
    heads = par.shard(cfg.heads, "heads")
    hd = cfg.hidden // cfg.heads
    local = heads * hd
    x = gather_seq(g, scope, x, par)
    b = g.dim(scope, x, 0)
    one = g.const(scope, 1)
    s = g.dim(scope, x, 1)
    q = linear(g, f"{scope}/q_proj", f"{pname}.q_proj", x, cfg.hidden, local)
    k = linear(g, f"{scope}/k_proj", f"{pname}.k_proj", x, cfg.hidden, local)
    v = linear(g, f"{scope}/v_proj", f"{pname}.v_proj", x, cfg.hidden, local)
    q = g.transpose(scope, g.view(scope, q, [b, s, heads, hd]), [0, 2, 1, 3])
    k = g.view(scope, k, [b, s, heads, hd])
    v = g.transpose(scope, g.view(scope, v, [b, s, heads, hd]), [0, 2, 1, 3])
    kt = g.transpose(scope, k, [0, 2, 3, 1])
    att = g.op(scope, "MatMul", [q, kt])
    att = g.op(scope, "Div", [att, g.const(scope, math.sqrt(hd), np.float32)])
    att = g.op(scope, "Add", [att, g.causal_mask(scope, s, one)])
    o = g.op(scope, "MatMul", [g.op(scope, "Softmax", [att], axis=-1), v])
    o = g.view(scope, g.transpose(scope, o, [0, 2, 1, 3]), [b, s, local])
    y = g.op(f"{scope}/o_proj", "MatMul", [o, weight(g, f"{pname}.o_proj.weight", [local, cfg.hidden])])
    y = combine(g, f"{scope}/o_proj", y, par, layer, "attn")
    return g.op(f"{scope}/o_proj", "Add", [y, weight(g, f"{pname}.o_proj.bias", [cfg.hidden])])


def gelu_tanh(g, scope, x):
    """F.gelu(x, approximate="tanh") as the exporter writes it."""
    x3 = g.op(scope, "Mul", [x, g.op(scope, "Mul", [x, x])])
    inner = g.op(scope, "Add", [x, g.op(scope, "Mul", [g.const(scope, 0.044715, np.float32), x3])])
    t = g.op(scope, "Tanh", [g.op(scope, "Mul", [g.const(scope, math.sqrt(2 / math.pi), np.float32), inner])])
    t = g.op(scope, "Add", [g.const(scope, 1.0, np.float32), t])
    return g.op(scope, "Mul", [g.const(scope, 0.5, np.float32), g.op(scope, "Mul", [x, t])])


def gpt_mlp(g, scope, pname, x, cfg, par, layer):
    ff = par.shard(cfg.ff, "ff")
    x = gather_seq(g, scope, x, par)
    h = gelu_tanh(g, scope, linear(g, f"{scope}/fc", f"{pname}.fc", x, cfg.hidden, ff))
    y = g.op(f"{scope}/proj", "MatMul", [h, weight(g, f"{pname}.proj.weight", [ff, cfg.hidden])])
    y = combine(g, f"{scope}/proj", y, par, layer, "mlp")
    return g.op(f"{scope}/proj", "Add", [y, weight(g, f"{pname}.proj.bias", [cfg.hidden])])


def gpt_block(g, i, x, cfg, par):
    scope, pname = f"/blocks.{i}", f"blocks.{i}"
    a = gpt_attention(g, f"{scope}/attn", f"{pname}.attn", layer_norm(g, f"{scope}/ln_1", f"{pname}.ln_1", x,
                                                                      cfg.hidden), cfg, par, i)
    x = g.op(scope, "Add", [x, a])
    m = gpt_mlp(g, f"{scope}/mlp", f"{pname}.mlp", layer_norm(g, f"{scope}/ln_2", f"{pname}.ln_2", x, cfg.hidden),
                cfg, par, i)
    return g.op(scope, "Add", [x, m])


# --- Llama ------------------------------------------------------------------

def rms_norm(g, scope, pname, x, d, eps):
    """weight * (x * rsqrt(mean(x^2, -1) + eps)), as llama.py's RMSNorm exports."""
    var = g.op(scope, "ReduceMean", [g.op(scope, "Pow", [x, g.const(scope, 2.0, np.float32)])], axes=[-1],
               keepdims=1)
    var = g.op(scope, "Add", [var, g.const(scope, eps, np.float32)])
    inv = g.op(scope, "Div", [g.const(scope, 1.0, np.float32), g.op(scope, "Sqrt", [var])])
    return g.op(scope, "Mul", [weight(g, f"{pname}.weight", [d]), g.op(scope, "Mul", [x, inv])])


def rotary(g, scope, t, cos, sin, hd):
    """t * cos + rotate_half(t) * sin."""
    first = g.slice(scope, t, 0, hd // 2, 3)
    second = g.slice(scope, t, hd // 2, INT64_MAX, 3)
    rot = g.op(scope, "Concat", [g.op(scope, "Neg", [second]), first], axis=-1)
    return g.op(scope, "Add", [g.op(scope, "Mul", [t, cos]), g.op(scope, "Mul", [rot, sin])])


def repeat_kv(g, scope, t, n_rep):
    """HF repeat_kv: t[:, :, None].expand(b, kv, n_rep, s, hd).reshape(b, kv * n_rep, s, hd),
    with the exporter's dynamic Expand (-1 entries replaced by 1)."""
    b, kv, s, hd = (g.dim(scope, t, a) for a in range(4))
    u = g.op(scope, "Unsqueeze", [t, g.const(scope, [2])])
    target = g.shape_of(scope, [b, kv, n_rep, s, hd])
    flat = g.op(scope, "Reshape", [target, g.const(scope, [-1])], allowzero=0)
    ones = g.const_of_shape(scope, g.op(scope, "Shape", [flat]), 1, np.int64)
    neg = g.op(scope, "Mul", [ones, g.const(scope, -1)])
    fixed = g.op(scope, "Where", [g.op(scope, "Equal", [flat, neg]), ones, flat])
    e = g.op(scope, "Expand", [u, fixed])
    kvr = g.op(scope, "Mul", [kv, g.const(scope, n_rep)])
    return g.view(scope, e, [b, kvr, s, hd])


def llama_attention(g, scope, pname, x, cos, sin, cfg, par, layer):
    heads = par.shard(cfg.heads, "query heads")
    kv = par.shard(cfg.kv_heads, "kv heads")
    hd = cfg.head_dim
    x = gather_seq(g, scope, x, par)
    b = g.dim(scope, x, 0)
    s = g.dim(scope, x, 1)
    one = g.const(scope, 1)
    q = linear(g, f"{scope}/q_proj", f"{pname}.q_proj", x, cfg.hidden, heads * hd, bias=False)
    q = g.transpose(scope, g.view(scope, q, [b, s, heads, hd]), [0, 2, 1, 3])
    k = linear(g, f"{scope}/k_proj", f"{pname}.k_proj", x, cfg.hidden, kv * hd, bias=False)
    k = g.transpose(scope, g.view(scope, k, [b, s, kv, hd]), [0, 2, 1, 3])
    v = linear(g, f"{scope}/v_proj", f"{pname}.v_proj", x, cfg.hidden, kv * hd, bias=False)
    v = g.transpose(scope, g.view(scope, v, [b, s, kv, hd]), [0, 2, 1, 3])
    rs = f"{scope}/rotary_emb"
    c = g.slice(rs, cos, 0, None, 0, end_sym=s)
    sn = g.slice(rs, sin, 0, None, 0, end_sym=s)
    q, k = rotary(g, scope, q, c, sn, hd), rotary(g, scope, k, c, sn, hd)
    n_rep = heads // kv
    if n_rep > 1:
        k, v = repeat_kv(g, scope, k, n_rep), repeat_kv(g, scope, v, n_rep)
    att = g.op(scope, "MatMul", [q, g.transpose(scope, k, [0, 1, 3, 2])])
    att = g.op(scope, "Div", [att, g.const(scope, math.sqrt(hd), np.float32)])
    att = g.op(scope, "Add", [att, g.causal_mask(scope, s, one)])
    o = g.op(scope, "MatMul", [g.op(scope, "Softmax", [att], axis=-1), v])
    o = g.view(scope, g.transpose(scope, o, [0, 2, 1, 3]), [b, s, heads * hd])
    y = linear(g, f"{scope}/o_proj", f"{pname}.o_proj", o, heads * hd, cfg.hidden, bias=False)
    return combine(g, f"{scope}/o_proj", y, par, layer, "attn")


def llama_mlp(g, scope, pname, x, cfg, par, layer):
    ff = par.shard(cfg.ff, "intermediate size")
    x = gather_seq(g, scope, x, par)
    gate = linear(g, f"{scope}/gate_proj", f"{pname}.gate_proj", x, cfg.hidden, ff, bias=False)
    up = linear(g, f"{scope}/up_proj", f"{pname}.up_proj", x, cfg.hidden, ff, bias=False)
    if (par.bug == "swap_gate_up" and par.bug_layer == layer and not par.ref
            and par.rank == par.world - 1):
        gate, up = up, gate
    act = g.op(scope, "Mul", [gate, g.op(scope, "Sigmoid", [gate])])
    y = linear(g, f"{scope}/down_proj", f"{pname}.down_proj", g.op(scope, "Mul", [act, up]), ff, cfg.hidden,
               bias=False)
    return combine(g, f"{scope}/down_proj", y, par, layer, "mlp")


def llama_layer(g, i, x, cos, sin, cfg, par):
    scope, pname = f"/layers.{i}", f"layers.{i}"
    h = rms_norm(g, f"{scope}/input_layernorm", f"{pname}.input_layernorm", x, cfg.hidden, cfg.eps)
    x = g.op(scope, "Add", [x, llama_attention(g, f"{scope}/self_attn", f"{pname}.self_attn", h, cos, sin, cfg,
                                               par, i)])
    h = rms_norm(g, f"{scope}/post_attention_layernorm", f"{pname}.post_attention_layernorm", x, cfg.hidden,
                 cfg.eps)
    return g.op(scope, "Add", [x, llama_mlp(g, f"{scope}/mlp", f"{pname}.mlp", h, cfg, par, i)])


# --- vocab-parallel embedding and output layer ---------------------------------

def per_rank_rows(vocab, world):
    """Rows per rank of the vocab padded to a multiple of `world`."""
    return -(-vocab // world)


def embedding(g, scope, pname, ids, cfg, par):
    """Reference: Gather(table, ids). Ranks: Megatron's VocabParallelEmbedding
    (mask ids outside [start, end), look up, zero masked rows), then summed
    across ranks (AllReduce; ReduceScatter along the sequence under SP)."""
    if par.ref:
        return g.op(scope, "Gather", [weight(g, f"{pname}.weight", [cfg.vocab, cfg.hidden]), ids])
    rows = per_rank_rows(cfg.vocab, par.world)
    start, end = par.rank * rows, (par.rank + 1) * rows
    below = g.op(scope, "Less", [ids, g.const(scope, start)])
    above = g.op(scope, "GreaterOrEqual", [ids, g.const(scope, end)])
    mask = g.op(scope, "Or", [below, above])
    local = g.op(scope, "Sub", [ids, g.const(scope, start)])
    zeros = g.const_of_shape(scope, g.op(scope, "Shape", [local]), 0, np.int64)
    local = g.op(scope, "Where", [mask, zeros, local])
    out = g.op(scope, "Gather", [weight(g, f"{pname}.weight", [rows, cfg.hidden]), local])
    if par.bug != "embed_unmasked":
        m = g.op(scope, "Unsqueeze", [mask, g.const(scope, [-1])])
        fz = g.const_of_shape(scope, g.op(scope, "Shape", [out]), 0.0)
        out = g.op(scope, "Where", [m, fz, out])
    return g.reduce_scatter(scope, out, 1, par.world) if par.sp else g.all_reduce(scope, out)


def lm_head(g, scope, pname, x, cfg, par):
    """Column-parallel output layer: rank r computes its (padded) vocab slice
    of the logits; under SP the sequence is gathered first."""
    cols = cfg.vocab if par.ref else per_rank_rows(cfg.vocab, par.world)
    x = gather_seq(g, scope, x, par)
    return g.op(scope, "MatMul", [x, weight(g, f"{pname}.weight", [cfg.hidden, cols])])
