"""Exports every test model from PyTorch. Usage: generate_all.py REPO_ROOT

Models land next to the specs that use them (specs/examples/*.onnx, not
committed). Run with the project venv's .venv/bin/python (torch and onnx
pinned by requirements.txt).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import gpt  # noqa: E402
import llama  # noqa: E402
import mlp  # noqa: E402
import vocab  # noqa: E402
import lmhead  # noqa: E402
import sp  # noqa: E402
import tp8  # noqa: E402
import split  # noqa: E402
import padding  # noqa: E402
import rope  # noqa: E402
import intsplit  # noqa: E402
import varlen  # noqa: E402
import stepped  # noqa: E402
import padsplit  # noqa: E402
import training  # noqa: E402
import cumsum  # noqa: E402
import conv  # noqa: E402
import pool  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.join(sys.argv[1], "specs", "examples")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    mlp.generate(out)
    gpt.generate(out)
    llama.generate(out)
    llama.generate_tp8(out)
    vocab.generate(out)
    lmhead.generate(out)
    sp.generate(out)
    tp8.generate(out)
    split.generate(out)
    padding.generate(out)
    rope.generate(out)
    rope.generate_shifted(out)
    intsplit.generate(out)
    varlen.generate(out)
    stepped.generate(out)
    padsplit.generate(out)
    cumsum.generate(out)
    conv.generate(out)
    pool.generate(out)
    # The layouts above on more world sizes (each on a forked RNG).
    gpt.generate_worlds(out)
    llama.generate_worlds(out)
    lmhead.generate_worlds(out)
    lmhead.generate_where(out)
    rope.generate_worlds(out)
    # Training steps captured with python/shardproof (export train=True).
    training.generate(out)


if __name__ == "__main__":
    main()
