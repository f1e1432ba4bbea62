"""``evaluate|trace|check --on``: the same command on each target, concurrently, and one combined answer.

Each target is a row of ``OUT_DIR/targets.json`` whatever happens to it: a
target that cannot be reached, lacks Python or torch, fails to install or to
run is a row with its cause and the remote's output tail, and the others go
on.  Results land in ``OUT_DIR/<target>/``; the targets with a result are
compared by ``torchport.compare`` (the first target is the reference machine).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import os
import re
import secrets
import subprocess
import sys
import tarfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchport import output
from torchport.errors import UserError
from torchport.limits import TAIL_LINE_CHARS, TAIL_LINES
from torchport.remote import predictions, remote_scripts, ship
from torchport.document import result_record
from torchport.records import ChecksSection, RemoteFacts, TargetRow, TargetStatus, TargetTimings, TraceSection
from torchport.remote.targets import Target, clean_line, parse_target, ssh_cause, ssh_command

KIND = "torchport-targets"
VERSION = "1.0"
MANIFEST = "targets.json"
MIN_PYTHON = (3, 11)
MIN_TORCH = (2, 6)
# A remote's results folder larger than this is refused (it is data from another machine).
MAX_FETCH_BYTES = 512 * 1024 * 1024
SSH_STEP_TIMEOUT_S = 1800.0
STDERR_CAP_BYTES = 1 << 20
# A line of a target's output longer than this is shown in pieces (each one escaped and capped).
LINE_READ_BYTES = 1 << 16

# Options that belong to this machine's side of --on and are not passed to the targets.
_LOCAL_VALUED = ("--on", "--ssh-config", "--remote-python", "--max-upload", "--workdir", "--out-dir", "-o", "--out",
                 "--output", "--format", "--prices", "--json", "--autostop")
# Each command's result file, written into OUT_DIR/TARGET/.
RESULT_FILES = {"evaluate": "result.json", "trace": "trace.json", "check": "check.json"}
_LOCAL_FLAGS = ("--keep-remote", "--keep", "--yes")


@dataclass
class Plan:
    targets: list[Target]
    out_dir: Path
    local_args: list[str]       # the command's arguments as this machine runs them
    remote_args: list[str]      # ... and as a remote runs them, in the shipped folder
    folder: Path | None         # shipped to remotes (None: nothing to ship)
    passthrough: list[str] = field(default_factory=list)  # the script's arguments, after `--`
    ssh_config: Path | None = None
    keep_remote: bool = False
    remote_python: str = "python3"
    max_upload_bytes: int = ship.DEFAULT_MAX_UPLOAD_MB * 1_000_000
    command: str = "evaluate"
    keep_cluster: bool = False      # sky: targets
    autostop_minutes: int = 30
    assume_yes: bool = False

    @property
    def result_file(self) -> str:
        return RESULT_FILES[self.command]

    def output_arguments(self, folder: str) -> list[str]:
        """Where the command writes its result, in the target's results folder."""
        if self.command == "evaluate":
            return ["--out-dir", folder]
        return ["--json", f"{folder}/{self.result_file}"]


