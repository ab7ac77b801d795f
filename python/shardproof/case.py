"""What a user's factory returns, and how `FILE.py:FACTORY` is loaded: shared
by the torch 2 capture (shardproof.capture) and the TorchScript one
(shardproof.torch)."""
import dataclasses
import os
import sys
from typing import Callable, Dict, List, Optional, Union

import torch

from .errors import CaptureError
from .sites import exception_site


@dataclasses.dataclass
class Case:
    """What FACTORY() returns: how to build and feed the reference and the ranks.

    reference:      () -> nn.Module, the single-device model.
    implementation: () -> nn.Module, built once per rank under the simulated
                    process group (dist.get_rank() / get_world_size() work in
                    __init__ and forward).
    inputs:         sizes -> {name: tensor}, the reference's example inputs in
                    the order of forward's parameters; `sizes` maps each
                    dynamic size name to an integer.
    rank_inputs:    (sizes, rank, world_size) -> {name: tensor}; default: inputs.
    dynamic:        {input name: {axis: size name}} for the reference (and the
                    ranks, unless rank_dynamic is given).
    outputs:        output names (default: "y", or y0, y1, ... for a tuple).
    sizes:          example size assignments (the TorchScript path exports at
                    two; the torch 2 path traces symbolically at the first,
                    every size at least 2), or world_size -> them; default:
                    distinct multiples of the world size per size name. Give
                    them when only some names are split: a training step's
                    memory grows with the example sizes.
    finalize_grads: (module) -> None, for a training step (--train): runs on
                    each rank after the backward pass with every parameter's
                    .grad set and synchronizes them as the real training loop
                    does (e.g. all-reduce the gradients of the LayerNorm
                    weights under sequence parallelism).
    """
    reference: Callable[[], torch.nn.Module]
    implementation: Callable[[], torch.nn.Module]
    inputs: Callable[[Dict[str, int]], Dict[str, torch.Tensor]]
    rank_inputs: Optional[Callable[[Dict[str, int], int, int], Dict[str, torch.Tensor]]] = None
    dynamic: Dict[str, Dict[int, str]] = dataclasses.field(default_factory=dict)
    rank_dynamic: Optional[Dict[str, Dict[int, str]]] = None
    outputs: Optional[List[str]] = None
    sizes: Optional[Union[List[Dict[str, int]], Callable[[int], List[Dict[str, int]]]]] = None
    finalize_grads: Optional[Callable[[torch.nn.Module], None]] = None


def _shadowed_modules(directory):
    """Modules already imported under a name that a file or package in
    `directory` also has, from somewhere else: {name: module}."""
    out = {}
    for entry in os.listdir(directory):
        name = entry[:-3] if entry.endswith(".py") else entry
        if not name.isidentifier() or name not in sys.modules:
            continue
        where = getattr(sys.modules[name], "__file__", None)
        if where and os.path.dirname(os.path.abspath(where)) != directory and \
                os.path.dirname(os.path.dirname(os.path.abspath(where))) != directory:
            out[name] = sys.modules[name]
    return out


def load_factory(spec):
    """'path/to/file.py:FACTORY' -> the Case it returns (imported with the
    torch.distributed API already intercepted by the caller)."""
    import importlib.util

    if ":" not in spec:
        raise CaptureError(f"expected FILE.py:FACTORY, got '{spec}'")
    path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise CaptureError(f"{path}: no such file")
    mod_name = "_shardproof_user_" + os.path.splitext(os.path.basename(path))[0]
    loader = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(loader)
    here = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, here)
    # The file imports its own neighbours, not same-named modules imported
    # earlier from elsewhere (tests/models/llama.py beside megatron/llama.py).
    shadowed = _shadowed_modules(here)
    for n in shadowed:
        del sys.modules[n]
    try:
        loader.loader.exec_module(module)
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(f"importing {path} failed: {type(e).__name__}: {e} {exception_site(e)}") from e
    finally:
        sys.path.pop(0)
        sys.modules.update(shadowed)
    factory = getattr(module, name, None)
    if factory is None:
        names = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise CaptureError(f"{path} has no '{name}' (callables there: {', '.join(names) or 'none'})")
    try:
        case = factory()
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(f"{spec}() failed: {type(e).__name__}: {e} {exception_site(e)}") from e
    if not isinstance(case, Case):
        raise CaptureError(f"{spec}() returned {type(case).__name__}, not a shardproof.Case")
    return case
