"""Training-step fixtures captured with the PyTorch package (python/shardproof):
Megatron-style user code (tests/models/megatron/training.py) exported with
`train=True` on torch 2 (shardproof.capture: make_fx over autograd,
functionalized), so each graph outputs the loss and `grad:<param>` for every
parameter through torch's backward pass and the f/g Functions' own backward.
Sizes are captured symbolic with a minimum of 2, which the specs state.
They live in specs/examples like every other fixture, which puts the backward
graphs under ExamplesTest and the mutation suite (docs/soundness.md).

Files: train_<name>_ref.onnx and train_<name>_rank{r}.onnx.
"""
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

# name -> (factory in tests/models/megatron/training.py, or FILE.py:factory for
# another file there, world size)
FIXTURES = {
    "mlp_tp2": ("mlp_tp", 2),
    "mlp_tp2_f_without_reduce": ("mlp_tp_f_without_reduce", 2),
    "mlp_sp2": ("mlp_sp", 2),
    "mlp_sp2_grads_unsynced": ("mlp_sp_grads_unsynced", 2),
    "gpt2_block_tp2": ("gpt2_block_tp", 2),
    "mlp_dp2": ("data_parallel.py:mlp_dp", 2),
    "mlp_dp2_averaged_twice": ("data_parallel.py:mlp_dp_averaged_twice", 2),
    "mlp_dp2_not_averaged": ("data_parallel.py:mlp_dp_not_averaged", 2),
    "mqa_tp2": ("mqa_tp", 2),
    "mqa_tp2_kv_grad_unsynced": ("mqa_tp_kv_grad_unsynced", 2),
    "tied_tp2": ("tied_tp", 2),
    "tied_tp2_head_without_f": ("tied_tp_head_without_f", 2),
    "llama_sp2": ("llama_sp_step", 2),
    "llama_sp2_norm_grads_unsynced": ("llama_sp_step_norm_grads_unsynced", 2),
    "gpt2_lm_tp2": ("gpt2_lm_tp_step", 2),
    "gpt2_lm_tp2_ce_grad_unmasked": ("gpt2_lm_tp_step_ce_grad_unmasked", 2),
    "gpt2_lm_tp4": ("gpt2_lm_tp_step", 4),
    "gpt2_lm_tp4_ce_grad_unmasked": ("gpt2_lm_tp_step_ce_grad_unmasked", 4),
    "gpt2_lm_pad_tp2": ("gpt2_lm_pad_tp_step", 2),
    "gpt2_lm_pad_tp2_unmasked": ("gpt2_lm_pad_tp_step_unmasked", 2),
}


def generate(out):
    from shardproof.capture import export
    from shardproof.case import load_factory

    megatron = os.path.join(ROOT, "tests", "models", "megatron")
    for name, (factory, world) in FIXTURES.items():
        if ":" not in factory:
            factory = "training.py:" + factory
        with tempfile.TemporaryDirectory() as tmp:
            case = load_factory(os.path.join(megatron, factory))
            got = export(case, world, os.path.join(tmp, "x"), train=True)
            shutil.move(got.reference, os.path.join(out, f"train_{name}_ref.onnx"))
            for r, path in enumerate(got.ranks):
                shutil.move(path, os.path.join(out, f"train_{name}_rank{r}.onnx"))


if __name__ == "__main__":
    # Only these fixtures: training.py OUTDIR [NAME ...]
    if len(sys.argv) < 2:
        sys.exit("usage: training.py OUTDIR [NAME ...]")
    if len(sys.argv) > 2:
        FIXTURES = {n: FIXTURES[n] for n in sys.argv[2:]}
    import torch

    torch.manual_seed(0)
    generate(sys.argv[1])
