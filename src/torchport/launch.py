"""Parent side of the worker protocol: start one backend run in a fresh
process, watch it, and always come back with a result.

Whatever the worker does (finishes, reports an error, crashes, is killed, hangs
past its timeout, runs one phase too long) the caller gets a dict with a
``status`` and whatever the worker had saved before it stopped.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from torchport.worker import EXIT_OK, EXIT_REPORTED_ERROR, PROGRESS_PREFIX

SRC_ROOT = str(Path(__file__).resolve().parent.parent)
STDERR_TAIL_LINES = 20

# glibc's malloc moves its mmap threshold with each process's allocation
# history, so one fresh process reuses its heap for a step's activations while
# the next maps and faults in fresh zeroed pages every step: on a 2-core host
# identical CPU workers differed by 10-40% for their whole lives.  Fixed
# thresholds make fresh processes agree (to ~1% measured, see
# benchmarks/bench_loop.py).  Recorded in each run's ``worker.allocator``;
# values the user has set in the environment are kept.
STEADY_ALLOCATOR = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


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
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in STEADY_ALLOCATOR.items():
        env.setdefault(name, value)
    return env


def run_worker(
    backend: str,
    function: str,
    *,
    app: str | None = None,
    config: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    timeout: float = 600.0,
    phase_timeout: float | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> dict[str, Any]:
    """Run ``function`` (``"module:attr"``, called with a WorkerContext) in a
    new worker process for ``backend``.  Never raises for worker failures."""
    from torchport import backends

    backend_cls = backends.get(backend)
    if python is None:
        try:
            python = worker_python(backend_cls)
        except Exception as exc:  # a missing environment ends this backend's run only
            return {"status": "error", "error": {"kind": "environment", "message": str(exc)}, "phases": {}}
    with tempfile.TemporaryDirectory(prefix="torchport-worker-") as scratch:
        output = os.path.join(scratch, "result.json")
        job = {
            "backend": backend,
            "function": function,
            "app": app,
            "config": config or {},
            "output": output,
            "scratch": scratch,
            **(extra or {}),
        }
        job_path = os.path.join(scratch, "job.json")
        with open(job_path, "w", encoding="utf-8") as handle:
            json.dump(job, handle)
        return _supervise(python, job_path, output, scratch, timeout, phase_timeout, on_progress, env)


def _supervise(python, job_path, output, scratch, timeout, phase_timeout, on_progress, env_extra):
    env = worker_environment()
    env["TORCHPORT_SPAWN_TIME"] = repr(time.time())
    env.update(env_extra or {})
    stderr_path = os.path.join(scratch, "stderr.txt")
    started = time.monotonic()
    current = {"phase": "start", "since": started}
    with open(stderr_path, "w+b") as stderr_file:
        process = subprocess.Popen(
            [python, "-m", "torchport.worker", job_path],
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # so a timeout can kill the worker's own children too
        )
        stdout_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        reader = threading.Thread(
            target=_read_progress, args=(process, current, on_progress, stdout_tail), daemon=True
        )
        reader.start()
        stopped_by = None
        try:
            while process.poll() is None:
                now = time.monotonic()
                if now - started > timeout:
                    stopped_by = f"timed out after {timeout:g} s (overall --timeout) during phase {current['phase']!r}"
                elif phase_timeout and now - current["since"] > phase_timeout:
                    stopped_by = f"timed out: phase {current['phase']!r} ran over {phase_timeout:g} s (per-phase timeout)"
                if stopped_by:
                    _kill_group(process)
                    break
                time.sleep(0.05)
        except KeyboardInterrupt:
            # Ctrl-C reaches only us (the worker has its own session): take it
            # down too, and still hand back what it had measured.
            _kill_group(process)
            stopped_by = "interrupted by the user"
        process.wait()
        # Whatever the worker started and left behind (compile or data-loader
        # processes in its session) goes with it.
        _kill_group(process)
        reader.join(timeout=5)
        stderr_file.seek(0)
        stderr_text = stderr_file.read().decode("utf-8", errors="replace")
    result = _read_result(output)
    result["wall_s"] = time.monotonic() - started
    result["exit_code"] = process.returncode
    result["last_phase"] = current["phase"]
    tail = [line for line in stderr_text.splitlines() if line.strip()][-STDERR_TAIL_LINES:]
    if stopped_by == "interrupted by the user":
        result["status"] = "interrupted"
        result["error"] = {"kind": "interrupted", "message": f"{stopped_by} during phase {current['phase']!r}"}
    elif stopped_by:
        result["status"] = "timed_out"
        result["error"] = {"kind": "timeout", "message": stopped_by}
    elif process.returncode == EXIT_OK and result.get("status") == "ok":
        pass
    elif process.returncode == EXIT_REPORTED_ERROR and result.get("error"):
        result["status"] = "error"
    else:
        result["status"] = "crashed"
        code = process.returncode
        if code is not None and code < 0:
            how = f"killed by signal {signal.Signals(-code).name}"
            if -code == signal.SIGKILL:
                how += " (SIGKILL: out of host memory, or killed from outside)"
        else:
            how = f"exited with status {code}"
        result["error"] = {"kind": "crash", "message": f"worker {how} during phase {current['phase']!r}"}
    if result["status"] != "ok":
        result["stderr_tail"] = tail
        if stdout_tail:
            result["stdout_tail"] = list(stdout_tail)
    return result


def _read_progress(process, current, on_progress, stdout_tail) -> None:
    for raw in process.stdout:
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        if line.startswith(PROGRESS_PREFIX):
            try:
                event = json.loads(line[len(PROGRESS_PREFIX):])
            except json.JSONDecodeError:
                continue
            current["phase"] = event.get("phase", current["phase"])
            current["since"] = time.monotonic()
            if on_progress is not None:
                try:
                    on_progress(event)
                except Exception:
                    pass
        elif line.strip():
            stdout_tail.append(line)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            process.kill()
        except ProcessLookupError:
            pass


def _read_result(output: str) -> dict[str, Any]:
    try:
        with open(output, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, json.JSONDecodeError):
        return {"phases": {}}
