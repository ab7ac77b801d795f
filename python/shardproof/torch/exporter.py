"""Exports the reference and every rank of a sharded torch program to ONNX.

Each graph is exported twice, at two example sizes, and the two files must be
identical: a size that differs between them was baked into the graph.
"""
import contextlib
import dataclasses
import gc
import io
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import tempfile
import warnings
from typing import Callable, Dict, List, Optional, Union

import onnx
import torch

from . import chunked
from . import collectives as C
from . import gradients
from . import sizes as symbolic_sizes
from . import process_group as pg
from .compare import first_difference, size_coincidence_hint
from .process_group import CaptureError
from ..case import Case, load_factory  # noqa: F401 (the package exports them)

OPSET = 17


@dataclasses.dataclass
class Exported:
    directory: str
    reference: str
    ranks: List[str]
    collectives: List[str]  # rank 0's collective calls, in order


def default_sizes(case, world_size):
    names = sorted({n for axes in list(case.dynamic.values()) + list((case.rank_dynamic or {}).values())
                    for n in axes.values()})
    # Distinct per name (a size equal to another could hide which one was baked
    # in), multiples of the world size (even splits need them).
    first = {n: world_size * (2 + i) for i, n in enumerate(names)}
    second = {n: world_size * (3 + len(names) + i) for i, n in enumerate(names)}
    return [first, second]


def _output_names(case, sample):
    if case.outputs:
        return list(case.outputs)
    if isinstance(sample, (tuple, list)):
        return [f"y{i}" for i in range(len(sample))]
    return ["y"]


def _build(what, factory):
    try:
        module = factory()
    except CaptureError:
        raise
    except Exception as e:  # the user's constructor failed: say which one, with its location
        raise CaptureError(f"building the {what} failed: {type(e).__name__}: {e} (at {_where(e)})") from e
    if not isinstance(module, torch.nn.Module):
        raise CaptureError(f"the {what} factory returned {type(module).__name__}, not a torch.nn.Module")
    # torch.onnx.export merges parameters with equal values (two LayerNorms
    # initialised to ones would share one input): the values do not matter to
    # the graph, so every parameter gets distinct ones.
    with torch.no_grad():
        for p in module.parameters():
            if p.is_floating_point():
                p.normal_()
    return module.eval()


def _where(e):
    tb = e.__traceback__
    site = "<unknown location>"
    while tb is not None:
        path = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not path.startswith(pg._PACKAGE_DIR) and not path.startswith(pg._TORCH_DIR):
            site = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return site


