"""python3 -m shardproof.torch export FILE.py:FACTORY --world-size P --out DIR"""
import argparse
import sys

EPILOG = """\
FACTORY is a function in FILE.py that returns a shardproof.Case: how to
build the reference module, how to build the implementation on one rank (it
calls torch.distributed as it would in a real run: get_rank, get_world_size,
new_group, all_reduce, all_gather, reduce_scatter, all_to_all_single, async
handles), example inputs for given sizes, and which input axes are dynamic.

Every rank runs in this one process as rank r of P under torch's fake process
group and is traced with torch.export at symbolic sizes (every size >= 2:
torch specializes 0 and 1), functionalized, so a collective on any alias
(.view, .data, a slice) reaches the tensor as on a real cluster. A guard torch
could not prove for every size is traced again and becomes the graph's claim.

With --legacy the TorchScript exporter is used instead (torch.onnx.export,
dynamo=False, under a simulated process group; with --jobs N, in forked
processes), each graph exported at two example sizes that must give
identical files. docs/pytorch.md says what each path reads.

Writes DIR/reference.onnx and DIR/rank0.onnx .. rank{P-1}.onnx (all or none).
Then:
  shardproof init DIR/reference.onnx --ranks 'DIR/rank{r}.onnx' --world-size P -o spec.yaml
  shardproof check spec.yaml

With --train, forward must return the scalar loss and each graph is the
training step: outputs `loss` and `grad:<name>` for every parameter. The
backward is torch's own (make_fx over autograd, functionalized), including
the backward of the program's autograd Functions (Megatron's f and g) and
the Case's finalize_grads, so a missing all-reduce of a gradient shows in the
graph. Gradient nodes carry the line of the forward code they differentiate.

Example:
  tools/shardproof-torch export tests/models/megatron/gpt2.py:gpt2_tp --world-size 2 --out /tmp/gpt2
  tools/shardproof-torch export tests/models/megatron/training.py:mlp_sp --train -P 2 --out /tmp/step

Exit codes: 0 exported, 1 the program could not be captured (the message says
where and why), 2 bad command line. See docs/pytorch.md.
"""


def _dynamic(text):
    # x=0:batch,1:seq
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected INPUT=AXIS:NAME[,AXIS:NAME...], got '{text}'")
    name, axes = text.split("=", 1)
    out = {}
    for item in axes.split(","):
        axis, _, sym = item.partition(":")
        if not axis.strip().lstrip("-").isdigit() or not sym.strip():
            raise argparse.ArgumentTypeError(f"expected AXIS:NAME in '{text}', got '{item}'")
        out[int(axis)] = sym.strip()
    return name.strip(), out


def _positive(text):
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got '{text}'")
    return int(text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m shardproof.torch",
                                     description="Capture a torch.distributed program's ranks for shardproof.")
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="export the reference and every rank to ONNX",
                         description="Export the reference and every rank of a sharded program to ONNX.",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    exp.add_argument("factory", metavar="FILE.py:FACTORY")
    exp.add_argument("--world-size", "-P", type=int, required=True, help="number of ranks")
    exp.add_argument("--out", "-o", required=True, metavar="DIR", help="directory for the ONNX files")
    exp.add_argument("--dynamic", type=_dynamic, action="append", default=[], metavar="INPUT=AXIS:NAME,...",
                     help="mark input axes dynamic (adds to the Case's dynamic axes), e.g. x=0:batch,1:seq")
    exp.add_argument("--train", action="store_true",
                     help="export the training step: forward must return the scalar loss; the graphs output the "
                          "loss and grad:<name> for every parameter")
    exp.add_argument("--jobs", "-j", type=_positive, default=1, metavar="N",
                     help="export the reference, then the ranks, each in a forked process of its own, N at a "
                          "time (default 1: all in this process; each process holds one graph's exports, so "
                          "memory grows with N)")
    exp.add_argument("--legacy", action="store_true",
                     help="use the TorchScript exporter instead of torch.export / make_fx (with --train, "
                          "its hand-written backward rules)")
    exp.add_argument("--quiet", "-q", action="store_true")
    args = parser.parse_args(argv)

    return _export(args)


def _load(args):
    from ..case import load_factory
    case = load_factory(args.factory)
    for name, axes in args.dynamic:
        case.dynamic.setdefault(name, {}).update(axes)
        if case.rank_dynamic is not None:
            case.rank_dynamic.setdefault(name, {}).update(axes)
    return case


def _export(args):
    """torch.export under torch's fake process group; the TorchScript exporter
    under the simulated one with --legacy."""
    from ..errors import CaptureError
    log = None if args.quiet else (lambda m: print(m, file=sys.stderr))
    try:
        if args.legacy:
            from . import exporter
            from .process_group import intercepted
            with intercepted():  # the factory's module may call torch.distributed at import
                result = exporter.export(_load(args), args.world_size, args.out, log=log, train=args.train,
                                         workers=args.jobs)
            calls = result.collectives
        else:
            from .. import capture
            result = capture.export(_load(args), args.world_size, args.out, log=log, train=args.train)
            calls = [c.describe() for c in result.collectives]
    except CaptureError as e:
        print(f"shardproof.torch: error: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"wrote {result.reference} and {len(result.ranks)} rank graphs to {result.directory}")
        for c in calls:
            print(f"  {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