def forwarded_arguments(argv: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    """Evaluate's own arguments without the ones only this machine uses."""
    valued = _LOCAL_VALUED + extra
    kept: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        name = token.split("=", 1)[0]
        if name in valued:
            skip = "=" not in token
            continue
        if token.startswith("-o") and not token.startswith("--") and len(token) > 2:
            continue  # -oDIR
        if token in _LOCAL_FLAGS:
            continue
        kept.append(token)
    return kept


def command_argv(command: str) -> tuple[list[str], list[str]]:
    """(the command's arguments, the script's arguments after `--`) as typed."""
    argv = [a for a in sys.argv[1:] if a != "--debug"]
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    return argv[argv.index(command) + 1:], passthrough


def plan_from_args(args: Any, command: str = "evaluate") -> Plan:
    from torchport.app import parse_spec
    from torchport.evaluate import default_out_dir
    from torchport.prices import Prices, load_price_file

    targets = _targets(args.on)
    argv, passthrough = command_argv(command)
    local = forwarded_arguments(argv)
    prices: list[str] = []
    if getattr(args, "prices", None):
        prices = Prices().add(load_price_file(args.prices)).as_arguments()
    # A config file named here is read on this machine; a remote reads the shipped folder's own.
    remote = forwarded_arguments(local, extra=("--config", "--work-dir"))
    folder = args.workdir.resolve() if args.workdir else None
    if folder is not None and not folder.is_dir():
        raise UserError("--workdir is not a folder", location=str(args.workdir))
    shipped: Path | None = None
    script = getattr(args, "script", None)
    if script is not None:
        shipped = script.resolve()
    else:
        spec = parse_spec(args.app)
        if spec.file is not None:
            shipped = spec.file.resolve()
    if shipped is not None:
        folder = folder or shipped.parent
        try:
            inside = shipped.relative_to(folder).as_posix()
        except ValueError:
            raise UserError(f"{'the script' if script else 'the app'} is not inside --workdir {folder}",
                            location=str(shipped)) from None
        remote = _rewrite_script(remote, inside) if script is not None else \
            [inside + args.app[len(args.app.split(":")[0]):] if token == args.app else token for token in remote]
    max_mb = args.max_upload if args.max_upload is not None else ship.DEFAULT_MAX_UPLOAD_MB
    out_dir = getattr(args, "out", None) or default_out_dir(args.app)
    return Plan(targets=targets, out_dir=out_dir, command=command, local_args=[*local, *prices],
                remote_args=[*remote, *prices], folder=folder, passthrough=passthrough, ssh_config=args.ssh_config,
                keep_remote=args.keep_remote, remote_python=args.remote_python, max_upload_bytes=int(max_mb * 1_000_000),
                keep_cluster=args.keep, autostop_minutes=args.autostop, assume_yes=args.yes)


def _rewrite_script(argv: list[str], path: str) -> list[str]:
    """ARGV with --script's value replaced by PATH (argparse's Path has normalised the one typed)."""
    rewritten = []
    after_flag = False
    for token in argv:
        if after_flag:
            token, after_flag = path, False
        elif token == "--script":
            after_flag = True
        elif token.startswith("--script="):
            token = f"--script={path}"
        rewritten.append(token)
    return rewritten


def _targets(texts: list[str]) -> list[Target]:
    from torchport.remote.targets import parse_targets

    return parse_targets(texts)


@dataclass
class TargetRun:
    """One target's run and its row."""

    target: Target
    plan: Plan
    row: dict[str, Any]
    save: Any  # writes the manifest
    wheel: ship.Wheel | None = None
    archive: bytes = b""
    sky: Any = None  # the SkyPilot session, for sky: targets
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    _process: subprocess.Popen | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: bool = False

    # -- processes, each one stoppable by `interrupt`
    def _spawn(self, argv: list[str], **popen: Any) -> subprocess.Popen:
        with self._lock:
            if self._stopping:
                raise _Stopped()
            self._process = subprocess.Popen(argv, **popen)
            return self._process

    def _ssh(self, remote_argv: list[str], data: bytes | None = None, timeout: float = SSH_STEP_TIMEOUT_S,
             target: Target | None = None) -> subprocess.CompletedProcess:
        # A SkyPilot cluster is reached through the user's own ssh config, where SkyPilot writes it.
        config = self.plan.ssh_config if target is None else None
        process = self._spawn(ssh_command(target or self.target, remote_argv, config=config),
                              stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        # What a remote sends is read up to a cap (a larger answer ends the step), and a step has a deadline.
        overflow: list[str] = []

        def expire() -> None:
            overflow.append("timed out")
            process.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        errors: list[bytes] = []
        reader = threading.Thread(target=lambda: errors.append(read_capped(process.stderr, STDERR_CAP_BYTES, process)),
                                  daemon=True)
        reader.start()
        if data is not None:
            assert process.stdin is not None
            threading.Thread(target=_write_and_close, args=(process.stdin, data), daemon=True).start()
        try:
            out = read_capped(process.stdout, MAX_FETCH_BYTES, process, overflow)
            returncode = process.wait()
            reader.join()
        finally:
            timer.cancel()
        err = errors[0] if errors else b""
        if self._stopping:
            raise _Stopped()
        if overflow:
            return subprocess.CompletedProcess(process.args, 255, b"", err + f"\nssh: step {overflow[0]}".encode())
        return subprocess.CompletedProcess(process.args, returncode, out, err)

    def _fail(self, kind: str, cause: str, tail: str | bytes = "") -> None:
        text = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        lines = [clean_line(line, TAIL_LINE_CHARS) for line in text.splitlines() if line.strip()][-TAIL_LINES:]
        self.row.update(status=TargetStatus.FAILED, cause_kind=kind, cause=clean_line(cause, 600),
                        stderr_tail=lines or list(self.tail))
        self.save()

    def _stream(self, stream: Any) -> None:
        """Each line of a target's output: printed with the target's name, kept in the tail."""
        for raw in iter(lambda: stream.readline(LINE_READ_BYTES), b""):
            self._line(raw.decode(errors="replace"))

    def _line(self, text: str) -> None:
        line = clean_line(text.rstrip("\r\n"), TAIL_LINE_CHARS)
        if not line.strip():
            return
        self.tail.append(line)
        if not output.quiet():
            print(f"[{self.target.name}] {line}", file=sys.stderr, flush=True)

    # -- the run
    def run(self) -> None:
        started = time.monotonic()
        try:
            if self.target.kind == "local":
                self._run_local()
            elif self.target.kind == "sky":
                self._run_sky()
            else:
                self._run_ssh()
        except _Stopped:
            pass
        except Exception as exc:  # a failure on one target is a row, never the end of the others
            self._fail("internal-error", f"{type(exc).__name__}: {exc}")
        finally:
            self.row.setdefault("timings", {})["total_s"] = round(time.monotonic() - started, 2)
            self.save()

    def _run_local(self) -> None:
        out = self.plan.out_dir / self.target.name
        env = {**os.environ, "TORCHPORT_PROGRESS_INTERVAL": os.environ.get("TORCHPORT_PROGRESS_INTERVAL", "5")}
        self.row["status"] = TargetStatus.RUNNING
        out.mkdir(parents=True, exist_ok=True)
        process = self._spawn([sys.executable, "-m", "torchport", self.plan.command, *self.plan.local_args,
                               *self.plan.output_arguments(str(out)), *self._passthrough()],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True)
        assert process.stdout is not None
        self._stream(process.stdout)
        self._finish(process.wait(), out)

    def _finish(self, rc: int | None, out: Path) -> None:
        if self._stopping:
            return
        has_result = (out / self.plan.result_file).exists()
        if has_result:
            self.row["result"] = f"{self.target.name}/{self.plan.result_file}"
        if rc == 0 and has_result:
            self.row.update(status=TargetStatus.OK, cause_kind=None, cause=None)
            self.save()
        elif rc is None:
            self._fail("run-failed", "the remote run ended without an exit status (killed?)")
        else:
            self._fail("run-failed", f"torchport {self.plan.command} exited with status {rc}"
                       + ("" if has_result else " and wrote no result"))

    def _run_sky(self) -> None:
        from torchport.remote import sky

        launch = self.sky.launches[self.target.name]
        self.row.update(status=TargetStatus.LAUNCHING, cluster=launch.cluster, resources=clean_line(launch.resources, 300),
                        price_per_hour=launch.hourly_price)
        self.save()
        out = self.plan.out_dir / self.target.name
        began = time.monotonic()
        try:
            rc = sky.launch_and_wait(launch, _LineWriter(self._line))
            self.row.setdefault("timings", {})["run_s"] = round(time.monotonic() - began, 2)
            if self._stopping:
                return
            problem = self.fetch(out, ["tar", "-czf", "-", "-C", sky.results_folder(self.plan), "."],
                                 target=parse_target(launch.cluster))
            if problem:
                return self._fail("fetch-failed", problem)
            self._finish(rc, out)
        except _Stopped:
            raise
        except Exception as exc:  # SkyPilot's own errors: a row, with its first line
            self._fail("launch-failed", f"SkyPilot: {type(exc).__name__}: {sky.first_line(exc)}")
        finally:
            self.tear_down()

    def tear_down(self) -> None:
        """A sky: target's cluster, unless --keep (its autostop still tears it down once idle)."""
        cluster = self.row.get("cluster")
        if self.target.kind != "sky" or not cluster or self.plan.keep_cluster or self.row.get("cluster_removed"):
            return
        from torchport.remote import sky

        try:
            sky.tear_down(cluster)
            self.row["cluster_removed"] = True
        except Exception as exc:
            self.row["teardown_error"] = clean_line(f"{type(exc).__name__}: {exc}", 300)
            output.note(f"{self.target.name}: tearing down cluster {cluster} failed; run `sky down {cluster}` "
                        f"(autostop tears it down after {self.plan.autostop_minutes} idle minutes)")
        self.save()

    def _passthrough(self) -> list[str]:
        return ["--", *self.plan.passthrough] if self.plan.passthrough else []

    def _remote_python(self, *argv: str) -> list[str]:
        return ["sh", "-c", remote_scripts.RUN_PYTHON, "torchport", self.plan.remote_python, *argv]

    def _run_ssh(self) -> None:
        assert self.wheel is not None
        timings = self.row.setdefault("timings", {})
        self.row["status"] = TargetStatus.SETTING_UP
        self.save()
        began = time.monotonic()
        probe = self._ssh(self._remote_python("-c", remote_scripts.PROBE, self.wheel.key), timeout=120)
        if probe.returncode == 255:
            return self._fail(*ssh_cause(probe.stderr.decode(errors="replace")))
        if probe.returncode == 127:
            return self._fail("no-python", f"no {self.plan.remote_python} on the remote (--remote-python PATH names another)",
                              probe.stderr)
        info = _marked_json(probe.stdout)
        if probe.returncode != 0 or info is None:
            return self._fail("no-python", f"the remote's {self.plan.remote_python} did not answer (exit {probe.returncode})",
                              probe.stderr + probe.stdout)
        self.row["remote"] = {"python": clean_line(str(info.get("python")), 40), "torch": clean_line(str(info.get("torch")), 60),
                              "executable": clean_line(str(info.get("executable")), 300)}
        version = tuple(int(p) for p in str(info.get("python", "0")).split(".")[:2] if p.isdigit())
        if version < MIN_PYTHON:
            return self._fail("no-python", f"the remote's Python is {clean_line(str(info.get('python')), 40)}; "
                              f"torchport needs {'.'.join(map(str, MIN_PYTHON))} or later (--remote-python PATH)")
        torch_version = info.get("torch")
        if not torch_version:
            return self._fail("no-torch", f"no usable torch on the remote's {self.plan.remote_python}: "
                              f"{clean_line(str(info.get('torch_error')), 300)}; install torch there (torchport "
                              "never downloads it) or pass --remote-python PATH")
        if _version(str(torch_version)) < MIN_TORCH:
            return self._fail("no-torch", f"the remote's torch is {clean_line(str(torch_version), 60)}; torchport needs "
                              f"{'.'.join(map(str, MIN_TORCH))} or later")
        base = str(info["base"])
        if info.get("venv_ready"):
            self.row["venv"] = "reused"
        else:
            setup = self._ssh(self._remote_python("-c", remote_scripts.SETUP, self.wheel.key, self.wheel.filename,
                                                  json.dumps(list(self.wheel.requirements))), data=self.wheel.data)
            if setup.returncode == 255:
                return self._fail(*ssh_cause(setup.stderr.decode(errors="replace")))
            if setup.returncode != 0:
                return self._fail("install-failed", f"installing torchport on the remote failed (exit {setup.returncode})",
                                  setup.stderr + setup.stdout)
            self.row["venv"] = "reused" if b"reused" in setup.stdout else "created"
        timings["setup_s"] = round(time.monotonic() - began, 2)
        venv = str(info.get("venv"))
        if not re.fullmatch(r"[0-9a-f]{12}-[0-9a-f]{8}", venv):
            return self._fail("install-failed", f"the remote named its venv {clean_line(venv, 60)!r}, not KEY-HASH")
        python = f"{base}/venvs/{venv}/bin/python"
        run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(4)
        self.row.update(run_id=run_id, remote_base=base, remote_python=python)
        self.save()
        began = time.monotonic()
        detached = [python, "-m", "torchport.remote.detached"]
        received = self._ssh([*detached, "receive", run_id], data=self.archive)
        if received.returncode != 0:
            kind, cause = ssh_cause(received.stderr.decode(errors="replace")) if received.returncode == 255 else \
                ("ship-failed", f"unpacking the app's folder on the remote failed (exit {received.returncode})")
            return self._fail(kind, cause, received.stderr)
        timings["ship_s"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        started = self._ssh([*detached, "start", run_id, self.plan.command, *self.plan.remote_args,
                             *self.plan.output_arguments(f"{base}/runs/{run_id}/out"), *self._passthrough()])
        if started.returncode != 0:
            return self._fail("run-failed", f"starting the evaluation on the remote failed (exit {started.returncode})",
                              started.stderr)
        self.row["status"] = TargetStatus.RUNNING
        self.save()
        self.follow_and_fetch(began)

    def follow_and_fetch(self, began: float) -> None:
        """Stream the remote run until it ends, then bring its results home (also `collect`'s reattach)."""
        detached = [self.row["remote_python"], "-m", "torchport.remote.detached"]
        run_id = self.row["run_id"]
        process = self._spawn(ssh_command(self.target, [*detached, "follow", run_id, "0"], config=self.plan.ssh_config),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        errors = threading.Thread(target=lambda: self.row.__setitem__("_ssh_stderr", process.stderr.read()), daemon=True)  # type: ignore[union-attr]
        errors.start()
        self._stream(process.stdout)
        rc = process.wait()
        errors.join()
        ssh_error = self.row.pop("_ssh_stderr", b"") or b""
        if self._stopping:
            return
        if rc != 0:
            self.row.update(status=TargetStatus.DETACHED, cause_kind="connection-lost",
                            cause=f"the connection was lost ({ssh_cause(ssh_error.decode(errors='replace'))[1]}); "
                                  "the run goes on there: `torchport collect OUT_DIR` reattaches or fetches it")
            self.save()
            return
        self.row.setdefault("timings", {})["run_s"] = round(time.monotonic() - began, 2)
        self.fetch_and_clean()

    def fetch_and_clean(self) -> None:
        state = self._ssh([self.row["remote_python"], "-m", "torchport.remote.detached", "status", self.row["run_id"]])
        remote_state = _marked_json(b"torchport-remote-json:" + state.stdout.strip()) if state.returncode == 0 else None
        out = self.plan.out_dir / self.target.name
        problem = self.fetch(out)
        if problem:
            return self._fail("fetch-failed", problem)
        if not self.plan.keep_remote:
            self._ssh([self.row["remote_python"], "-m", "torchport.remote.detached", "clean", self.row["run_id"]])
            self.row["remote_removed"] = True
        self._finish(None if remote_state is None else remote_state.get("rc"), out)

    def fetch(self, out: Path, remote_argv: list[str] | None = None, target: Target | None = None) -> str | None:
        """The remote's results folder, sent as a tar.gz, unpacked into OUT (None: done; else the problem)."""
        if remote_argv is None:
            remote_argv = [self.row["remote_python"], "-m", "torchport.remote.detached", "fetch", self.row["run_id"]]
        fetched = self._ssh(remote_argv, target=target)
        if fetched.returncode != 0:
            return ssh_cause(fetched.stderr.decode(errors="replace"))[1]
        try:
            with tarfile.open(fileobj=io.BytesIO(fetched.stdout), mode="r:gz") as archive:
                members = archive.getmembers()
                if sum(m.size for m in members) > MAX_FETCH_BYTES:
                    return f"the remote's results unpack above the {MAX_FETCH_BYTES / 1e6:.0f} MB cap"
                out.mkdir(parents=True, exist_ok=True)
                archive.extractall(out, members=members, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            return f"the remote's results could not be unpacked: {clean_line(str(exc), 200)}"
        return None

    def interrupt(self) -> None:
        """Stop this target now: its local process ended, a remote run stopped, its partial result fetched and removed."""
        with self._lock:
            self._stopping = True
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()

    def stop_remote(self) -> None:
        if self.target.kind == "sky":
            self._stopping = False
            try:
                self.tear_down()
            finally:
                self._stopping = True
            return
        if self.target.kind != "ssh" or not self.row.get("run_id") or self.row.get("status") != TargetStatus.RUNNING:
            return
        self._stopping = False  # the clean-up steps below must run
        try:
            self._ssh([self.row["remote_python"], "-m", "torchport.remote.detached", "stop", self.row["run_id"]], timeout=180)
            out = self.plan.out_dir / self.target.name
            self.fetch(out)
            if not self.plan.keep_remote:
                self._ssh([self.row["remote_python"], "-m", "torchport.remote.detached", "clean", self.row["run_id"]])
                self.row["remote_removed"] = True
            if (out / self.plan.result_file).exists():
                self.row["result"] = f"{self.target.name}/{self.plan.result_file}"
        finally:
            self._stopping = True


def read_capped(stream: Any, cap: int, process: subprocess.Popen, overflow: list[str] | None = None) -> bytes:
    """All of STREAM, or its first CAP bytes and the process ended."""
    chunks, size = [], 0
    for chunk in iter(lambda: stream.read(1 << 16), b""):
        size += len(chunk)
        if size > cap:
            if overflow is not None:
                overflow.append(f"sent more than {cap / 1e6:.0f} MB")
            process.kill()
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _write_and_close(stream: Any, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the remote may end (or fail) before reading it all
        stream.write(data)
    with contextlib.suppress(OSError):
        stream.close()


class _LineWriter(io.TextIOBase):
    """A text stream handing each complete line to a callback (SkyPilot writes its logs to one)."""

    def __init__(self, emit: Any):
        self._emit = emit
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""


class _Stopped(Exception):
    """The run was interrupted; its target's row says so."""


def _marked_json(stdout: bytes) -> dict[str, Any] | None:
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        if line.startswith(remote_scripts.MARKER):
            try:
                value = json.loads(line[len(remote_scripts.MARKER):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


class Manifest:
    """``OUT_DIR/targets.json``: every target's row, written after each change."""

    def __init__(self, out_dir: Path, document: dict[str, Any]):
        self.path = out_dir / MANIFEST
        self.document = document
        self._lock = threading.Lock()

    def save(self) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            rows = [{k: v for k, v in row.items() if not k.startswith("_")} for row in self.document["targets"]]
            text = json.dumps({**self.document, "targets": rows}, indent=1) + "\n"
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.path)

    @classmethod
    def load(cls, out_dir: Path) -> Manifest:
        path = out_dir / MANIFEST
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"no {MANIFEST} here: not the folder of a run with --on", location=str(out_dir)) from None
        except ValueError as exc:
            raise UserError(f"{MANIFEST} is not valid JSON: {exc}", location=str(path)) from None
        if not isinstance(document, dict) or document.get("kind") != KIND:
            raise UserError(f"not a torchport targets file (kind {KIND})", location=str(path))
        return cls(out_dir, document)


def run_plan(plan: Plan) -> int:
    wheel = ship.build_wheel() if any(t.kind in ("ssh", "sky") for t in plan.targets) else None
    # For sky: targets SkyPilot syncs the folder itself; the cap is checked the same way.
    archive = ship.pack_folder(plan.folder, plan.max_upload_bytes) if wheel else b""
    sky_targets = [t for t in plan.targets if t.kind == "sky"]
    if not sky_targets:
        return _run_targets(plan, wheel, archive)
    from torchport.remote import sky

    assert wheel is not None
    with sky.session(plan, wheel, sky_targets, plan.assume_yes) as session:
        return _run_targets(plan, wheel, archive, session)


def _run_targets(plan: Plan, wheel: ship.Wheel | None, archive: bytes, sky_session: Any = None) -> int:
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "kind": KIND, "version": VERSION, "command": ["torchport", *sys.argv[1:]], "torchport_command": plan.command,
        "ssh_config": str(plan.ssh_config.resolve()) if plan.ssh_config else None, "keep_remote": plan.keep_remote,
        "targets": [{"name": t.name, "target": t.text, "kind": t.kind, "status": TargetStatus.WAITING} for t in plan.targets],
    }
    manifest = Manifest(plan.out_dir, document)
    manifest.save()
    output.note(f"writing {plan.out_dir}: {', '.join(t.name for t in plan.targets)}")
    runs = [TargetRun(t, plan, row, manifest.save, wheel, archive, sky=sky_session)
            for t, row in zip(plan.targets, document["targets"])]
    _run_all(runs, manifest)
    return finish(plan.out_dir, manifest)


def _run_all(runs: list[TargetRun], manifest: Manifest) -> None:
    threads = [threading.Thread(target=run.run, name=f"target-{run.target.name}", daemon=True) for run in runs]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # short waits, so Ctrl-C reaches this thread
    except KeyboardInterrupt:
        output.note("interrupted: stopping the targets' runs and removing their remote folders")
        for run in runs:
            run.interrupt()
        for thread in threads:
            thread.join(timeout=60)
        for run in runs:
            run.stop_remote()
            if run.row.get("status") not in (TargetStatus.OK, TargetStatus.FAILED):
                run.row.update(status=TargetStatus.INTERRUPTED, cause_kind="interrupted", cause="stopped by the user")
        manifest.save()
        # The combined answer over what was measured before the interrupt; the interrupt stays the news.
        with contextlib.suppress(OSError, UserError):
            finish(manifest.path.parent, manifest)
        raise


def finish(out_dir: Path, manifest: Manifest) -> int:
    """The combined answer: the comparison of the targets with a result, the report, the summary."""
    from torchport.report import compare_text

    rows = [TargetRow.from_dict(row) for row in manifest.document["targets"]]
    results = [(row.name, out_dir / row.result) for row in rows if row.result and (out_dir / row.result).exists()]
    if manifest.document.get("torchport_command", "evaluate") != "evaluate":
        return _finish_sections(out_dir, manifest, results)
    comparison = None
    if results:
        from torchport.compare import compare_results

        try:
            comparison = compare_results([path for _, path in results], labels=[f"{path}={name}" for name, path in results])
        except UserError as exc:
            manifest.document["comparison_error"] = exc.one_line()
    manifest.document["comparison"] = "comparison.json" if comparison else None
    documents = []
    for name, path in results:
        try:
            documents.append((name, result_record(json.loads(path.read_text(encoding="utf-8")))))
        except (ValueError, TypeError, AttributeError):
            continue  # compare_results has named the broken file
    table = predictions.prediction_table(documents)
    manifest.document["predictions"] = table.to_dict()
    manifest.save()
    report = [targets_markdown(rows)]
    if comparison is not None:
        (out_dir / "comparison.json").write_text(json.dumps(comparison.to_dict(), indent=1) + "\n", encoding="utf-8")
        report.append(compare_text.markdown(comparison))
    report.append(predictions.markdown(table))
    (out_dir / "report.md").write_text("\n".join(report), encoding="utf-8")
    print_targets(rows)
    if comparison is not None:
        compare_text.print_comparison(comparison)
    predictions.print_table(table)
    print(f"targets: {out_dir / MANIFEST}\nreport: {out_dir / 'report.md'}")
    return _exit_status(rows)


def _exit_status(rows: list[TargetRow]) -> int:
    """0 when the first target (the one the others are compared with) ran."""
    return 0 if rows and rows[0].status == TargetStatus.OK else 1


def _finish_sections(out_dir: Path, manifest: Manifest, results: list[tuple[str, Path]]) -> int:
    """trace and check: each target's own report, one after the other (their text was streamed as they ran)."""
    command = manifest.document["torchport_command"]
    rows = [TargetRow.from_dict(row) for row in manifest.document["targets"]]
    manifest.save()
    report = [targets_markdown(rows)]
    for name, path in results:
        try:
            text = _section_markdown(command, json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            text = f"{name}: the {command} result could not be read: {clean_line(str(exc), 200)}\n"
        report += [f"# {name}", "", text]
    (out_dir / "report.md").write_text("\n".join(report), encoding="utf-8")
    print_targets(rows)
    print(f"targets: {out_dir / MANIFEST}\nreport: {out_dir / 'report.md'}")
    return _exit_status(rows)


def _section_markdown(command: str, section: Any) -> str:
    """A target's trace or check result (the section as its document holds it), in markdown."""
    if command == "trace":
        from torchport.trace.report import markdown as trace_markdown

        return trace_markdown(TraceSection.from_dict(section))
    from torchport.check.report import markdown as check_markdown

    return check_markdown(ChecksSection.from_dict(section))


def print_targets(rows: list[TargetRow]) -> None:
    print("targets:")
    for row in rows:
        extra = []
        if row.venv:
            extra.append(f"venv {row.venv}")
        timings = row.timings or TargetTimings()
        if timings.setup_s is not None:
            extra.append(f"setup {timings.setup_s:.1f} s")
        if timings.total_s is not None:
            extra.append(f"total {timings.total_s:.1f} s")
        detail = f" ({', '.join(extra)})" if extra else ""
        print(f"  {row.name}: {row.status}{detail}" + (f": {row.cause}" if row.cause else ""))
        if row.status != TargetStatus.OK and row.stderr_tail:
            for line in row.stderr_tail[-5:]:
                print(f"    | {line}")


def targets_markdown(rows: list[TargetRow]) -> str:
    from torchport.report.compare_text import md

    lines = ["# Targets", "", "| target | status | cause | remote Python / torch | venv | setup s | total s |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        remote = row.remote or RemoteFacts()
        timings = row.timings or TargetTimings()
        lines.append(f"| {md(row.target)} | {md(row.status)} | {md(row.cause or '')} | "
                     f"{md(remote.python)} / {md(remote.torch)} | {md(row.venv or '')} | "
                     f"{_cell(timings.setup_s)} | {_cell(timings.total_s)} |")
    for row in rows:
        if row.status != TargetStatus.OK and row.stderr_tail:
            lines += ["", f"## {md(row.name)}: output tail", "", "```",
                      *(line.replace("```", "'''") for line in row.stderr_tail), "```"]
    return "\n".join(lines) + "\n"


def _cell(seconds: float | None) -> str:
    return "" if seconds is None else str(seconds)


def collect(out_dir: Path) -> int:
    """Reattach to the runs whose connection dropped, or fetch what they finished."""
    manifest = Manifest.load(out_dir)
    document = manifest.document
    config = Path(document["ssh_config"]) if document.get("ssh_config") else None
    command = document.get("torchport_command") or "evaluate"
    if command not in RESULT_FILES:
        raise UserError(f"unknown command {clean_line(str(command), 40)!r} in {MANIFEST}", location=str(out_dir))
    plan = Plan(targets=[], out_dir=out_dir, local_args=[], remote_args=[], folder=None, ssh_config=config,
                keep_remote=bool(document.get("keep_remote")), command=command)
    runs = []
    for row in document["targets"]:
        if row.get("kind") == "ssh" and row.get("status") in (TargetStatus.DETACHED, TargetStatus.RUNNING) and row.get("run_id"):
            target = parse_target(row["target"])
            plan.targets.append(target)
            runs.append(TargetRun(target, plan, row, manifest.save))
    if not runs:
        output.note("nothing to collect: no target's run is still out there")
    threads = []
    for run in runs:
        def reattach(run: TargetRun = run) -> None:
            try:
                state = run._ssh([run.row["remote_python"], "-m", "torchport.remote.detached", "status", run.row["run_id"]],
                                 timeout=120)
                if state.returncode != 0:
                    kind, cause = ssh_cause(state.stderr.decode(errors="replace"))
                    output.note(f"{run.target.name}: still unreachable: {cause}")
                    return
                remote = _marked_json(b"torchport-remote-json:" + state.stdout.strip()) or {}
                if not remote.get("exists"):
                    run._fail("run-lost", "the remote run folder is gone (removed, or another collect fetched it)")
                    return
                output.note(f"{run.target.name}: {'reattaching' if remote.get('running') else 'fetching'}")
                run.row["status"] = TargetStatus.RUNNING
                run.follow_and_fetch(time.monotonic())
            except Exception as exc:
                run._fail("internal-error", f"{type(exc).__name__}: {exc}")
        threads.append(threading.Thread(target=reattach, daemon=True))
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        for run in runs:
            run.interrupt()
        manifest.save()
        raise
    return finish(out_dir, manifest)
