"""The worker's parent watchdog (torchport.processes.watch_parent), on real
processes: when the watched parent dies, the worker and what its session
started (also a grandchild in a session of its own) are ended, by either
method; and the pidfd watchdog never wakes while the parent lives, which is
why it costs a timed step nothing (the polling one woke 4 times a second)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from torchport import processes

SRC = str(Path(__file__).resolve().parent.parent / "src")

# The worker side: start the watchdog, start a grandchild that leaves the
# process group (setsid), report the watchdog's thread id, then wait forever.
WORKER = """
import subprocess, sys, time
from torchport import processes
watch = processes.watch_parent(sys.argv[1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print(watch.method, watch.thread.native_id, child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _wait_until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _start(method: str) -> tuple[subprocess.Popen, subprocess.Popen, int, int]:
    """A stand-in torchport parent (a sleeping process) and a worker that watches it."""
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    session = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": SRC, processes.PARENT_VARIABLE: processes.identity(parent.pid),
           processes.SESSION_VARIABLE: session}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, method], env=env, stdout=subprocess.PIPE, text=True)
    reported_method, thread_id, grandchild = worker.stdout.readline().split()
    assert reported_method == method
    return parent, worker, int(thread_id), int(grandchild)


def _wakeups(pid: int, thread_id: int) -> int:
    status = Path(f"/proc/{pid}/task/{thread_id}/status").read_text()
    return sum(int(line.split()[1]) for line in status.splitlines()
               if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))


def _sleeping(pid: int, thread_id: int) -> bool:
    task = Path(f"/proc/{pid}/task/{thread_id}")
    state = (task / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    try:
        waiting = (task / "wchan").read_text().strip() not in ("", "0")
    except OSError:  # no wchan in this kernel: the state alone
        waiting = True
    return state == b"S" and waiting


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
METHODS = [pytest.param("pidfd", marks=pytest.mark.skipif(not processes.pidfd_supported(),
                                                          reason="no pidfd on this kernel")), "poll"]


@needs_proc
@pytest.mark.parametrize("method", METHODS)
def test_parent_death_ends_the_worker_and_its_session(method):
    parent, worker, _, grandchild = _start(method)
    try:
        assert _alive(worker.pid) and _alive(grandchild)
        parent.kill()
        parent.wait()
        assert _wait_until(lambda: worker.poll() is not None and not _alive(grandchild), 30), \
            "the worker or its setsid grandchild outlived the parent"
        assert worker.returncode == -9
    finally:
        for pid in (worker.pid, grandchild, parent.pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        worker.wait()


@needs_proc
@pytest.mark.parametrize("method", METHODS)
def test_the_pidfd_watchdog_never_wakes_while_the_parent_lives(method):
    parent, worker, thread_id, grandchild = _start(method)
    try:
        # Once the thread has gone to sleep (on a loaded machine it may not have run yet).
        assert _wait_until(lambda: _sleeping(worker.pid, thread_id), 30)
        time.sleep(0.2)
        before = _wakeups(worker.pid, thread_id)
        time.sleep(1.5)
        woke = _wakeups(worker.pid, thread_id) - before
        if method == "pidfd":
            assert woke == 0
        else:  # the control: the polling watchdog wakes every WATCH_INTERVAL_S
            assert woke >= 1
    finally:
        for pid in (worker.pid, grandchild, parent.pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        worker.wait()
        parent.wait()


def test_a_stopped_watchdog_does_not_act(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    env = {**os.environ, "PYTHONPATH": SRC, processes.PARENT_VARIABLE: processes.identity(parent.pid)}
    code = ("import sys, time; from torchport import processes\n"
            "watch = processes.watch_parent(sys.argv[1]); watch.stop(); print('stopped', flush=True)\n"
            "time.sleep(1.0); print('survived', flush=True)")
    method = "pidfd" if processes.pidfd_supported() else "poll"
    worker = subprocess.Popen([sys.executable, "-c", code, method], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "stopped"
        parent.kill()
        parent.wait()
        assert worker.stdout.readline().strip() == "survived"
        assert worker.wait(timeout=30) == 0
    finally:
        for process in (worker, parent):
            if process.poll() is None:
                process.kill()
                process.wait()
