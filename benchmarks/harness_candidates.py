"""What ``bench_loop.py --candidates`` switches off inside torchport's worker,
one candidate per paired run, to find what the harness costs a timed step.

``job`` is a worker job (``torchport.worker`` runs it as it runs
``torchport.protocol:evaluate_job``): it switches off the candidate named in
the job's config, then runs the real evaluate job unchanged.  ``facts`` is
read in both processes after their timed blocks: what the two could differ in
that is not switched (threads, affinity, allocator and OpenMP settings, Python
threads, objects the garbage collector tracks).

Imported by the worker and by the hand-written loop (bench_loop.py puts this
folder on their path); standard library only at import.
"""
from __future__ import annotations

import gc
import os
import threading
from typing import Any

# name -> what is switched off in the worker.
CANDIDATES = {
    "watchdog": "the parent-watchdog thread (no watchdog at all)",
    "watchdog-poll": "the polling watchdog, a thread reading /proc every 0.25 s (switched ON, in place of the pidfd one)",
    "host-memory": "host memory per phase (VmHWM read and reset at each phase boundary)",
    "progress": "progress lines to the parent (and the phase boundaries of host memory)",
    "hooks": "evaluate's per-step additions: samples and tokens counted, batch signatures, data-wait timers",
    "kept-losses": "the detached losses kept for reading after each phase",
    "dynamo-logs": "Dynamo's graph-break and recompile logs and their collecting handler (compile backends)",
    "interop-threads": "the worker's one inter-op thread (torch keeps its default pool, as the hand-written loop does)",
}

# Candidates applied where the worker starts (its environment), not inside it:
# the inter-op pool can be sized only before torch's first parallel work.
WORKER_ENVIRONMENT = {"interop-threads": {"TORCHPORT_INTEROP_THREADS": ""}}


def facts() -> dict[str, Any]:
    import torch

    return {
        "torch_threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python_threads": sorted(thread.name for thread in threading.enumerate()),
        "environment": {name: value for name, value in os.environ.items()
                        if name.startswith(("MALLOC_", "OMP_", "MKL_", "KMP_", "GOMP_", "PYTHON", "TORCH"))
                        and name not in ("TORCHPORT_SPAWN_TIME", "TORCHPORT_TURNS", "TORCHPORT_WORKER_ID",
                                         "TORCHPORT_PARENT", "PYTHONPATH")},
        "gc_tracked_objects": len(gc.get_objects()),
        "gc_thresholds": list(gc.get_threshold()),
        "gc_collections": [generation["collections"] for generation in gc.get_stats()],
    }


def _switch_off(name: str, context: Any) -> None:
    from torchport import processes

    if name in ("watchdog", "watchdog-poll"):
        if processes.active_watch is not None:
            processes.active_watch.stop()
        if name == "watchdog-poll":
            processes.watch_parent("poll")
    elif name == "host-memory":
        context.memory = None
    elif name == "progress":
        context.memory = None

        def no_progress(phase: str, **details: Any) -> None:
            pass

        context.progress = no_progress
    elif name == "hooks":
        from torchport import engine, protocol

        class NoCounts(protocol.EvaluateHooks):
            def __init__(self, engine_: Any, first_signature: list[tuple] | None = None):
                self.samples, self.tokens, self.on_batch = 0, None, None

        def plain_next(stream: Any) -> tuple[Any, float]:
            return stream._next_batch(), 0.0

        protocol.EvaluateHooks = NoCounts  # type: ignore[misc]
        engine.BatchStream.next = plain_next  # type: ignore[method-assign]
    elif name == "kept-losses":
        from torchport import protocol

        original = protocol.Scenario.__init__

        def without_values(self: Any, name_: str, step: Any, backend: Any, check_value: Any,
                           turn: Any = None) -> None:
            original(self, name_, step, backend, None, turn)

        protocol.Scenario.__init__ = without_values  # type: ignore[method-assign]
    elif name == "dynamo-logs":
        from torchport import dynamo_counters

        dynamo_counters._logs_active = False  # start() then leaves torch's logging as the hand-written loop has it
    elif name not in ("none", *WORKER_ENVIRONMENT):
        raise ValueError(f"unknown candidate {name!r}")


# Resource usage of each timed training block, read around it (outside its
# clock): page faults do not depend on the machine's load, so a difference in
# faults per step between the two processes is a cause, not noise.
BLOCK_USAGE: list[tuple[int, list[int]]] = []


def usage() -> list[int]:
    import resource

    now = resource.getrusage(resource.RUSAGE_SELF)
    return [now.ru_minflt, now.ru_majflt, now.ru_nvcsw, now.ru_nivcsw]


def record_block(steps: int, before: list[int]) -> None:
    BLOCK_USAGE.append((steps, [after - first for after, first in zip(usage(), before)]))


def per_step_usage(last_blocks: int) -> dict[str, float]:
    """Minor and major faults and context switches per step over the last blocks."""
    kept = BLOCK_USAGE[-last_blocks:]
    steps = sum(steps for steps, _ in kept) or 1
    totals = [sum(delta[index] for _, delta in kept) for index in range(4)]
    return {name: round(total / steps, 2) for name, total in
            zip(("minor_faults", "major_faults", "voluntary_switches", "involuntary_switches"), totals)}


def _count_training_blocks() -> None:
    from torchport import protocol

    original = protocol.Scenario.run_block

    def counted(self: Any, steps: int) -> Any:
        if self.name != "training":
            return original(self, steps)
        # Read after the block's turn is granted, as the hand-written loop
        # does: waiting for the turn is a voluntary context switch of its own.
        turn, before = self.turn, []

        def turn_then_read() -> None:
            turn()
            before.extend(usage())

        self.turn = turn_then_read
        try:
            block = original(self, steps)
        finally:
            self.turn = turn
        record_block(steps, before)
        return block

    protocol.Scenario.run_block = counted  # type: ignore[method-assign]


def job(context: Any) -> None:
    from torchport.protocol import evaluate_job

    _switch_off(context.config.get("candidate", "none"), context)
    _count_training_blocks()
    evaluate_job(context)
    context.result.put(harness_facts={**facts(), "per_step": per_step_usage(context.config["blocks"])})