def _export_one(what, module, inputs, dynamic, outputs_hint, case, train=False):
    names = list(inputs.keys())
    args = tuple(inputs[n] for n in names)
    if train:
        finalize = case.finalize_grads if what != "reference" else None
        outputs_hint = gradients.train_step(module, what, CaptureError, finalize)
    with torch.no_grad() if not train else contextlib.nullcontext():
        try:
            sample = module(*args)
        except CaptureError:
            raise
        except Exception as e:
            raise CaptureError(f"running the {what} failed: {type(e).__name__}: {e} (at {_where(e)})") from e
    output_names = outputs_hint or _output_names(case, sample)
    # A training step's sample holds the gradients with their autograd graph
    # (create_graph=True): gone before the export traces the step again.
    del sample
    del pg._rec().calls[:]  # only the export's own trace counts
    for n in dynamic:
        if n not in inputs and n not in output_names:
            raise CaptureError(f"the dynamic axes name '{n}', which is neither an input ({', '.join(names)}) nor "
                               f"an output ({', '.join(output_names)}) of the {what}")
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # Parameters as graph inputs named by their module path; no constant
            # folding, which would fold a weight's transpose into a new, unnamed
            # tensor.
            # verbose=True keeps each node's Python stack in its doc_string
            # (compacted by _source_sites); the graph dump it prints is muted.
            with _quiet_onnx_log(), chunked.linear_onnx_pass():
                torch.onnx.export(module, args, buf, opset_version=OPSET, input_names=names,
                                  output_names=output_names, dynamic_axes=dynamic, export_params=False,
                                  do_constant_folding=False, verbose=True, dynamo=False)
        except CaptureError:
            raise
        except Exception as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if train and ("_backward" in msg or "requires grad as a constant" in msg):
                msg += (" (in the backward pass: an op whose backward has no rule in shardproof.torch.gradients "
                        "yet; see docs/pytorch.md, 'The training step')")
            raise CaptureError(f"torch.onnx.export of the {what} failed: {msg} (at {_where(e)})") from e
    model = onnx.load_from_string(buf.getvalue())
    _source_sites(model)
    used = {n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")}
    have = {o.domain for o in model.opset_import}
    for d in sorted(used - have):
        model.opset_import.append(onnx.helper.make_opsetid(d, C.CUSTOM_DOMAINS.get(d, 1)))
    # The exporter writes wrong shapes into value_info for custom-op outputs
    # (seen: a dim named `seq` twice): keep none for them.
    custom = {o for n in model.graph.node if n.domain in used for o in n.output}
    keep = [vi for vi in model.graph.value_info if vi.name not in custom]
    del model.graph.value_info[:]
    model.graph.value_info.extend(keep)
    # Behind a collective the exporter no longer knows an output's sizes and
    # invents names for them ('Addy_dim_2'), which would read as new symbols:
    # an output dim keeps only a size name the dynamic axes declared.
    declared = {n for axes in dynamic.values() for n in axes.values()}
    for out in model.graph.output:
        for d in out.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param not in declared:
                d.ClearField("dim_param")
    return model, output_names


@contextlib.contextmanager
def _quiet_onnx_log():
    # torch.onnx.export(verbose=True) prints the whole graph through
    # torch._C._jit_onnx_log, looked up on torch._C at each call.
    saved = torch._C._jit_onnx_log
    torch._C._jit_onnx_log = lambda *args: None
    try:
        yield
    finally:
        torch._C._jit_onnx_log = saved


_FRAME = re.compile(r"^(.*)\((\d+)\): (\S+)$")


def _source_sites(model):
    """Each node's doc_string (the tracer's Python stack, innermost first)
    becomes the user's line that emitted it, 'file:line in function': the
    first frame outside torch and this package, within the traced call. A node
    the backward pass emits (autograd, this package's rules) has no such
    frame before the tracer's own and gets none: the code that called export
    did not write it. Reports and SARIF point there."""
    tracer = (os.path.join(pg._TORCH_DIR, "jit") + os.sep, os.path.join(pg._TORCH_DIR, "onnx") + os.sep)
    for node in model.graph.node:
        site = ""
        for line in node.doc_string.splitlines():
            m = _FRAME.match(line.strip())
            if not m:
                continue
            path = os.path.abspath(m.group(1))
            if path.startswith(tracer):
                break  # the trace's own frames: what lies past them called export
            if not path.startswith(pg._PACKAGE_DIR) and not path.startswith(pg._TORCH_DIR):
                site = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
                break
        node.doc_string = site


def _annotate(model, calls):
    """Writes each collective's user call site into its node's doc_string (the
    k-th collective node is the k-th recorded call that emitted one)."""
    nodes = [n for n in model.graph.node if (n.domain, n.op_type) in C.NODE_TYPES]
    if len(nodes) == len(calls):
        for node, (kind, attrs, site) in zip(nodes, calls):
            node.doc_string = site


def _describe(calls):
    return [f"{kind}({', '.join(f'{k}={v}' for k, v in attrs.items())}) at {site}" for kind, attrs, site in calls]


def _signature(calls):
    return [(kind, tuple(sorted(attrs.items()))) for kind, attrs, _ in calls]


def export(case: Case, world_size: int, out: str, log=None, train=False, workers: int = 1) -> Exported:
    """Exports DIR/reference.onnx and DIR/rank{r}.onnx for r < world_size.
    With train=True each graph is the training step: its outputs are the loss
    (what forward returns) and `grad:<name>` for every parameter.
    Raises CaptureError on any problem; nothing is written unless every graph
    exported and passed the checks. workers > 1 exports the ranks in that many
    forked processes once the reference is exported in one of its own (each
    holds one graph's exports: memory grows with the workers)."""
    if world_size < 1:
        raise CaptureError(f"--world-size must be at least 1, got {world_size}")
    sizes = case.sizes(world_size) if callable(case.sizes) else case.sizes or default_sizes(case, world_size)
    if len(sizes) != 2 or sizes[0] == sizes[1]:
        raise CaptureError("Case.sizes must be two different size assignments")
    rank_inputs = case.rank_inputs or (lambda s, r, p: case.inputs(s))
    rank_dynamic = case.rank_dynamic if case.rank_dynamic is not None else case.dynamic
    say = log or (lambda msg: None)

    models = {}
    step = contextlib.ExitStack()
    if train:
        step.enter_context(gradients.backward_symbolics(OPSET))
        step.enter_context(pg.training())
        step.enter_context(gradients.replaced())
    with pg.intercepted(), step:
        jobs = [("reference", "reference", 0, 1, case.reference, lambda s: case.inputs(s), case.dynamic)]
        jobs += [(f"rank{r}", f"implementation on rank {r}", r, world_size, case.implementation,
                  (lambda s, r=r: rank_inputs(s, r, world_size)), rank_dynamic) for r in range(world_size)]
        signatures = {}
        # A training step holds the sizes autograd saved as integers: a third
        # export lets sizes.py write them back as shape arithmetic.
        points = sizes + [symbolic_sizes.third_sizes(sizes)] if train else sizes

        def done(key, what, rank, model, calls):
            if rank != 0 or key != "reference":
                signatures[key] = calls
            models[key] = model
            say(f"exported {what}: {len(model.graph.node)} nodes, {len(calls)} collectives")

        # The reference first: the ranks' outputs take its names. With
        # workers it too runs in a forked process, so that the parent, which
        # every later worker is forked from, stays small (the 126-layer step's
        # reference left 7 GB behind in the process that traced it).
        ref, ranks = jobs[:1], jobs[1:]
        if workers > 1 and len(ranks) > 1:
            _export_forked(ref, points, sizes, models, case, train, 1, done)
            _export_forked(ranks, points, sizes, models, case, train, min(workers, len(ranks)), done)
        else:
            for job in ref + ranks:
                done(job[0], job[1], job[2], *_export_job(job, points, sizes, models, case, train))
        _check_same_collectives(signatures, world_size)

    return _write(models, world_size, out, signatures.get("rank0", []))


def _export_job(job, points, sizes, models, case, train):
    """Exports one graph at every example size; returns (model, its collective
    calls) or raises CaptureError when the exports disagree."""
    key, what, rank, world, factory, feed, dynamic = job
    exports, feeds = [], []
    for s in points:
        with pg.simulated(rank, world) as rec:
            torch.manual_seed(0)
            module = _build(what, factory)
            outputs = models[("outputs",)] if ("outputs",) in models else None
            fed = feed(dict(s))
            feeds.append(fed)
            model, out_names = _export_one(what, module, fed, dynamic, outputs, case, train)
            del module
            # The traced step's autograd graph is held in reference
            # cycles: collected now, so the next export reuses its
            # memory (8 layers at the bench widths: a rank's exports
            # grew 670 -> 706 -> 739 MB without, 652 -> 654 -> 654
            # with).
            gc.collect()
            models.setdefault(("outputs",), out_names)
            _annotate(model, rec.calls)
            exports.append((model, rec.calls))
    diff = first_difference(exports[0][0], exports[1][0], sizes)
    if diff and train:
        fixed = symbolic_sizes.symbolize([e[0] for e in exports], feeds, dynamic)
        if fixed is not None:
            exports[0] = (fixed, exports[0][1])
            diff = None
    if diff:
        diff += "; " + size_coincidence_hint(exports[0][0], points)
        raise CaptureError(f"the {what}'s graph depends on the example size: {diff}")
    return exports[0]


# What a forked worker needs; set in the parent just before the fork, so the
# children inherit it instead of pickling the user's factories.
_forked = None


def _forked_job(index):
    torch.set_num_threads(1)  # the workers share the machine's cores
    jobs, points, sizes, models, case, train = _forked
    job = jobs[index]
    try:
        model, calls = _export_job(job, points, sizes, models, case, train)
    except CaptureError as e:
        return None, str(e), None
    except Exception as e:  # an internal error: reported, not lost in the worker
        return None, f"exporting the {job[1]} failed in a worker process: {type(e).__name__}: {e}", None
    return model.SerializeToString(), calls, models.get(("outputs",))


def _forked_main(index, conn):
    conn.send(_forked_job(index))
    conn.close()


def _export_forked(jobs, points, sizes, models, case, train, workers, done):
    """Exports `jobs` in at most `workers` forked processes at a time, one
    process a job (the ranks are independent once the reference is
    exported); each result is handed to done() in the parent. The first
    failure stops the rest, and so does a process that dies without a result
    (killed for lack of memory): a pool would wait for it forever."""
    global _forked
    ctx = multiprocessing.get_context("fork")
    _forked = (jobs, points, sizes, models, case, train)
    pending, running = list(range(len(jobs))), {}
    try:
        while pending or running:
            while pending and len(running) < workers:
                index = pending.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_forked_main, args=(index, send), daemon=True)
                proc.start()
                send.close()
                running[receive] = (proc, index)
            for conn in multiprocessing.connection.wait(list(running)):
                proc, index = running.pop(conn)
                try:
                    data, calls, outputs = conn.recv()
                except EOFError:
                    data, calls, outputs = None, None, None
                conn.close()
                proc.join()
                what = jobs[index][1]
                if calls is None:
                    killed = ": killed, perhaps for lack of memory; try fewer --jobs" if proc.exitcode == -9 else ""
                    raise CaptureError(f"the process exporting the {what} ended without a result (exit code "
                                       f"{proc.exitcode}{killed})")
                if data is None:
                    raise CaptureError(calls)
                models.setdefault(("outputs",), outputs)
                done(jobs[index][0], what, jobs[index][2], onnx.load_from_string(data), calls)
    finally:
        for conn, (proc, _) in running.items():
            proc.kill()
            proc.join()
            conn.close()
        _forked = None


