#!/usr/bin/env python3
"""Mutants of PyTorch programs, not of their graphs.

The graph mutants (mutate.py) change ONNX files after capture, so they cannot
see a capture that loses a collective. These change how the user's code calls
torch.distributed (drop or repeat a collective, hand it a copy or an alias,
start it async), capture each mutant with the torch 2 path, and take the
truth from running it eagerly on a real multi-process CPU group (gloo): a
mutant whose outputs differ from the unmutated program's on some rank is a
bug, and shardproof must not say VERIFIED; one whose outputs are the same
must not be REFUTED.

    .venv/bin/python tests/mutants/programs.py --shardproof build/shardproof [--only NAME]

Exit 0: every verdict agrees with the truth; 1: a false VERIFIED or a false
REFUTED; 2: the suite cannot run (the unmutated program is not VERIFIED).
"""
import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from shardproof import capture, load_factory  # noqa: E402

# program, world size, the sizes the eager runs use, whether it is a
# training step (its outputs: the loss and every parameter's gradient)
PROGRAMS = {
    "mlp": ("tests/models/capture/aliases.py:case", 2, [{"batch": 2, "seq": 3}, {"batch": 3, "seq": 2}], False),
    "gpt2": ("tests/models/megatron/gpt2.py:gpt2_tp", 2, [{"batch": 2, "seq": 3}], False),
    "llama": ("tests/models/megatron/llama.py:llama_tp", 2, [{"batch": 2, "seq": 3}], False),
    "mlp_step": ("tests/models/megatron/training.py:mlp_tp", 2, [{"batch": 2, "seq": 3}], True),
    "sp_step": ("tests/models/megatron/training.py:mlp_sp", 2, [{"batch": 2, "seq": 4}], True),
    "dp_step": ("tests/models/megatron/data_parallel.py:mlp_dp", 2, [{"batch": 4, "seq": 3}], True),
}

_original_all_reduce = dist.all_reduce


def _mutated(kind, k, calls_per_forward):
    """dist.all_reduce with its k-th call (of each forward) changed."""
    count = [0]

    def all_reduce(tensor, *args, **kwargs):
        i = count[0] % calls_per_forward
        count[0] += 1
        if i != k:
            return _original_all_reduce(tensor, *args, **kwargs)
        if kind == "drop":  # the partial sums stay
            return None
        if kind == "twice":  # P times the sum
            _original_all_reduce(tensor, *args, **kwargs)
            return _original_all_reduce(tensor, *args, **kwargs)
        if kind == "clone":  # reduces a copy: the tensor keeps its partial sum
            return _original_all_reduce(tensor.clone(), *args, **kwargs)
        if kind == "view":  # a view shares the storage: harmless
            return _original_all_reduce(tensor.view(-1), *args, **kwargs)
        if kind == "data":  # harmless
            return _original_all_reduce(tensor.data, *args, **kwargs)
        if kind == "async":  # waited at once: harmless
            return _original_all_reduce(tensor, *args, async_op=True, **kwargs).wait()
        raise ValueError(kind)
    return all_reduce


KINDS = ("drop", "twice", "clone", "view", "data", "async")


@contextlib.contextmanager
def mutation(kind, k, calls):
    if kind is None:
        yield
        return
    dist.all_reduce = _mutated(kind, k, calls)
    try:
        yield
    finally:
        dist.all_reduce = _original_all_reduce


def _step(case, module, inputs):
    """The loss and every parameter's gradient after the Case's finalize_grads."""
    loss = module(*inputs)
    params = [p for p in module.parameters() if p.requires_grad]
    for p, g in zip(params, torch.autograd.grad(loss, params, allow_unused=True)):
        p.grad = torch.zeros_like(p) if g is None else g
    if case.finalize_grads is not None:
        case.finalize_grads(module)
    return [loss.detach()] + [p.grad.detach() for p in params]


