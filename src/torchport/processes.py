"""Every process torchport starts can be found and ended, whatever it did.

Each worker (and torchrun) gets two markers in its environment, which its
children inherit, also those that call ``setsid`` and leave the worker's
process group:

* ``TORCHPORT_SESSION``: one value per torchport command, shared by all its workers;
* ``TORCHPORT_WORKER_ID``: one value per worker process.

Ending a worker ends its process group and every process that carries its
worker id (found through ``/proc/PID/environ`` on Linux).  Each worker also
watches its torchport parent (``TORCHPORT_PARENT``: pid and start time, so a
reused pid is not mistaken for it) and, when the parent is gone (killed with
SIGKILL, say), ends everything of its session and itself within about a
second.  A parent-death signal would end the worker before it could end its
own children; a watchdog thread does both.

Stdlib only: this module runs in every worker environment.
"""
from __future__ import annotations

import os
import signal
import threading
import time

SESSION_VARIABLE = "TORCHPORT_SESSION"
WORKER_VARIABLE = "TORCHPORT_WORKER_ID"
PARENT_VARIABLE = "TORCHPORT_PARENT"
WATCH_INTERVAL_S = 0.25


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None
    where /proc is absent or the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[19].decode() if len(fields) > 19 else None


def identity(pid: int) -> str:
    return f"{pid}:{start_time(pid) or ''}"


def is_alive(identity_text: str) -> bool:
    pid_text, _, started = identity_text.partition(":")
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    if started and os.path.exists("/proc/self/stat"):
        return start_time(pid) == started
    return True


def marked(variable: str, value: str) -> list[int]:
    """Pids of the processes (other than this one) whose environment holds
    ``variable=value``.  Empty where /proc is not available."""
    needle = f"{variable}={value}".encode()
    me = os.getpid()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environment = handle.read()
        except OSError:
            continue
        if needle in environment.split(b"\0"):
            found.append(int(name))
    return found


def kill_marked(variable: str, value: str) -> int:
    """SIGKILL every process marked ``variable=value``; repeated while new
    ones appear (a process may fork while its siblings are being ended)."""
    ended = 0
    for _ in range(5):
        pids = marked(variable, value)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                ended += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return ended


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def watch_parent() -> None:
    """In a worker: end the session's processes and this one when the
    torchport parent is gone.  No-op when not started by torchport."""
    parent = os.environ.get(PARENT_VARIABLE)
    session = os.environ.get(SESSION_VARIABLE)
    if not parent:
        return

    def watch() -> None:
        while is_alive(parent):
            time.sleep(WATCH_INTERVAL_S)
        if session:
            kill_marked(SESSION_VARIABLE, session)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="torchport-parent-watch", daemon=True).start()
