"""The user's line behind a call or a graph node: the innermost frame outside
torch and shardproof, as 'file:line in function', the file relative to the
project root when it lies below it."""
import os
import re
import traceback

import torch

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))  # python/shardproof
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_PYTHON_DIR = os.path.dirname(os.path.abspath(os.__file__))
_ROOT = os.getcwd()


def set_root(path):
    """Paths in locations are written relative to `path` (default: the
    working directory at import)."""
    global _ROOT
    _ROOT = os.path.abspath(path)


def _is_library(path):
    if path.startswith("<"):  # generated code (FX's <eval_with_key>), no file
        return True
    path = os.path.abspath(path)
    return (path.startswith(_PACKAGE_DIR + os.sep) or path.startswith(_TORCH_DIR + os.sep)
            or path.startswith(_PYTHON_DIR + os.sep) or path.startswith("<"))


def shown(path):
    path = os.path.abspath(path)
    rel = os.path.relpath(path, _ROOT)
    return path if rel.startswith("..") else rel


def call_site():
    """The innermost frame of the user's code on the current stack."""
    for frame in reversed(traceback.extract_stack()):
        if not _is_library(frame.filename):
            return f"{shown(frame.filename)}:{frame.lineno} in {frame.name}"
    return "<unknown location>"


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')


def node_site(stack_trace):
    """The innermost user frame of an FX node's `stack_trace` (outermost
    first, as Python prints tracebacks), or '' when it has none."""
    site = ""
    for line in (stack_trace or "").splitlines():
        m = _FRAME.match(line)
        if m and not _is_library(m.group(1)):
            site = f"{shown(m.group(1))}:{m.group(2)} in {m.group(3)}"
    return site


def exception_site(e):
    """' (at file:line in fn)' for the innermost user frame of an exception's
    traceback, or '' when it has none (torch's own checks after tracing)."""
    site = ""
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not _is_library(code.co_filename):
            site = f" (at {shown(code.co_filename)}:{tb.tb_lineno} in {code.co_name})"
        tb = tb.tb_next
    return site
