"""Eight-rank fixtures, exported without touching the files mlp.py and gpt.py
write:

* the MLP of mlp.py under Megatron tensor parallelism on 8 ranks (hidden 16,
  two columns of w1 / rows of w2 per rank): mlp_tp8_rank{r}.onnx, reference
  mlp_ref.onnx;
* a GPT-2 block with 8 heads (gpt.py's has 4, too few for 8 ranks; sp.Block
  takes a head count) as its own reference gpt8h_ref.onnx, under tensor
  parallelism on 8 ranks (one head per rank, gpt8h_tp8_rank{r}.onnx) and
  under sequence plus tensor parallelism on 8 ranks (gpt8h_sp8_rank{r}.onnx);
* gpt.py's block with a fused QKV projection and 8 heads of size 2
  (gpt8h_fused_ref.onnx) on 8 ranks, one head per rank, each rank's fused
  weight [q_r | k_r | v_r] (gpt8h_fused_tp8_rank{r}.onnx).
"""
import torch

import gpt
import mlp
import sp

HEADS = 8


def generate(out, batch=2, seq=3):
    """Writes the 8-rank models into `out`. `seq` is the example length of
    a sequence-parallel rank's shard (the other graphs use seq + 2). Seeded
    on a forked RNG: these files do not depend on, or shift, what other
    generators draw."""
    with torch.random.fork_rng():
        torch.manual_seed(8)
        _generate(out, batch, seq)


def _generate(out, batch, seq):
    world = 8
    k = 16 // world
    for r in range(world):
        with torch.random.fork_rng():  # example values must not shift later weights
            args = mlp._args(k, k, batch, seq + 2)
        mlp._export(mlp.Mlp(fc2=mlp.Fc2(reduce=True)), args, f"{out}/mlp_tp8_rank{r}.onnx")

    sp.export_block(sp.Block(HEADS), f"{out}/gpt8h_ref.onnx", False, batch, seq + 2)
    for r in range(world):
        sp.export_block(sp.Block(HEADS, world, r, sp.TP), f"{out}/gpt8h_tp8_rank{r}.onnx", False, batch, seq + 2)
        sp.export_block(sp.Block(HEADS, world, r, sp.SP), f"{out}/gpt8h_sp8_rank{r}.onnx", True, batch, seq)

    with gpt.heads(HEADS):
        fused = gpt.Options(fused_qkv=True)
        gpt._export(gpt.Block(1, fused), f"{out}/gpt8h_fused_ref.onnx")
        for r in range(world):
            gpt._export(gpt.Block(world, fused), f"{out}/gpt8h_fused_tp8_rank{r}.onnx")
