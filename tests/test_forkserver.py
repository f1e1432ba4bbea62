"""Workers forked from the fork server (torchport.forkserver), on real
processes: each is a process of its own (its pid, its session, one thread
when its job begins), reports what a freshly spawned worker reports (the same
losses and host memory, the same failures, exit codes and stderr), is ended on a timeout with
what it started, and dies with its torchport parent, the server too.

Each case runs in a stand-in torchport command (a Python process calling
``torchport.launch.run_worker``), so that every case gets a fork server of its
own and the spawned comparison (``TORCHPORT_FORK_SERVER=0``) none."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from torchport import processes

TESTS = Path(__file__).resolve().parent
SRC = str(TESTS.parent / "src")
FAULT_APP = str(TESTS / "apps" / "faults" / "by_backend.py")
MARKER = "TORCHPORT_FORK_TEST"
QUICK = {"steps": 4, "blocks": 2, "max_warmup_steps": 4, "inference": False}

# The stand-in command: run each (backend, job, app, keyword arguments) case
# through run_worker, print one JSON line per result, and the fork server's pid.
COMMAND = """
import json, sys
from torchport import launch
for backend, job, app, kwargs in json.loads(sys.argv[1]):
    print(json.dumps(launch.run_worker(backend, job, app=app, **kwargs).to_dict()), flush=True)
