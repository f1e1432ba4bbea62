"""A fork server: one process imports torch once, and every worker of this
torchport command that runs on torchport's own interpreter is forked from it.

Importing torch, torch._dynamo and torch.optim took a fresh worker about 1.5 s
on the 2-core development machine, paid again by each of the demo's eight
workers.  The server pays it once; each job still gets a process of its own,
forked for it alone and never reused: its own pid, its own session and process
group, the job's environment, working folder, stdout and stderr, the same
exit status and the same parent watchdog (``torchport.worker.main``).

The server imports only: it runs no torch operation, so it starts no thread
pool of torch's (numpy's OpenBLAS starts one at import and ends it itself
before each fork, ``pthread_atfork``); each forked worker records the threads
it started with (``worker.threads_at_start``: 1).  Its loop is single-threaded
and sleeps in ``select`` between requests, so it takes nothing from a timed
block.  A forked worker maps in again the library pages the server's imports
had mapped (``populate``), so its host memory reads as a fresh process's.
The server watches the torchport command as every worker does (a pidfd in
the same ``select``; polling where there is none) and, when the command is
gone, ends the session's processes and itself.

Conversation, over a ``SOCK_SEQPACKET`` socket pair (one message each way):

* the server, once its imports are done: ``{"ready": true, "pid": ...}``;
* the parent, per job: ``{"job": path, "env": {...}, "cwd": ...}`` with three
  file descriptors (a reply socket, the worker's stdout and its stderr);
* the server, on that job's reply socket: ``{"pid": ...}`` once forked, then
  ``{"exit": code}`` (``Popen.returncode``'s convention) once it has ended.

Only the server side imports torch; the parent side (``ForkServer``,
``ForkedProcess``) is stdlib only.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

MESSAGE_BYTES = 1 << 20  # a job's environment fits many times over
FORK_REPLY_S = 30.0  # the server answers a request at once; no answer by then: it is stuck
# What the server imports before it forks: what every worker imports before its job.
PRELOADED = ("torch", "torch._dynamo", "torch.optim", "torchport.worker", "torchport.host_memory",
             "torchport.processes")
MADV_POPULATE_READ = 22  # Linux 5.14+: fault a range's pages in, as reading them would
PROCESS_NAME = b"torchport-job"  # /proc/PID/comm of a forked worker (its cmdline is the server's)
preload_s = 0.0  # seconds the server took to import PRELOADED: each forked worker's import phase counts them
# A backend's ``worker_imports``, imported by the server before it forks that backend's first worker: module ->
# the seconds its import took, counted in the import phase of every worker that needs it.
imported_for_jobs: dict[str, float] = {}


# --- the parent's side ---------------------------------------------------------------------------

class ForkedProcess:
    """What ``subprocess.Popen`` offers the supervisor (``pid``, ``stdout``,
    ``poll``, ``wait``, ``returncode``), for a worker forked by the server.
    Its exit status comes from the server, which is its parent."""

    def __init__(self, pid: int, reply: socket.socket, stdout: Any):
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._reply = reply

    def poll(self) -> int | None:
        if self.returncode is None:
            self._receive(block=False)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self._receive(block=True)
        return self.returncode

    def _receive(self, block: bool) -> None:
        self._reply.setblocking(block)
        try:
            data = self._reply.recv(MESSAGE_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.returncode = int(json.loads(data)["exit"])
        else:
            # The server ended before it could tell (killed from outside): the
            # worker is no one's to wait for any more, so it is ended here.
            from torchport.processes import kill_group

            kill_group(self.pid)
            self.returncode = -signal.SIGKILL
        self._reply.close()


class ForkServer:
    """The parent's handle on a started server process (``process``, marked
    ``worker_id``, whose other end of ``control`` it holds).  ``environment`` is the environment it
    was started with, less torchport's per-process markers: a job whose
    environment differs is not forked from it (its imports read that environment)."""

    def __init__(self, process: Any, worker_id: str, control: socket.socket, environment: dict[str, str]):
        self.process = process
        self.worker_id = worker_id  # the server process's own marker (torchport.processes)
        self.control = control
        self.environment = environment

    def wait_ready(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.control], [], [], timeout)
        if not ready:
            return False
        try:
            message = self.control.recv(MESSAGE_BYTES)
        except OSError:
            return False
        return bool(message) and bool(json.loads(message).get("ready"))

    def start(self, job_path: str, env: dict[str, str], cwd: str, stderr: Any) -> ForkedProcess:
        """Fork a worker for ``job_path``; its stdout is a pipe read here,
        its stderr goes to the file ``stderr``.  OSError when the server is gone."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stdout_read, stdout_write = os.pipe()
        try:
            request = json.dumps({"job": job_path, "env": env, "cwd": cwd}).encode()
            socket.send_fds(self.control, [request], [theirs.fileno(), stdout_write, stderr.fileno()])
        except OSError:
            mine.close()
            os.close(stdout_read)
            raise
        finally:
            theirs.close()
            os.close(stdout_write)
        mine.settimeout(FORK_REPLY_S)
        try:
            answer = mine.recv(MESSAGE_BYTES)
        except OSError:
            mine.close()
            os.close(stdout_read)
            raise
        if not answer:
            mine.close()
            os.close(stdout_read)
            raise OSError("the fork server ended before it forked the worker")
        return ForkedProcess(int(json.loads(answer)["pid"]), mine, os.fdopen(stdout_read, "rb"))

    def close(self) -> None:
        """The server exits when its control socket closes."""
        self.control.close()


