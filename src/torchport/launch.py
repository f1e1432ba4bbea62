"""Parent side of the worker protocol: start one backend run in a fresh
process, watch it, and always come back with a result.

Whatever the worker does (finishes, reports an error, crashes, is killed, hangs
past its timeout, runs one phase too long) the caller gets a RunRecord with a
``status`` and whatever the worker had saved before it stopped (what a job
writes beyond the record's fields is in its ``extra``).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from torchport import compile_cache, failures, processes
from torchport.forkserver import ForkServer
from torchport.limits import DEFAULT_TIMEOUT_S, TAIL_LINES
from torchport.records import ErrorKind, ErrorRecord, RunBudget, RunRecord, RunStatus
from torchport.worker import EXIT_OK, EXIT_REPORTED_ERROR, PROGRESS_PREFIX

if TYPE_CHECKING:
    from torchport.app import AppSpec

# How much of a worker's stderr and of one stdout line is read back: a worker
# that prints 100 MB before it dies must not take the parent's memory with it.
STDERR_READ_BYTES = 64 * 1024
STDOUT_LINE_BYTES = 64 * 1024

# One value per torchport command: every process it starts carries it.
SESSION = uuid.uuid4().hex
_live: dict[int, str] = {}  # pid -> worker id, of the processes now running
_live_lock = threading.Lock()
_cancelled = threading.Event()
INTERRUPTED_MESSAGE = "interrupted by the user"


def cancelled() -> bool:
    """True once the command was interrupted: no new worker starts."""
    return _cancelled.is_set()


def cancel_all() -> None:
    """End every process this command started, and start no more (Ctrl-C,
    SIGTERM, SIGHUP).  Threads supervising a worker see it end and return an
    ``interrupted`` result."""
    _cancelled.set()
    with _live_lock:
        live = dict(_live)
    for pid, worker_id in live.items():
        end_process_tree(pid, worker_id)
    processes.kill_marked(processes.SESSION_VARIABLE, SESSION)


def end_process_tree(pid: int, worker_id: str) -> None:
    processes.kill_group(pid)
    processes.kill_marked(processes.WORKER_VARIABLE, worker_id)


def start_process(command: list[str], env: dict[str, str], fork_server: ForkServer | None = None,
                  **popen: Any) -> tuple[Any, str]:
    """Start a worker-like process in its own session, marked so that it and
    everything it starts can be ended (see torchport.processes); registered
    until ``finish_process``.  With ``fork_server``, a worker job (``command``
    ends with its job file) is forked from it instead: a ``ForkedProcess``."""
    worker_id = uuid.uuid4().hex
    env = {**env, processes.SESSION_VARIABLE: SESSION, processes.WORKER_VARIABLE: worker_id,
           processes.PARENT_VARIABLE: processes.identity(os.getpid())}
    server_failed = False
    with _live_lock:
        if _cancelled.is_set():
            raise KeyboardInterrupt
        process: Any = None
        if fork_server is not None:
            try:
                process = fork_server.start(command[-1], env, os.getcwd(), popen["stderr"])
            except OSError:  # the server is gone or stuck: this worker and the later ones start as fresh interpreters
                server_failed = True
        if process is None:
            process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, start_new_session=True, **popen)
        _live[process.pid] = worker_id
    if server_failed:
        _forget_fork_server(fork_server)
    return process, worker_id


def finish_process(process: Any, worker_id: str) -> None:
    """After the process ended: end what it left behind (its process group,
    and children that left the group with setsid)."""
    end_process_tree(process.pid, worker_id)
    with _live_lock:
        _live.pop(process.pid, None)

# glibc's malloc moves its mmap threshold with each process's allocation
# history, so one fresh process reuses its heap for a step's activations while
# the next maps and faults in fresh zeroed pages every step: on a 2-core host
# identical CPU workers differed by 10-40% for their whole lives.  Fixed
# thresholds make fresh processes agree (to ~1% measured, see
# benchmarks/bench_loop.py).  The mmap threshold is fixed at 32 MiB, the most
# glibc's own moving threshold ever reaches on 64-bit: buffers below it (every
# buffer of a small model) stay on the heap, as they would in a long-running
# process; larger ones (a real model's weights, gradients and logits) are
# mapped and returned one by one, so the worker's peak follows what it holds
# instead of heap fragmentation (with both at 1 GiB, GPT-2 small's worker
# peaked 18% above a plain loop's, benchmarks/bench_memory.py).  Recorded in
# each run's ``worker.allocator``; values the user has set are kept.
STEADY_ALLOCATOR = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}

# Thread pools, decided here once for every worker: each torch picks its own
# defaults (and a backend environment holds another torch), so the same app's
# step and batch fetch ran with different intra-op pools on cpu and xla and
# the pipeline verdict followed the pool, not the app.  The worker applies
# them before any torch work (``torchport.worker.apply_threads``) and records
# what torch reports in each run's ``worker.threads``.
INTEROP_THREADS_VARIABLE = "TORCHPORT_INTEROP_THREADS"
# Eager and compiled training steps run their kernels on the intra-op pool; an
# inter-op pool serves only explicit task parallelism (torch.jit.fork), and on
# a small host its extra threads only compete with the intra-op ones.
INTEROP_THREADS = 1


def worker_threads() -> dict[str, int]:
    """The intra-op and inter-op thread counts every worker runs with: the
    user's ``OMP_NUM_THREADS`` when set, else one intra-op thread per CPU this
    process may run on."""
    try:
        intra_op = max(1, int(os.environ["OMP_NUM_THREADS"]))
    except (KeyError, ValueError):
        intra_op = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        inter_op = max(1, int(os.environ[INTEROP_THREADS_VARIABLE]))
    except (KeyError, ValueError):
        inter_op = INTEROP_THREADS
    return {"intra_op": intra_op, "inter_op": inter_op}


def worker_python(backend_cls: Any) -> str:
    """The interpreter a backend's worker runs on: its environment's, or ours."""
    if backend_cls.environment is None:
        return sys.executable
    from torchport import envs

    return str(envs.python_for(backend_cls.environment))


def worker_environment() -> dict[str, str]:
    """The environment every worker process starts with (torchrun's ranks too)."""
    env = dict(os.environ)
    # The worker may run on another environment's interpreter: make this
    # torchport importable there without installing it.
    from torchport import envs

    env["PYTHONPATH"] = os.pathsep.join(filter(None, [envs.import_root(), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in STEADY_ALLOCATOR.items():
        env.setdefault(name, value)
    threads = worker_threads()
    env["OMP_NUM_THREADS"] = str(threads["intra_op"])
    env[INTEROP_THREADS_VARIABLE] = str(threads["inter_op"])
    return env


# Set to "0" to start every worker as a fresh interpreter (the figures before the fork server, for comparison).
FORK_SERVER_VARIABLE = "TORCHPORT_FORK_SERVER"
FORK_SERVER_READY_S = 120.0  # its imports took 1.5-5 s on the 2-core machine
_fork_server: ForkServer | None = None
_fork_server_state = {"failed": False}
_fork_server_lock = threading.Lock()


def fork_server_for(python: str, env_extra: dict[str, str] | None,
                    wait_s: float = FORK_SERVER_READY_S) -> ForkServer | None:
    """The fork server (``torchport.forkserver``) to fork this worker from, or
    None to start it as a fresh interpreter: only a worker on torchport's own
    interpreter, with the environment every worker gets (torch reads it at
    import, and the server imported torch with it).  Started on first use, and
    ended when the command exits.  A server that is not ready within
    ``wait_s`` (the first job's time limit) is given up, and workers start fresh."""
    global _fork_server
    if python != sys.executable or env_extra or os.environ.get(FORK_SERVER_VARIABLE) == "0":
        return None
    environment = worker_environment()
    with _fork_server_lock:
        if _fork_server is None and not _fork_server_state["failed"]:
            try:
                _fork_server = _start_fork_server(environment, min(wait_s, FORK_SERVER_READY_S))
            except KeyboardInterrupt:
                cancel_all()
            _fork_server_state["failed"] = _fork_server is None
        server = _fork_server
    return server if server is not None and server.environment == environment else None


def _start_fork_server(environment: dict[str, str], wait_s: float) -> ForkServer | None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process, worker_id = start_process([sys.executable, "-m", "torchport.forkserver", str(theirs.fileno())],
                                           environment, pass_fds=[theirs.fileno()],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        theirs.close()
    server = ForkServer(process, worker_id, ours, environment)
    if not server.wait_ready(max(wait_s, 0.0)):
        _end_fork_server(server)
        return None
    atexit.register(_forget_fork_server, server)
    return server


def _forget_fork_server(server: ForkServer | None) -> None:
    """End the server (it exits when its control socket closes; killed if it
    does not, with any worker it forked late) and start no other."""
    global _fork_server
    if server is None:
        return
    with _fork_server_lock:
        if _fork_server is server:
            _fork_server = None
            _fork_server_state["failed"] = True
    _end_fork_server(server)


def _end_fork_server(server: ForkServer) -> None:
    server.close()
    try:
        server.process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
    end_process_tree(server.process.pid, server.worker_id)
    with _live_lock:
        _live.pop(server.process.pid, None)


def run_worker(
    backend: str,
    function: str,
    *,
    app: AppSpec | str | None = None,
    config: dict[str, Any] | None = None,
    budget: RunBudget | None = None,
    extra: dict[str, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    phase_timeout: float | None = None,
    on_progress: Callable[[dict[str, str | float]], None] | None = None,  # a progress line: phase, time, details
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> RunRecord:
    """Run ``function`` (``"module:attr"``, called with a WorkerContext) in a
    new worker process for ``backend``.  Never raises for worker failures.
    ``app`` is the command's parsed spec (text from an API caller is parsed here); ``budget``
    this run's share of an evaluation's time budget (the worker's sampling plans with it)."""
    from torchport import backends
    from torchport.app import as_spec

    backend_cls = backends.get(backend)
    if cancelled():
        return _interrupted_result("before the worker started")
    if python is None:
        try:
            python = worker_python(backend_cls)
        except Exception as exc:  # a missing environment ends this backend's run only
            error = ErrorRecord(kind=ErrorKind.ENVIRONMENT, message=failures.first_line(str(exc))[0])
            return RunRecord.from_dict({"status": RunStatus.ERROR.value, "error": error.to_dict(), "phases": {}})
    if backend_cls.compile_backend == "inductor":
        compile_cache.sweep_once({**os.environ, **(env or {})})
    with tempfile.TemporaryDirectory(prefix="torchport-worker-") as scratch:
        output = os.path.join(scratch, "result.json")
        job = {
            "backend": backend,
            "function": function,
            "app": None if app is None else as_spec(app).to_dict(),
            "config": config or {},
            "budget": None if budget is None else budget.to_dict(),
            "output": output,
            "scratch": scratch,
            **(extra or {}),
        }
        job_path = os.path.join(scratch, "job.json")
        with open(job_path, "w", encoding="utf-8") as handle:
            json.dump(job, handle)
        return _supervise(python, job_path, output, scratch, timeout, phase_timeout, on_progress, env)


def _interrupted_result(when: str) -> RunRecord:
    return RunRecord.from_dict({"status": RunStatus.INTERRUPTED.value, "phases": {}}).put(
        error=ErrorRecord(kind=ErrorKind.INTERRUPTED, message=f"{INTERRUPTED_MESSAGE} {when}"))


@dataclass
class RunningPhase:
    """The phase a supervised process reported last, and when (``time.monotonic()``) it began."""

    phase: str
    since: float


@dataclass
class Supervised:
    """How a supervised process ended: its exit code (None if it never
    started), and why torchport ended it (None when it ended by itself)."""

    exit_code: int | None
    stopped_by: str | None
    wall_s: float
    timed_out: bool = False
    # Kernel libraries it left half-written in inductor's cache, removed (compile_cache).
    removed_from_cache: tuple[str, ...] = ()


def supervise(command: list[str], env: dict[str, str], *, timeout: float, phase_timeout: float | None = None,
              current: RunningPhase | None = None, on_start: Callable[[Any], None] | None = None,
              fork_server: ForkServer | None = None, started: float | None = None, **popen: Any) -> Supervised:
    """The one place a torchport process is started, watched, timed out and
    ended: a single-process worker (``run_worker``) and torchrun with its
    ranks (``torchport.check.distributed.launch``) alike.

    The process starts in its own session with torchport's markers
    (``start_process``); it is ended, with everything it started, at
    ``timeout`` seconds, when the phase in ``current`` (a ``RunningPhase``,
    kept up to date by the caller's reader) runs past ``phase_timeout``, or
    when the command is interrupted; and in every case, once it has ended,
    whatever it left behind goes too (``finish_process``).  A worker forked
    from ``fork_server`` is watched and ended the same way.  ``started``
    (``time.monotonic()``) is when its time began, if before this call."""
    started = time.monotonic() if started is None else started
    wall_started = time.time() - (time.monotonic() - started)
    current = current if current is not None else RunningPhase("start", started)
    try:
        process, worker_id = start_process(command, env, fork_server, **popen)
    except KeyboardInterrupt:
        return Supervised(None, f"{INTERRUPTED_MESSAGE} before the process started", 0.0)
    if on_start is not None:
        on_start(process)
    stopped_by = None
    timed_out = False
    try:
        while process.poll() is None:
            now = time.monotonic()
            if _cancelled.is_set():
                stopped_by = INTERRUPTED_MESSAGE
            elif now - started > timeout:
                timed_out = True
                stopped_by = (f"timed out after {timeout:g} s (overall --timeout) during phase {current.phase!r}"
                              + _before_first_step(current.phase))
            elif phase_timeout and now - current.since > phase_timeout:
                timed_out = True
                stopped_by = (f"timed out: phase {current.phase!r} ran over {phase_timeout:g} s (per-phase timeout)"
                              + _before_first_step(current.phase))
            if stopped_by:
                end_process_tree(process.pid, worker_id)
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        # Ctrl-C reaches only us (the process has its own session): end it
        # and every other worker, and still hand back what it had measured.
        cancel_all()
        stopped_by = INTERRUPTED_MESSAGE
    process.wait()
    # Whatever the process started and left behind (compile or data-loader
    # processes, torchrun's ranks, also those that called setsid) goes with it.
    finish_process(process, worker_id)
    removed: tuple[str, ...] = ()
    if stopped_by or (process.returncode is not None and process.returncode < 0):
        removed = tuple(str(path) for path in compile_cache.remove_unfinished(env, wall_started))
    return Supervised(process.returncode, stopped_by, time.monotonic() - started, timed_out, removed)


def _before_first_step(phase: str) -> str:
    # "init" runs from the app's (or script's) start to its first training
    # step: an endless loop or a wait there reads as a slow start otherwise.
    if phase != "init":
        return ""
    return ", before the first training step: no optimizer step was seen (a loop or a wait before it?)"


def _supervise(python, job_path, output, scratch, timeout, phase_timeout, on_progress, env_extra):
    # The wait for the fork server to import torch is the worker's time: it counts against its timeout.
    started = time.monotonic()
    fork_server = fork_server_for(python, env_extra, wait_s=timeout)
    env = worker_environment()
    env["TORCHPORT_SPAWN_TIME"] = repr(time.time())
    env.update(env_extra or {})
    stderr_path = os.path.join(scratch, "stderr.txt")
    current = RunningPhase("start", started)
    stdout_tail: deque[str] = deque(maxlen=TAIL_LINES)
    readers: list[threading.Thread] = []

    def start_reader(process: subprocess.Popen) -> None:
        reader = threading.Thread(target=_read_progress, args=(process, current, on_progress, stdout_tail),
                                  daemon=True)
        reader.start()
        readers.append(reader)

    with open(stderr_path, "w+b") as stderr_file:
        ended = supervise([python, "-m", "torchport.worker", job_path], env, timeout=timeout,
                          phase_timeout=phase_timeout, current=current, on_start=start_reader,
                          fork_server=fork_server, started=started, stdout=subprocess.PIPE, stderr=stderr_file)
        if ended.exit_code is None:
            return _interrupted_result("before the worker started")
        for reader in readers:
            reader.join(timeout=5)
        stderr_text = _tail_of(stderr_file)
    stopped_by = ended.stopped_by
    # The process boundary: the worker's JSON becomes a record here.  Keys are
    # set with ``put`` so that result.json keeps them in the order they came.
    result = RunRecord.from_dict(_read_result(output))
    result.put(wall_s=time.monotonic() - started, exit_code=ended.exit_code, last_phase=current.phase)
    tail = failures.cap_tail(stderr_text.splitlines())
    if stopped_by == INTERRUPTED_MESSAGE:
        result.put(status=RunStatus.INTERRUPTED, error=ErrorRecord(
            kind=ErrorKind.INTERRUPTED, message=f"{stopped_by} during phase {current.phase!r}"))
    elif stopped_by:
        result.put(status=RunStatus.TIMED_OUT, error=ErrorRecord(kind=ErrorKind.TIMEOUT, message=stopped_by))
    elif ended.exit_code == EXIT_OK and result.status == RunStatus.OK:
        pass
    elif ended.exit_code == EXIT_REPORTED_ERROR and result.error:
        result.put(status=RunStatus.ERROR)
    else:
        code = ended.exit_code
        if code is not None and code < 0:
            how = f"killed by signal {signal.Signals(-code).name}"
            if -code == signal.SIGKILL:
                how += " (SIGKILL: out of host memory, or killed from outside)"
        else:
            how = f"exited with status {code}"
        kind = ErrorKind.CRASH
        if any("out of memory" in line.lower() for line in tail):
            kind = ErrorKind.OUT_OF_MEMORY
        result.put(status=RunStatus.CRASHED,
                   error=ErrorRecord(kind=kind, message=f"worker {how} during phase {current.phase!r}"))
    if ended.removed_from_cache and result.error is not None:
        result.error.message += (f"; removed {len(ended.removed_from_cache)} kernel librar"
                                 f"{'y' if len(ended.removed_from_cache) == 1 else 'ies'} it left half-written in "
                                 f"inductor's cache ({ended.removed_from_cache[0]}), which would fail every later "
                                 "compile of the same graph")
    if result.status != RunStatus.OK:
        result.put(stderr_tail=tail)
        if stdout_tail:
            result.put(stdout_tail=failures.cap_tail(list(stdout_tail)))
    return result


def _tail_of(handle) -> str:
    """The last STDERR_READ_BYTES of a file, decoded; the first line may be cut."""
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - STDERR_READ_BYTES))
    return handle.read().decode("utf-8", errors="replace")


def _read_progress(process, current, on_progress, stdout_tail) -> None:
    while True:
        raw = process.stdout.readline(STDOUT_LINE_BYTES)
        if not raw:
            break
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        if line.startswith(PROGRESS_PREFIX):
            try:
                event = json.loads(line[len(PROGRESS_PREFIX):])
            except json.JSONDecodeError:
                continue
            current.phase = event.get("phase", current.phase)
            current.since = time.monotonic()
            if on_progress is not None:
                try:
                    on_progress(event)
                except Exception:
                    pass
        elif line.strip():
            stdout_tail.append(line)


def _read_result(output: str) -> dict[str, Any]:
    try:
        with open(output, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, json.JSONDecodeError):
        return {"phases": {}}
