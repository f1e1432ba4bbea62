"""Every process torchport starts can be found and ended, whatever it did.

Each worker (and torchrun) gets two markers in its environment, which its
children inherit, also those that call ``setsid`` and leave the worker's
process group:

* ``TORCHPORT_SESSION``: one value per torchport command, shared by all its workers;
* ``TORCHPORT_WORKER_ID``: one value per worker process.

Ending a worker ends its process group, its descendants and every process
that carries its worker id.  Processes are listed and read through psutil,
which works where /proc does not (macOS, where MPS users are); a worker
environment without psutil (the xla environment pins its own packages) reads
/proc on Linux instead.  Each worker also
watches its torchport parent (``TORCHPORT_PARENT``: pid and start time, so a
reused pid is not mistaken for it) and, when the parent is gone (killed with
SIGKILL, say), ends everything of its session and itself within about a
second.  A parent-death signal would end the worker before it could end its
own children; a watchdog thread does both.  The thread sleeps in the kernel
until the parent exits (it waits on a pidfd, Linux 5.3+), so it never takes
the GIL from a timed step; where pidfds are not available it polls the parent every
``WATCH_INTERVAL_S`` (``benchmarks/bench_loop.py --candidates`` measures that
polling against the pidfd wait).

psutil is optional here: this module runs in every worker environment.
"""
from __future__ import annotations

import os
import select
import signal
import threading
import time

SESSION_VARIABLE = "TORCHPORT_SESSION"
WORKER_VARIABLE = "TORCHPORT_WORKER_ID"
PARENT_VARIABLE = "TORCHPORT_PARENT"
WATCH_INTERVAL_S = 0.25  # the polling fallback's interval


def _psutil():
    """psutil, or None in a worker environment without it."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def start_time(pid: int) -> str | None:
    """When ``pid`` started, as text to compare, or None when unknown or the
    process is gone.  /proc's clock ticks where /proc exists (a worker
    without psutil reads the same figure as its torchport parent), else
    psutil's creation time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        if os.path.exists("/proc/self/stat"):
            return None  # /proc is there: the process is gone
    except OSError:
        return None
    else:
        # Field 22; the command name (field 2) may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        return fields[19].decode() if len(fields) > 19 else None
    psutil = _psutil()
    if psutil is None:
        return None
    try:
        return f"t{psutil.Process(pid).create_time():.3f}"
    except (psutil.Error, OSError):
        return None


def identity(pid: int) -> str:
    return f"{pid}:{start_time(pid) or ''}"


def is_alive(identity_text: str) -> bool:
    """Whether the process named by ``identity(pid)`` still runs: the pid
    exists and, where the start time can be read here, started then (a
    reused pid is another process)."""
    pid_text, _, started = identity_text.partition(":")
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    if not started:
        return True
    now = start_time(pid)
    if now is None:
        # Gone, where /proc can tell; elsewhere the start time is unknown here and the pid decides.
        return not os.path.exists("/proc/self/stat")
    if now.startswith("t") != started.startswith("t"):
        return True  # psutil's clock here, /proc's there: not comparable, the pid decides
    return now == started


def marked(variable: str, value: str) -> list[int]:
    """Pids of the processes (other than this one) whose environment holds
    ``variable=value`` (those whose environment this user may read)."""
    psutil = _psutil()
    if psutil is not None:
        return _marked_psutil(psutil, variable, value)
    return _marked_proc(variable, value)


def _marked_psutil(psutil, variable: str, value: str) -> list[int]:
    me = os.getpid()
    found = []
    for process in psutil.process_iter():
        if process.pid == me:
            continue
        try:
            if process.environ().get(variable) == value:
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue  # gone, a zombie, or another user's
    return found


def _marked_proc(variable: str, value: str) -> list[int]:
    """The same from /proc (Linux) without psutil; empty without /proc."""
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


def descendants(pid: int) -> list[int]:
    """The children of ``pid``, theirs, and so on (psutil; empty without it)."""
    psutil = _psutil()
    if psutil is None:
        return []
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except (psutil.Error, OSError):
        return []


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
    """SIGKILL the process group ``pid`` leads, and the descendants of
    ``pid`` that left it (listed first: once ``pid`` dies they are orphans
    no longer traceable to it)."""
    children = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        children.append(pid)
    for child in children:
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


class ParentWatch:
    """The watchdog thread of ``watch_parent``; ``stop()`` ends it without
    acting (the benchmark that measures the watchdog's cost switches it off)."""

    def __init__(self, parent: str, session: str | None, method: str):
        self.parent = parent
        self.session = session
        self.method = method
        self._stop_read, self._stop_write = os.pipe()
        self._stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="torchport-parent-watch", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stopped.set()
        os.write(self._stop_write, b"x")
        self.thread.join()

    def _watch(self) -> None:
        if self.method == "pidfd":
            parent_gone = self._wait_pidfd()
        else:
            parent_gone = self._wait_polling()
        if parent_gone and not self._stopped.is_set():
            if self.session:
                kill_marked(SESSION_VARIABLE, self.session)
            os.kill(os.getpid(), signal.SIGKILL)

    def _wait_pidfd(self) -> bool:
        pid = int(self.parent.partition(":")[0])
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return True
        try:
            # Checked after opening: the pidfd now holds this process, so a
            # pid reused since (another start time) is not taken for the parent.
            if not is_alive(self.parent):
                return True
            readable, _, _ = select.select([pidfd, self._stop_read], [], [])
            return pidfd in readable
        finally:
            os.close(pidfd)

    def _wait_polling(self) -> bool:
        while is_alive(self.parent):
            if self._stopped.wait(WATCH_INTERVAL_S):
                return False
        return True


def pidfd_supported() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except OSError:  # a kernel before 5.3, or a sandbox without the syscall
        return False


def watch_parent(method: str | None = None) -> ParentWatch | None:
    """In a worker: end the session's processes and this one when the
    torchport parent is gone.  ``method``: "pidfd" (the default where the
    kernel has it) or "poll".  None when not started by torchport."""
    parent = os.environ.get(PARENT_VARIABLE)
    if not parent:
        return None
    if method is None:
        method = "pidfd" if pidfd_supported() else "poll"
    global active_watch
    active_watch = ParentWatch(parent, os.environ.get(SESSION_VARIABLE), method)
    return active_watch


# The watchdog of this process, if any: the benchmark measuring the harness's
# costs (``bench_loop.py --candidates``) switches it off or swaps its method.
active_watch: ParentWatch | None = None