server = launch.fork_server_for(sys.executable, None)
print(json.dumps({"server_pid": server.process.pid if server else None}), flush=True)
"""

needs_linux = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")


def _environment(forked: bool, marker: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "TORCHPORT_BACKEND_PATH": str(TESTS / "plugins"), MARKER: marker,
            "TORCHPORT_FORK_SERVER": "1" if forked else "0"}


def _run(cases: list, forked: bool, tmp_path: Path) -> tuple[list[dict], int | None]:
    marker = uuid.uuid4().hex
    completed = subprocess.run([sys.executable, "-c", COMMAND, json.dumps(cases)], capture_output=True, text=True,
                               timeout=600, env=_environment(forked, marker), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = [json.loads(line) for line in completed.stdout.splitlines()]
    assert _left_behind(marker) == [], "a process of the command outlived it"
    return lines[:-1], lines[-1]["server_pid"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _left_behind(marker: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        alive = [pid for pid in processes.marked(MARKER, marker) if _alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _train_case(work: Path) -> list:
    run = {"label": "cpu", "dtype": "float32", "seed": 0, "steps": 3}
    return ["cpu", "torchport.check.jobs:train_job", "builtin:classifier",
            {"extra": {"work_dir": str(work), "runs": [run]}}]


@needs_linux
def test_a_forked_worker_is_a_process_of_its_own_and_trains_as_a_spawned_one(tmp_path):
    forked, server = _run([_train_case(tmp_path / "a"), _train_case(tmp_path / "b")], True, tmp_path)
    spawned, no_server = _run([_train_case(tmp_path / "c")], False, tmp_path)
    assert no_server is None and spawned[0]["worker"]["launch"] == "spawned"
    assert server is not None
    pids = {result["worker"]["pid"] for result in forked}
    assert len(pids) == 2 and server not in pids and os.getpid() not in pids
    for result in forked:
        assert result["status"] == "ok", result.get("error")
        assert result["worker"]["launch"] == "forked"
        # No thread of the server's came along: the worker starts as a fresh process does.
        assert result["worker"]["threads_at_start"] == 1
        assert result["worker"]["threads"] == spawned[0]["worker"]["threads"]
        assert result["worker"]["allocator"] == spawned[0]["worker"]["allocator"]
        assert result["runs"]["cpu"]["losses"] == spawned[0]["runs"]["cpu"]["losses"]
        assert set(result["phases"]) == set(spawned[0]["phases"]) | {"preloaded_import_s"}
        # The imports the server paid once count in each forked worker's import phase.
        preloaded = result["phases"]["preloaded_import_s"]
        assert preloaded > 0 and result["phases"]["import_s"] >= preloaded
        # The library pages the server's imports mapped in count as a fresh process's do (without
        # forkserver.populate the forked worker's peak read 16% under the spawned one's).
        assert result["host_memory"]["peak_bytes"] > 0.93 * spawned[0]["host_memory"]["peak_bytes"]


@needs_linux
def test_the_server_imports_a_backends_worker_imports_once_and_counts_them_in_each_of_its_workers(tmp_path):
    def case(backend: str, folder: str) -> list:
        backend_case = _train_case(tmp_path / folder)
        backend_case[0] = backend
        backend_case[3]["extra"]["runs"][0]["label"] = backend
        return backend_case

    results, _ = _run([case("cpu", "a"), case("cpu-compile", "b"), case("cpu-compile", "c"), case("cpu", "d")],
                      True, tmp_path)
    assert [result["status"] for result in results] == ["ok"] * 4, [result.get("error") for result in results]
    eager_first, compiled_first, compiled_again, eager_again = (result["phases"]["preloaded_import_s"]
                                                                for result in results)
    # The eager workers count torch's imports only, before and after the server imported inductor; both
    # compiled workers count inductor's import too, which the server made once, before the first of them.
    assert eager_first == eager_again
    assert compiled_first == compiled_again > eager_first


FAULTS = [("fault-multiline", {}), ("fault-segfault", {}), ("fault-exit", {}),
          ("fault-hang", {"phase_timeout": 8}), ("fault-setsid", {})]


@needs_linux
def test_failures_in_a_forked_worker_are_reported_as_in_a_spawned_one(tmp_path):
    cases = [[backend, "torchport.protocol:evaluate_job", FAULT_APP, {"config": QUICK, **kwargs}]
             for backend, kwargs in FAULTS]
    forked, _ = _run(cases, True, tmp_path)
    spawned, _ = _run(cases, False, tmp_path)
    for (backend, _), one, other in zip(FAULTS, forked, spawned):
        assert one["worker"]["launch"] == "forked" and other["worker"]["launch"] == "spawned"
        for key in ("status", "exit_code", "last_phase"):
            assert one[key] == other[key], (backend, key, one[key], other[key])
        assert (one.get("error") or {}).get("kind") == (other.get("error") or {}).get("kind"), backend
        assert (one.get("error") or {}).get("message") == (other.get("error") or {}).get("message"), backend
        assert bool(one.get("stderr_tail")) == bool(other.get("stderr_tail")), backend
    by_backend = {backend: result for (backend, _), result in zip(FAULTS, forked)}
    assert by_backend["fault-segfault"]["status"] == "crashed"
    assert by_backend["fault-segfault"]["exit_code"] == -signal.SIGSEGV
    assert by_backend["fault-hang"]["status"] == "timed_out"
    assert by_backend["fault-multiline"]["status"] == "error"
    assert by_backend["fault-setsid"]["status"] == "ok"  # its grandchild was ended: _run found nothing left


# The stand-in command for a parent's death: one worker that hangs, forever.
HANGING = """
import sys
from torchport import launch
launch.run_worker("fault-hang", "torchport.protocol:evaluate_job", app=sys.argv[1])
"""


@needs_linux
def test_a_killed_parent_takes_its_forked_workers_and_the_server_down(tmp_path):
    marker = uuid.uuid4().hex
    parent = subprocess.Popen([sys.executable, "-c", HANGING, FAULT_APP], env=_environment(True, marker),
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        forked = []
        while not forked:
            assert time.monotonic() < deadline, "no forked worker started"
            time.sleep(0.2)
            forked = [pid for pid in processes.marked(MARKER, marker) if _name(pid) == "torchport-job"]
        assert os.getsid(forked[0]) == forked[0]  # a session (and process group) of its own
        assert len(processes.marked(MARKER, marker)) >= 2  # the server and the worker
        parent.kill()
        parent.wait()
        assert _left_behind(marker) == []
    finally:
        parent.kill()


@needs_linux
def test_a_server_not_ready_within_the_first_jobs_time_is_given_up(tmp_path):
    """The wait for the server's imports is the first job's time: with 10 ms
    left nobody waits seconds for torch; the server goes, workers start fresh."""
    marker = uuid.uuid4().hex
    code = ("import sys, time; from torchport import launch; started = time.monotonic(); "
            "first = launch.fork_server_for(sys.executable, None, wait_s=0.01); "
            "print(first is None, round(time.monotonic() - started, 1), launch.fork_server_for(sys.executable, None))")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                               env=_environment(True, marker), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    given_up, waited_s, later = completed.stdout.split()
    assert given_up == "True" and later == "None", completed.stdout
    assert float(waited_s) < 5, completed.stdout  # the server was ended, not waited for (it imports torch)
    assert _left_behind(marker) == []
