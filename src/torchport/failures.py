"""Why a run failed, in one vocabulary shared by every command.

A run that fails on a backend is that backend's result, not the end of the
evaluation: what does not run where is what users come for.  This module
turns an exception (in the worker) or a process outcome (in the parent) into
an error record:

    {"kind": one of KINDS, "message": the first line, "more": bool,
     "location": innermost frame in the user's code (file:line),
     "library_frame": innermost frame inside torch or a vendor package,
     "traceback": the last frames, for --debug and the report}

Only a failure on the reference backend is the app's own bug (see
``torchport.evaluate``).  This module must import on every torch a worker runs
on and needs only the standard library.
"""
from __future__ import annotations

import os
import re
import sysconfig
import traceback
from typing import Any

# caps on text that comes from apps and workers before it enters a result
from torchport.limits import MESSAGE_CHARS, TAIL_LINE_CHARS, TAIL_LINES, TRACEBACK_CHARS  # noqa: F401
from torchport.records import ErrorKind, ErrorRecord
from torchport.text import visible

# The words are torchport.records.ErrorKind's, the one vocabulary of error kinds.
UNSUPPORTED_OP = ErrorKind.UNSUPPORTED_OP.value
COMPILE_ERROR = ErrorKind.COMPILE_ERROR.value
OUT_OF_MEMORY = ErrorKind.OUT_OF_MEMORY.value
NUMERICAL = ErrorKind.NUMERICAL.value
CRASH = ErrorKind.CRASH.value
TIMEOUT = ErrorKind.TIMEOUT.value
APP_ERROR = ErrorKind.APP_ERROR.value
ENVIRONMENT = ErrorKind.ENVIRONMENT.value
INTERRUPTED = ErrorKind.INTERRUPTED.value
BUDGET_TOO_SMALL = ErrorKind.BUDGET_TOO_SMALL.value

KINDS = tuple(kind.value for kind in ErrorKind)


_UNSUPPORTED = re.compile(
    r"not implemented for|is not implemented|could not run '|no kernel|not supported (on|for|by) (the )?"
    r"(device|backend|this)|unsupported (op|operator|dtype)|no lowering|doesn't support|does not support",
    re.IGNORECASE,
)
_COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch_xla", "triton")
# Frames that only a compiler at work runs through.  Not all of torch._dynamo:
# its disable() wrappers sit on many eager paths (dispatch modes included).
_COMPILER_PATHS = tuple(part.replace("/", os.sep) for part in (
    "/_dynamo/convert_frame.py", "/_dynamo/symbolic_convert.py", "/_dynamo/output_graph.py",
    "/_dynamo/variables/", "/_inductor/", "/_functorch/aot_autograd", "/_functorch/_aot_autograd/",
    "/torch_xla/_dynamo/", "/triton/", "/torch_neuronx/"))
_LIBRARY_ROOTS = tuple(
    os.path.realpath(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
_TORCHPORT_ROOT = os.path.dirname(os.path.realpath(__file__))


def first_line(text: str) -> tuple[str, bool]:
    """The first non-empty line, capped, control characters made visible, and
    whether anything was left out."""
    stripped = visible(text).strip()
    lines = stripped.splitlines() or [""]
    line = lines[0]
    more = len(lines) > 1
    if len(line) > MESSAGE_CHARS:
        line, more = line[:MESSAGE_CHARS] + "…", True
    return line, more


def cap_tail(lines: list[str]) -> list[str]:
    """The last TAIL_LINES lines, each at most TAIL_LINE_CHARS characters."""
    kept = [visible(line) for line in lines if line.strip()][-TAIL_LINES:]
    return [line if len(line) <= TAIL_LINE_CHARS else line[:TAIL_LINE_CHARS] + "…" for line in kept]


def _is_library_file(filename: str) -> bool:
    if not filename or filename.startswith("<"):
        return False
    resolved = os.path.realpath(filename)
    return resolved.startswith(_LIBRARY_ROOTS) and not resolved.startswith(_TORCHPORT_ROOT)


def library_frame(exc: BaseException) -> str | None:
    """``file:line (function)`` of the innermost frame inside an installed
    package (torch, torch_xla, a vendor plugin): where the failure surfaced
    in the library, beside the user's line that reached it."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if _is_library_file(frame.filename):
            found = f"{frame.filename}:{frame.lineno} ({frame.name})"
    return found


def _original(exc: BaseException) -> BaseException:
    """The exception the app or the library raised, under torchport's wrapper."""
    return getattr(exc, "original", None) or exc


def kind_of(exc: BaseException) -> str:
    """Sort an exception into KINDS.  Order matters: memory first (a compiler
    can run out of memory too), then a missing op (compilers report those as
    well), then anything raised from inside a compiler, then the app."""
    original = _original(exc)
    own_kind = getattr(exc, "kind", None)
    if original is exc and own_kind in KINDS:
        return own_kind
    name = type(original).__name__
    text = str(original)
    if name in ("OutOfMemoryError", "MemoryError") or "out of memory" in text.lower():
        return OUT_OF_MEMORY
    if isinstance(original, NotImplementedError) or _UNSUPPORTED.search(text):
        return UNSUPPORTED_OP
    module = type(original).__module__ or ""
    if module.startswith(_COMPILER_MODULES) or name in ("BackendCompilerFailed", "InductorError", "LoweringException",
                                                        "Unsupported", "TorchRuntimeError"):
        return COMPILE_ERROR
    frames = traceback.extract_tb(original.__traceback__)
    if any(marker in os.path.realpath(frame.filename) for frame in frames for marker in _COMPILER_PATHS):
        return COMPILE_ERROR
    return own_kind if own_kind in KINDS else APP_ERROR


def error_record(exc: BaseException) -> ErrorRecord:
    """The error record of an exception raised in a worker."""
    from torchport.app import user_location

    original = _original(exc)
    message = getattr(exc, "message", None) or f"{type(original).__name__}: {original}"
    line, more = first_line(message)
    location = getattr(exc, "location", None) or user_location(original)
    found = ErrorRecord(kind=kind_of(exc), message=line, more=more, location=location,
                        library_frame=library_frame(original), key_order=_WRITTEN)
    if original is not exc or not hasattr(exc, "message"):
        text = "".join(traceback.format_exception(type(original), original, original.__traceback__, limit=-12))
        found.put(traceback=text[-TRACEBACK_CHARS:])
    return found


# What an error record written by a worker always holds, None included.
_WRITTEN = ("kind", "message", "more", "location", "library_frame")


def record(exc: BaseException) -> dict[str, Any]:
    """``error_record(exc)`` as a worker's JSON result holds it."""
    return error_record(exc).to_dict()


def is_app_failure(error: ErrorRecord | None) -> bool:
    """An error the app itself raised (as opposed to the device, its compiler,
    its memory or the process)."""
    return error is not None and error.kind in (ErrorKind.APP_ERROR, ErrorKind.NUMERICAL)
