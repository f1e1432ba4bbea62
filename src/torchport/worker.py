"""What runs inside a backend's own process.

``python -m torchport.worker JOB.json`` loads the job, creates the backend's
device, calls the job function and writes its result to the job's ``output``
file.  One process per backend run, always: out-of-tree accelerators rename
PyTorch's PrivateUse1 device once per process, and a crash, hang or OOM here
must not take other backends down.

Conversation with the parent, kept deliberately small:

* stdout carries progress lines ``@@torchport {"phase": ...}``;
* ``output`` holds the result, rewritten atomically whenever a job calls
  ``context.save()``, so a worker killed later still leaves what it measured;
* the exit status is 0 on success, 3 when the job failed with a reported error.

This file runs on every torch a backend environment holds (2.9 and newer) and
imports only the standard library before the job starts.
"""
from __future__ import annotations

import time

WORKER_STARTED = time.time()

import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

if TYPE_CHECKING:
    from torchport.app import AppSpec
    from torchport.records import ErrorRecord, RunBudget, RunRecord, ThreadPools

PROGRESS_PREFIX = "@@torchport "
# How this process was started: "spawned" (a fresh interpreter) or "forked"
# (from the fork server, torch already imported: torchport.forkserver).
LAUNCH = "spawned"
# A forked worker's imports (torch's, and its backend's ``worker_imports``) were
# paid once, by the fork server, in this many seconds: its import phase counts
# them, as a training script's first seconds do.
PRELOADED_IMPORT_S = 0.0
EXIT_OK = 0
EXIT_REPORTED_ERROR = 3


@dataclass
class WorkerContext:
    """What a job function gets: its backend (device ready), the job spec, and
    a place to put results."""

    job: dict[str, Any]
    backend: Any
    # The run the parent reads back: a job sets its fields (and keys of its own, in ``extra``) with ``put``,
    # which writes them in the order they were set.
    result: RunRecord
    # Called before each timed block: a paired benchmark's turn-taking
    # (torchport.turns) when the parent coordinates one, else None.
    take_turn: Callable[[], None] | None = None
    # Peak host memory per phase (torchport.host_memory), in the result as "host_memory".
    memory: Any = None

    @property
    def config(self) -> dict[str, Any]:
        return self.job.get("config", {})

    @property
    def budget(self) -> RunBudget | None:
        """This run's share of an evaluation's time budget (the parent's plan); None: no budget."""
        from torchport.records import RunBudget

        entry = self.job.get("budget")
        return RunBudget.from_dict(entry) if entry else None

    @property
    def started(self) -> float:
        """``time.time()`` when this worker process was started by its parent."""
        return float(os.environ.get("TORCHPORT_SPAWN_TIME", WORKER_STARTED))

    @property
    def app_spec(self) -> AppSpec | None:
        """The parent's parsed app spec (``AppSpec.to_dict`` in the job)."""
        from torchport.app import AppSpec

        data = self.job.get("app")
        return None if data is None else AppSpec.from_dict(data)

    def progress(self, phase: str, **details: str | float) -> None:
        """Tell the parent which phase is running (it enforces per-phase timeouts)."""
        report_progress(self.memory, phase, **details)

    def record_phase(self, name: str, seconds: float) -> None:
        """Add one phase's seconds to the run's ``phases``."""
        phases = self.result.phases
        if phases is None:
            self.result.put(phases=(phases := {}))
        phases[name] = seconds

    def save(self) -> None:
        """Write the result so far (at phase ends: a record's ``to_dict`` is no per-step work)."""
        if self.memory is not None:
            self.result.put(host_memory=self.memory.record())
        write_json_atomic(self.job["output"], self.result.to_dict())


def report_progress(memory: Any, phase: str, **details: str | float) -> None:
    """Tell the parent which phase is running; close the last phase's host-memory peak."""
    if memory is not None:
        memory.enter(phase)
    line = json.dumps({"phase": phase, "time": time.time(), **details})
    print(PROGRESS_PREFIX + line, flush=True)


def write_json_atomic(path: str, document: dict[str, Any]) -> None:
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1, default=_json_default)
    os.replace(temporary, path)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def _resolve(function_path: str) -> Callable[[WorkerContext], None]:
    module_name, _, attribute = function_path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _turn_taking() -> Callable[[], None] | None:
    from torchport import turns

    return turns.take_turn if os.environ.get(turns.ENVIRONMENT_VARIABLE) else None


def classify_error(exc: BaseException) -> ErrorRecord:
    """Turn an exception into the result's error record (torchport.failures)."""
    from torchport.failures import error_record

    return error_record(exc)