def _eager_rank(rank, world, port, factory, sizes, kind, k, calls, train, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        case = load_factory(os.path.join(ROOT, factory))
        rank_inputs = case.rank_inputs or (lambda s, r, p: case.inputs(s))
        with mutation(kind, k, calls), torch.set_grad_enabled(train):
            torch.manual_seed(0)
            module = case.implementation().eval()
            torch.manual_seed(1)
            inputs = list(rank_inputs(dict(sizes), rank, world).values())
            y = _step(case, module, inputs) if train else module(*inputs)
        torch.save(y, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eager(factory, world, sizes, kind=None, k=0, calls=1, train=False):
    """Each rank's output of a real run on gloo."""
    with tempfile.TemporaryDirectory() as out:
        mp.start_processes(_eager_rank, args=(world, _free_port(), factory, sizes, kind, k, calls, train, out),
                           nprocs=world, start_method="fork")
        return [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]


def _tensors(x):
    return [t for item in x for t in _tensors(item)] if isinstance(x, (list, tuple)) else [x]


def differs(a, b):
    """Whether any rank's output (or loss and gradients) differ."""
    return any(not torch.allclose(x, y, rtol=1e-4, atol=1e-5) for x, y in zip(_tensors(a), _tensors(b)))


def verdict(binary, factory, world, kind, k, calls, train=False):
    """The exit code of export + init + check (1 REFUTED, 0 VERIFIED, ...)."""
    case = load_factory(os.path.join(ROOT, factory))
    with tempfile.TemporaryDirectory() as tmp, mutation(kind, k, calls):
        try:
            capture.export(case, world, tmp, train=train)
        except capture.CaptureError as e:
            return "capture refused", str(e)
        spec = os.path.join(tmp, "spec.yaml")
        subprocess.run([binary, "init", os.path.join(tmp, "reference.onnx"), "--ranks",
                        os.path.join(tmp, "rank{r}.onnx"), "--world-size", str(world), "-o", spec],
                       check=True, capture_output=True)
        r = subprocess.run([binary, "check", "--witness", spec], capture_output=True, text=True)
        names = {0: "VERIFIED", 1: "REFUTED", 2: "UNKNOWN", 3: "bad input", 4: "internal error"}
        return names.get(r.returncode, str(r.returncode)), r.stdout[-2000:] + r.stderr[-2000:]


def calls_per_forward(factory, world, train=False):
    case = load_factory(os.path.join(ROOT, factory))
    with tempfile.TemporaryDirectory() as tmp:
        calls = capture.export(case, world, tmp, train=train).collectives
        return len([c for c in calls if c.kind == "all_reduce"])


def run_program(binary, name, log):
    factory, world, all_sizes, train = PROGRAMS[name]
    calls = calls_per_forward(factory, world, train)
    base, _ = verdict(binary, factory, world, None, 0, calls, train)
    if base != "VERIFIED":
        log(f"{name}: the unmutated program is {base}, not VERIFIED")
        return None
    originals = [eager(factory, world, s, train=train) for s in all_sizes]
    wrong = 0
    for k in range(calls):
        for kind in KINDS:
            bug = any(differs(eager(factory, world, s, kind, k, calls, train), o) for s, o in zip(all_sizes, originals))
            got, report = verdict(binary, factory, world, kind, k, calls, train)
            bad = (bug and got == "VERIFIED") or (not bug and got == "REFUTED")
            wrong += bad
            log(f"{'WRONG ' if bad else ''}{name} {kind}:{k}: eager {'differs' if bug else 'same'}, shardproof {got}")
            if bad:
                log(report)
    return wrong


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardproof", default=os.path.join(ROOT, "build", "shardproof"))
    ap.add_argument("--only", choices=sorted(PROGRAMS), action="append")
    args = ap.parse_args()
    total = 0
    for name in args.only or sorted(PROGRAMS):
        wrong = run_program(args.shardproof, name, lambda m: print(m, flush=True))
        if wrong is None:
            return 2
        total += wrong
    print(f"program mutants: {total} wrong verdicts")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