# --- the server's side ---------------------------------------------------------------------------

def serve(control_fd: int) -> None:
    import importlib

    from torchport import processes

    control = socket.socket(fileno=control_fd)
    started = time.perf_counter()
    for module in PRELOADED:
        importlib.import_module(module)
    global preload_s
    preload_s = time.perf_counter() - started
    start_folder = os.getcwd()
    resident = resident_file_pages()
    wake_read, wake_write = socket.socketpair()
    wake_read.setblocking(False)
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # a handler, so that the wake-up byte is written
    parent = os.environ.get(processes.PARENT_VARIABLE, "")
    parent_fd = _open_pidfd(parent)
    if parent and not processes.is_alive(parent):  # checked once the pidfd holds it: a reused pid is not the parent
        os._exit(1)
    replies: dict[int, socket.socket] = {}
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        watched = [control, wake_read] + ([parent_fd] if parent_fd is not None else [])
        timeout = None if parent_fd is not None or not parent else processes.WATCH_INTERVAL_S
        readable, _, _ = select.select(watched, [], [], timeout)
        if (parent_fd in readable) or (parent and parent_fd is None and not processes.is_alive(parent)):
            session = os.environ.get(processes.SESSION_VARIABLE)
            if session:
                processes.kill_marked(processes.SESSION_VARIABLE, session)
            os._exit(1)
        if wake_read in readable:
            _drain(wake_read)
            _reap(replies)
        if control in readable:
            message, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 3)
            if not message:
                os._exit(0)  # the torchport command closed its end: done
            request = json.loads(message)
            reply, stdout_fd, stderr_fd = socket.socket(fileno=fds[0]), fds[1], fds[2]
            imports_s, importing_s = import_for_job(request["job"])
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                inherited = [control, wake_read, wake_write, reply, *replies.values()]
                _become_worker(request, stdout_fd, stderr_fd, inherited, parent_fd, start_folder, resident,
                               preload_s + imports_s, importing_s)
            os.close(stdout_fd)
            os.close(stderr_fd)
            try:
                reply.send(json.dumps({"pid": pid}).encode())
            except OSError:
                pass
            replies[pid] = reply
            _reap(replies)


def import_for_job(job_path: str) -> tuple[float, float]:
    """Import what the job's backend imports before its work (``Backend.worker_imports``) unless imported for an
    earlier job: (the seconds those imports took, the seconds spent importing now, for this job).  A job file it
    cannot read costs nothing here: the worker reports what is wrong with it."""
    import importlib

    try:
        with open(job_path, encoding="utf-8") as handle:
            backend_name = json.load(handle)["backend"]
        from torchport import backends

        modules = backends.get(backend_name).worker_imports()
    except Exception:  # noqa: BLE001  the worker itself reads the job and says what is wrong
        return 0.0, 0.0
    importing_s = 0.0
    for module in modules:
        if module not in imported_for_jobs:
            started = time.perf_counter()
            importlib.import_module(module)
            imported_for_jobs[module] = time.perf_counter() - started
            importing_s += imported_for_jobs[module]
    return sum(imported_for_jobs[module] for module in modules), importing_s


def _open_pidfd(parent: str) -> int | None:
    if not parent or not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(int(parent.partition(":")[0]))
    except (OSError, ValueError):
        return None


