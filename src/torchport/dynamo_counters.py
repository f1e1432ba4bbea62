"""What torch.compile (Dynamo) did, per phase: frames compiled, graph breaks
with their reason and the user's line, recompilations with the guard that failed.

Used by every backend with a ``compile_backend`` (see torchport.backends.Backend):
the backend's counter snapshots carry a Dynamo snapshot, and a phase's summary
carries what changed.  Runs inside the worker; every torch call here is to
torch internals, so it reads only what torch 2.13 has been checked to provide
(the sources listed below, read in torch 2.13's own code) and degrades to fewer
figures, never to an error, when something is missing.

Sources, and why each:

* ``torch._dynamo.utils.counters``: ``frames.total`` (every Dynamo compile,
  recompiles included), ``frames.ok`` (frames that produced code),
  ``stats.unique_graphs``.  Not reset by ``torch._dynamo.reset()``; diffed.
* the ``graph_breaks`` and ``recompiles`` artifact logs, captured by a handler
  on the ``torch._dynamo`` logger: ``counters["graph_break"]`` misses
  data-dependent branches (``if tensor:``) in torch 2.13, the log does not.
* ``get_compilation_metrics()``: compile time per compiled frame.
"""
from __future__ import annotations

import logging
import os
import re
import sys

from torchport.records import DynamoCounts, GraphBreak, RecompileCause

# A phase summary lists at most this many distinct graph breaks / recompilations.
MAX_LISTED = 20
MAX_TEXT = 300

_records: list[tuple[str, str]] = []  # (kind, message), in the order Dynamo logged them
_logs_active: bool | None = None  # None: not started yet
_logs_problem: str | None = None


