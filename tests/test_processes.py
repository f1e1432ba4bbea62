"""Finding and ending torchport's processes through psutil (which works
without /proc) agrees with the /proc reading, on real processes."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from torchport import processes

# A child that starts a grandchild in a session of its own (leaving the group), prints its pid, then waits.
SPAWNER = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(grandchild.pid, flush=True)
time.sleep(60)
"""


def _start(marker: str) -> tuple[subprocess.Popen, int]:
    child = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True,
                             start_new_session=True, env={**os.environ, processes.WORKER_VARIABLE: marker})
    grandchild = int(child.stdout.readline())
    return child, grandchild


def _gone(pid: int, timeout: float = 10) -> bool:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_marked_processes_are_found_through_psutil_as_through_proc():
    import psutil

    marker = uuid.uuid4().hex
    child, grandchild = _start(marker)
    try:
        found = processes._marked_psutil(psutil, processes.WORKER_VARIABLE, marker)
        assert sorted(found) == sorted([child.pid, grandchild])  # the grandchild inherited the marker
        if os.path.isdir("/proc"):
            assert sorted(processes._marked_proc(processes.WORKER_VARIABLE, marker)) == sorted(found)
        assert processes.descendants(child.pid) == [grandchild]
    finally:
        processes.kill_marked(processes.WORKER_VARIABLE, marker)
        child.wait(10)
    assert _gone(grandchild)


def test_kill_group_ends_a_descendant_that_left_the_group():
    child, grandchild = _start(uuid.uuid4().hex)
    processes.kill_group(child.pid)
    child.wait(10)
    assert _gone(grandchild)


def test_identity_tells_a_running_process_from_a_gone_one():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    me = processes.identity(child.pid)
    assert processes.start_time(child.pid) and processes.is_alive(me)
    child.kill()
    child.wait(10)
    assert not processes.is_alive(me)
    # A live pid with another start time is a reused pid, not the process named.
    assert processes.is_alive(processes.identity(os.getpid()))
    assert not processes.is_alive(f"{os.getpid()}:{processes.start_time(os.getpid())}0")