def _check_same_collectives(signatures, world_size):
    base = signatures.get("rank0", [])
    for r in range(1, world_size):
        calls = signatures.get(f"rank{r}", [])
        if _signature(calls) != _signature(base):
            raise CaptureError(
                f"rank {r} calls other collectives than rank 0 (every rank must call the same ones in the same "
                "order, or the real run deadlocks or mixes tensors):\n  rank 0: " + "\n          ".join(
                    _describe(base) or ["(none)"]) + f"\n  rank {r}: " + "\n          ".join(
                    _describe(calls) or ["(none)"]))


def _write(models, world_size, out, calls):
    parent = os.path.dirname(os.path.abspath(out)) or "."
    if not os.path.isdir(parent):
        raise CaptureError(f"cannot write into {out}: the directory {parent} does not exist")
    if os.path.exists(out) and not os.path.isdir(out):
        raise CaptureError(f"--out {out} exists and is not a directory")
    files = {"reference.onnx": models["reference"]}
    files.update({f"rank{r}.onnx": models[f"rank{r}"] for r in range(world_size)})
    # Everything is written into a temporary directory first, then moved into
    # place: a failure leaves no half-written export behind.
    tmp = tempfile.mkdtemp(prefix=".shardproof-export-", dir=parent)
    try:
        for name, model in files.items():
            onnx.checker.check_model(model)
            onnx.save(model, os.path.join(tmp, name))
        os.makedirs(out, exist_ok=True)
        for name in files:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
    except onnx.checker.ValidationError as e:
        raise CaptureError(f"the exported graph {name} is not valid ONNX: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Exported(out, os.path.join(out, "reference.onnx"),
                    [os.path.join(out, f"rank{r}.onnx") for r in range(world_size)], _describe(calls))


