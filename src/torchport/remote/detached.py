"""The remote side of ``--on``: run folders, the detached run, following it.

Runs on the remote machine inside torchport's own venv there
(``python -m torchport.remote.detached ACTION RUN_ID ...``), standard library
only.  A run lives in ``BASE/runs/RUN_ID`` (BASE: ``$TORCHPORT_REMOTE_HOME``
or ``~/.cache/torchport/remote``): ``app/`` (the shipped folder, the run's
working directory), ``out/`` (the evaluation's results), ``log`` (its output),
``pid`` and, once it ended, ``rc``.  The run is its own session, so a dropped
ssh connection leaves it going; ``stop`` ends it as Ctrl-C would locally.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

RUN_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{8}")
POLL_S = 0.3
STOP_GRACE_S = 60.0


def base_dir() -> Path:
    return Path(os.environ.get("TORCHPORT_REMOTE_HOME") or Path.home() / ".cache" / "torchport" / "remote")


def run_dir(run_id: str) -> Path:
    # The id is checked so that every path used stays under BASE/runs.
    if not RUN_ID.fullmatch(run_id):
        raise SystemExit(f"torchport remote: invalid run id {run_id[:40]!r}")
    return base_dir() / "runs" / run_id


def receive(run: Path) -> int:
    """Unpack the shipped app folder (a tar on stdin) into RUN/app."""
    (run / "out").mkdir(parents=True, exist_ok=False)
    (run / "app").mkdir()
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|gz") as archive:
        archive.extractall(run / "app", filter="data")
    return 0


def start(run: Path, argv: list[str]) -> int:
    """Start ``python -m torchport ARGV`` detached; return once its pid is recorded."""
    process = subprocess.Popen([sys.executable, "-m", "torchport.remote.detached", "_wrap", run.name, *argv],
                               cwd=run / "app", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    (run / "pid.tmp").write_text(str(process.pid))
    (run / "pid.tmp").replace(run / "pid")
    return 0


def _wrap(run: Path, argv: list[str]) -> int:
    """The run's session leader: the evaluation as its child, output to ``log``,
    its exit status to ``rc``.  An ending signal is passed on to the
    evaluation, which ends its workers and writes what it measured."""
    env = {**os.environ, "TORCHPORT_PROGRESS_INTERVAL": os.environ.get("TORCHPORT_PROGRESS_INTERVAL", "5")}
    with open(run / "log", "ab") as log:
        child = subprocess.Popen([sys.executable, "-m", "torchport", *argv], stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, env=env)

    def forward(number: int, frame: object) -> None:
        try:
            child.send_signal(signal.SIGTERM if number == signal.SIGHUP else number)
        except OSError:
            pass

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, forward)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a dropped connection is not a reason to stop
    status = child.wait()
    (run / "rc.tmp").write_text(str(status))
    (run / "rc.tmp").replace(run / "rc")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (not yet reaped) has ended
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _pid(run: Path) -> int | None:
    try:
        return int((run / "pid").read_text())
    except (OSError, ValueError):
        return None


def follow(run: Path, offset: int) -> int:
    """Copy the log from OFFSET to stdout as it grows, until the run ended."""
    out = sys.stdout.buffer
    log_path = run / "log"
    parent = os.getppid()
    while True:
        if not run.is_dir() or os.getppid() != parent:
            return 1  # the run was removed, or the connection that asked is gone
        ended = (run / "rc").exists() or not ((pid := _pid(run)) is None or _alive(pid))
        if log_path.exists():
            with open(log_path, "rb") as log:
                log.seek(offset)
                chunk = log.read()
            if chunk:
                offset += len(chunk)
                out.write(chunk)
                out.flush()
        if ended:
            return 0
        time.sleep(POLL_S)


def status(run: Path) -> int:
    pid = _pid(run)
    rc_path = run / "rc"
    record = {"exists": run.is_dir(), "running": bool(pid and _alive(pid)) and not rc_path.exists(),
              "rc": int(rc_path.read_text()) if rc_path.exists() else None,
              "result": (run / "out" / "result.json").exists()}
    print(json.dumps(record))
    return 0


def stop(run: Path) -> int:
    """End the run as Ctrl-C does and wait for it (and its session) to be gone."""
    pid = _pid(run)
    if pid is None or not _alive(pid):
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)
    return 0


def fetch(run: Path) -> int:
    """The run's results folder as a tar on stdout."""
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|gz") as archive:
        archive.add(run / "out", arcname=".")
    return 0


def clean(run: Path) -> int:
    shutil.rmtree(run, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    action, run_id, rest = argv[0], argv[1], argv[2:]
    run = run_dir(run_id)
    if action == "receive":
        return receive(run)
    if action == "start":
        return start(run, rest)
    if action == "_wrap":
        return _wrap(run, rest)
    if action == "follow":
        return follow(run, int(rest[0]) if rest else 0)
    if action in ("status", "stop", "fetch", "clean"):
        return {"status": status, "stop": stop, "fetch": fetch, "clean": clean}[action](run)
    raise SystemExit(f"torchport remote: unknown action {action[:40]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