def apply_threads(torch: Any) -> ThreadPools:
    """Set torch's thread pools to the parent's decision (``OMP_NUM_THREADS``
    and ``TORCHPORT_INTEROP_THREADS``, see ``torchport.launch.worker_threads``)
    before any torch work; what torch then reports, for the result."""
    asked: dict[str, int] = {}
    for key, variable in (("intra_op", "OMP_NUM_THREADS"), ("inter_op", "TORCHPORT_INTEROP_THREADS")):
        try:
            asked[key] = max(1, int(os.environ[variable]))
        except (KeyError, ValueError):
            pass
    # torch sizes its pool from OMP_NUM_THREADS at import; calling
    # set_num_threads anyway made GPT-2-sized CPU steps 3-5% slower than a
    # plain loop's with the same variable (benchmarks/bench_loop.py), so it is
    # called only when torch did not take the count from the environment.
    if "intra_op" in asked and torch.get_num_threads() != asked["intra_op"]:
        torch.set_num_threads(asked["intra_op"])
    if "inter_op" in asked and torch.get_num_interop_threads() != asked["inter_op"]:
        try:
            torch.set_num_interop_threads(asked["inter_op"])
        except RuntimeError:  # the pool had already started: torch keeps the one it has
            pass
    from torchport.records import ThreadPools

    return ThreadPools(intra_op=torch.get_num_threads(), inter_op=torch.get_num_interop_threads(), asked=asked or None)


def main(argv: list[str]) -> int:
    from torchport.host_memory import PhasePeaks
    from torchport.processes import watch_parent

    threads_at_start = _thread_count()
    watch_parent()
    with open(argv[0], encoding="utf-8") as handle:
        job = json.load(handle)
    # The backend this process runs for, visible to the app's code (a script
    # that must know its device) and to child processes.
    os.environ["TORCHPORT_BACKEND"] = str(job.get("backend"))
    spawned = float(os.environ.get("TORCHPORT_SPAWN_TIME", WORKER_STARTED))
    phases = {"process_start_s": max(0.0, WORKER_STARTED - spawned)}
    memory = PhasePeaks()
    take_turn = _turn_taking()
    context: WorkerContext | None = None
    try:
        report_progress(memory, "import")
        import_started = time.time()
        import torch

        threads = apply_threads(torch)
        from torchport import backends
        from torchport.records import RunStatus, WorkerInfo

        # The run record starts once the records are imported (with the backends, in the import phase).
        context = WorkerContext(job=job, backend=None, result=_new_result(phases), take_turn=take_turn, memory=memory)
        result = context.result
        backend = backends.get(job["backend"])()
        for module in backend.worker_imports():
            importlib.import_module(module)
        result.put(worker=WorkerInfo(
            python=sys.version.split()[0], torch=torch.__version__, executable=sys.executable, pid=os.getpid(),
            allocator={name: value for name, value in os.environ.items() if name.startswith("MALLOC_")},
            threads=threads, launch=LAUNCH, threads_at_start=threads_at_start))
        context.progress("device")
        backend.setup()
        context.backend = backend
        result.put(device=backend.device_info())
        job_function = _resolve(job["function"])
        phases["import_s"] = time.time() - import_started + PRELOADED_IMPORT_S
        if LAUNCH == "forked":
            phases["preloaded_import_s"] = PRELOADED_IMPORT_S
        context.save()
        job_function(context)
        result.put(status=RunStatus.OK)
        context.save()
        return EXIT_OK
    except BaseException as exc:  # everything is reported; the parent decides what it means
        from torchport.records import RunStatus

        if context is None:  # it failed before the records were imported
            context = WorkerContext(job=job, backend=None, result=_new_result(phases), memory=memory)
        error = classify_error(exc)
        context.result.put(status=RunStatus.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else RunStatus.ERROR,
                           error=error)
        context.save()
        if error.traceback:
            print(error.traceback, file=sys.stderr)
        return EXIT_REPORTED_ERROR


def _new_result(phases: dict[str, float]) -> RunRecord:
    from torchport.records import RunRecord, RunStatus

    return RunRecord(key_order=()).put(status=RunStatus.RUNNING, phases=phases)


def _thread_count() -> int | None:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc (macOS)
        return None


def exit_now(exit_status: int) -> None:
    """End the worker process with ``exit_status`` once its output is out."""
    # The result is saved and the progress lines are out: skip the interpreter's
    # teardown (freeing every tensor, unloading torch and inductor), which took
    # 0.8-1.1 s per worker on the 2-core machine, a sixth of the demo's time.
    sys.stdout.flush()
    sys.stderr.flush()
    try:  # C-level stdio too (runtime logs written by native code)
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    os._exit(exit_status)


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