def _drain(wake: socket.socket) -> None:
    try:
        while wake.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def _reap(replies: dict[int, socket.socket]) -> None:
    """Tell each ended worker's parent its exit status (the server is its parent)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply = replies.pop(pid, None)
        if reply is not None:
            try:
                reply.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            except OSError:
                pass
            reply.close()


def _become_worker(request: dict[str, Any], stdout_fd: int, stderr_fd: int, inherited: list[socket.socket],
                   parent_fd: int | None, start_folder: str, resident: list[tuple[int, int]],
                   imports_s: float, importing_s: float) -> None:
    """In the forked child: become what ``python -m torchport.worker JOB`` is
    (a session of its own, the job's stdio, environment and folder), run the
    job, and exit; never returns into the server's loop."""
    status = 1
    try:
        populate(resident)
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for handle in inherited:
            handle.close()
        if parent_fd is not None:
            os.close(parent_fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        for source, target in ((devnull, 0), (stdout_fd, 1), (stderr_fd, 2)):
            os.dup2(source, target)
            os.close(source)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if importing_s and "TORCHPORT_SPAWN_TIME" in os.environ:
            # The imports made for this job count in its import phase (``imports_s``), not in its process start.
            os.environ["TORCHPORT_SPAWN_TIME"] = repr(float(os.environ["TORCHPORT_SPAWN_TIME"]) + importing_s)
        if sys.path and sys.path[0] == start_folder:  # ``python -m`` puts the folder it started in first
            sys.path[0] = request["cwd"]
        _name_process()
        _reseed()
        from torchport import worker

        worker.WORKER_STARTED = time.time()
        worker.LAUNCH = "forked"
        worker.PRELOADED_IMPORT_S = imports_s
        sys.argv = [worker.__file__, request["job"]]
        status = worker.main([request["job"]])
    except BaseException:  # noqa: BLE001  anything before the job is a crash of this worker, on its stderr
        import traceback

        traceback.print_exc()
    finally:
        from torchport.worker import exit_now

        exit_now(status)


def resident_file_pages() -> list[tuple[int, int]]:
    """The (address, length) ranges of this process's file-backed mappings
    (torch's libraries) whose pages are mapped in, from /proc/self/pagemap;
    empty without /proc."""
    import struct

    page = os.sysconf("SC_PAGE_SIZE")
    ranges: list[tuple[int, int]] = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps, open("/proc/self/pagemap", "rb") as pagemap:
            for line in maps:
                fields = line.split()
                if len(fields) < 6 or not fields[5].startswith("/") or "r" not in fields[1]:
                    continue
                start, end = (int(address, 16) for address in fields[0].split("-"))
                pagemap.seek(start // page * 8)
                entries = pagemap.read((end - start) // page * 8)
                run_start = None
                for index, (entry,) in enumerate(struct.iter_unpack("<Q", entries)):
                    present = entry >> 63
                    if present and run_start is None:
                        run_start = index
                    elif not present and run_start is not None:
                        ranges.append((start + run_start * page, (index - run_start) * page))
                        run_start = None
                if run_start is not None:
                    ranges.append((start + run_start * page, (len(entries) // 8 - run_start) * page))
    except OSError:
        return []
    return ranges


def populate(ranges: list[tuple[int, int]]) -> None:
    """Map in the pages of ``ranges`` (``resident_file_pages`` of the server).

    fork() does not copy the page tables of file-backed mappings: a forked
    worker's resident set left out the ~75 MB of torch's libraries that the
    imports had mapped in (RssFile 5 MB against the server's 80 MB), and its
    peak host memory read 57 MB (16%) under a fresh worker's on the built-in
    classifier.  Mapping them in again (17 ms) makes the worker's memory
    figures those of a fresh process after the same imports."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):
        return
    page = os.sysconf("SC_PAGE_SIZE")
    for address, length in ranges:
        if libc.madvise(address, length, MADV_POPULATE_READ) != 0:
            # A kernel before 5.14: read one byte of each page instead.
            for offset in range(0, length, page):
                ctypes.string_at(address + offset, 1)


def _name_process() -> None:
    """Name the forked worker in /proc/PID/comm (its cmdline is the server's)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, PROCESS_NAME, 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _reseed() -> None:
    """Seed what a fresh interpreter seeds from the OS at import: a forked
    worker must not draw the same "random" numbers as its siblings."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