class _Collector(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        name = record.name
        if name.endswith("__graph_breaks"):
            kind = "graph_break"
        elif name.endswith("__recompiles"):
            kind = "recompile"
        else:
            return
        try:
            _records.append((kind, record.getMessage()))
        except Exception:  # a malformed record must not break the app's compile
            pass


def start() -> None:
    """Capture graph-break and recompile records from here on.  Idempotent;
    call before the first compile."""
    global _logs_active, _logs_problem
    if _logs_active is not None:
        return
    _logs_active = False
    try:
        import torch
        import torch._dynamo.utils as dynamo_utils

        limit = getattr(dynamo_utils, "set_compilation_metrics_limit", None)
        if limit is not None:  # the store keeps the last 64 records by default
            limit(10**5)
        if os.environ.get("TORCH_LOGS"):
            # torch ignores set_logs() when TORCH_LOGS is set.
            _logs_problem = "TORCH_LOGS is set in the environment, so graph-break and recompile records are not captured"
            return
        torch._logging.set_logs(graph_breaks=True, recompiles=True)
        dynamo_logger = logging.getLogger("torch._dynamo")
        # set_logs puts torch's own stderr handler there; the records are data for the report, not console output.
        for handler in list(dynamo_logger.handlers):
            if type(handler) is logging.StreamHandler:
                dynamo_logger.removeHandler(handler)
        dynamo_logger.addHandler(_Collector())
        _logs_active = True
    except Exception as exc:  # a torch without these internals: counters only
        _logs_problem = f"graph-break and recompile logs unavailable on this torch: {type(exc).__name__}: {exc}"


def snapshot() -> dict[str, int]:
    """Counter values now: a few dictionary reads, no device work.  Never the
    first import of Dynamo (it may run in another thread than the app's own,
    e.g. script mode's protocol thread): before that import nothing compiled."""
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    if dynamo_utils is None or not hasattr(dynamo_utils, "counters"):
        return {"frames_total": 0, "frames_ok": 0, "unique_graphs": 0, "records": len(_records), "metrics": 0}
    counters = dynamo_utils.counters
    metrics = dynamo_utils.get_compilation_metrics() if hasattr(dynamo_utils, "get_compilation_metrics") else []
    return {
        "frames_total": int(counters["frames"]["total"]),
        "frames_ok": int(counters["frames"]["ok"]),
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
        "records": len(_records),
        "metrics": len(metrics),
    }


def new_compilations(before: dict[str, int], after: dict[str, int]) -> int | None:
    """Dynamo compiles between two snapshots (first compiles and recompiles)."""
    if "frames_total" not in after:
        return None
    return after["frames_total"] - before.get("frames_total", 0)


def summarize(before: dict[str, int], after: dict[str, int]) -> DynamoCounts:
    """What Dynamo did between two snapshots."""
    if "frames_total" not in after:
        return DynamoCounts(source="torch._dynamo counters unavailable on this torch", key_order=("source",))
    import torch

    graph_breaks: dict[tuple[str, str], GraphBreak] = {}
    recompilations: list[RecompileCause] = []
    for kind, message in _records[before.get("records", 0):after["records"]]:
        if kind == "graph_break":
            item = parse_graph_break(message)
            site = graph_breaks.setdefault((item.location or "", item.reason or ""), item)
            site.count = (site.count or 0) + 1
        else:
            recompilations.append(parse_recompile(message))
    compile_time = None
    try:
        import torch._dynamo.utils as dynamo_utils

        window = list(dynamo_utils.get_compilation_metrics())[before.get("metrics", 0):after["metrics"]]
        compile_time = sum(m.entire_frame_compile_time_s or 0.0 for m in window)
    except Exception:
        pass
    frames = after["frames_total"] - before.get("frames_total", 0)
    frames_ok = after["frames_ok"] - before.get("frames_ok", 0)
    return DynamoCounts(
        frames_compiled=frames_ok,
        frames_not_compiled=frames - frames_ok,
        graphs=after["unique_graphs"] - before.get("unique_graphs", 0),
        graph_breaks=sum(item.count or 0 for item in graph_breaks.values()) if _logs_active else None,
        graph_break_sites=list(graph_breaks.values())[:MAX_LISTED],
        recompilations=len(recompilations) if _logs_active else None,
        recompilation_causes=recompilations[:MAX_LISTED],
        compile_time_s=compile_time,
        source=f"torch._dynamo counters and graph_breaks/recompiles logs (torch {torch.__version__}); "
               "compile time: Dynamo's per-frame compile metrics (forward frames; lazy backward compiles not included)",
        problem=_logs_problem,
        key_order=_SUMMARY_KEYS + (("problem",) if _logs_problem else ()),
    )


# The keys of a phase's summary in the order the run record has always held them.
_SUMMARY_KEYS = ("frames_compiled", "frames_not_compiled", "graphs", "graph_breaks", "graph_break_sites",
                 "recompilations", "recompilation_causes", "compile_time_s", "source")


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_HEADER = re.compile(r"in user code at (.+?):(\d+)\s*$", re.MULTILINE)


def _library_dirs() -> tuple[str, ...]:
    import torch

    import torchport

    return (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(torchport.__file__) + os.sep)


def user_location(message: str) -> str | None:
    """The innermost frame of the user's code in a Dynamo record: the last
    ``File "...", line N`` outside torch and torchport; else the record's header
    (which names the innermost traced frame, possibly inside torch)."""
    libraries = _library_dirs()
    frames = [(path, line) for path, line in _FRAME.findall(message) if not path.startswith(libraries)]
    if frames:
        path, line = frames[-1]
        return f"{path}:{line}"
    header = _HEADER.search(message)
    return f"{header.group(1)}:{header.group(2)}" if header else None


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def parse_graph_break(message: str) -> GraphBreak:
    """Reason (its first line) and the user's file:line of one graph-break record."""
    reason = re.search(r"Graph Break Reason: (.*)", message)
    if reason:
        text = reason.group(1).strip()
    else:  # older torch: "Skipping frame because there is a graph break in a for/while loop" and similar
        text = message.strip().splitlines()[0] if message.strip() else "graph break"
    return GraphBreak(reason=_cap(text), location=user_location(message), count=0,
                      key_order=("reason", "location", "count"))


def parse_recompile(message: str) -> RecompileCause:
    """The recompiled function, where it is, and the first guard that failed."""
    head = re.search(r"Recompiling function (\S+) in (.+?):(\d+)", message)
    guard = re.search(r"^\s*- (.+)$", message, re.MULTILINE)
    return RecompileCause(
        function=head.group(1) if head else None,
        location=f"{head.group(2)}:{head.group(3)}" if head else None,
        guard=_cap(guard.group(1).strip()) if guard else _cap(message.strip().splitlines()[-1] if message.strip() else ""),
        key_order=("function", "location", "guard"),
    )
