"""Nothing torchport does on a machine without a TPU starts the TPU runtime.

Starting it here (libtpu initializing a client) makes libtpu ask the cloud
instance-metadata server (169.254.169.254) for the TPU type, 30 tries per key,
for minutes.  This was seen once during development (a probe read
``torch.tpu.default_generators``, whose getter initializes the device): libtpu
created ``/tmp/libtpu_lockfile`` at the moment it initialized, printed "The PJRT
plugin has PJRT API version ...", then "Failed to get TPU metadata
(accelerator-type) ..." after about 30 s per key.  So the watch below looks for
exactly those signs, without starting anything to provoke them:

* ``/tmp/libtpu_lockfile`` appears (libtpu creates it when it initializes);
* any TCP socket to 169.254.169.254 shows up in /proc/net/tcp{,6} (polled every
  5 ms while the commands run);
* libtpu's or torch_tpu's initialization messages in the commands' stderr;
* torch_tpu's own flags in the interpreter that imported it (device
  initialized, backend loaded, PrivateUse1 renamed);
* and time: each command must finish within a bound that libtpu's metadata
  retries would cross (over five minutes when it happened; the bounds leave
  room for a machine shared with other test suites, where importing torch_tpu
  alone took 10 s idle and 50 s loaded).

The commands are the ones a user runs, with the tpu backends requested:
``backends``, ``evaluate -b tpu,...`` (which also traces and checks), ``trace``
(whose TorchTPU table is read with torch_tpu imported in the tpu
environment), ``check -b tpu``.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import QUICK_TIMING, load_result

LOCKFILE = Path("/tmp/libtpu_lockfile")
# 169.254.169.254 as /proc/net/tcp writes it (little-endian hex), in tcp and as an IPv4-mapped tcp6 address.
METADATA_ADDRESS = "FEA9FEA9"
INIT_MARKERS = ("The PJRT plugin has PJRT API version", "Failed to get TPU metadata", "InitGoogle",
                "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE", "libtpu_lockfile",
                "Successfully renamed PrivateUse1 backend", "Initializing TPU distributed runtime")
TPU_BACKENDS = "tpu,tpu-fused,tpu-compile"


class RuntimeWatch:
    """Watches the machine for the signs of a TPU runtime start (see above)."""

    def __init__(self) -> None:
        self.connections: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for table in ("/proc/net/tcp", "/proc/net/tcp6"):
                try:
                    lines = Path(table).read_text().splitlines()[1:]
                except OSError:
                    continue
                for line in lines:
                    remote = line.split()[2]
                    if remote.split(":")[0].endswith(METADATA_ADDRESS):
                        self.connections.append(f"{table}: {line.strip()}")
            self._stop.wait(0.005)

    def __enter__(self) -> RuntimeWatch:
        if LOCKFILE.exists():
            message = f"{LOCKFILE} exists already: the watch could not tell a new TPU runtime start"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def assert_nothing_started(self, outputs: list[str]) -> None:
        assert not LOCKFILE.exists(), "libtpu initialized: it created /tmp/libtpu_lockfile"
        assert self.connections == [], "a connection to the cloud metadata server was seen"
        for text in outputs:
            for marker in INIT_MARKERS:
                assert marker not in text, f"TPU runtime initialization message in the output: {marker!r}"


def timed(run, *args, limit_s: float, **kwargs):
    started = time.monotonic()
    done = run(*args, **kwargs)
    elapsed = time.monotonic() - started
    assert elapsed < limit_s, f"{args[:2]} took {elapsed:.1f} s (limit {limit_s} s)"
    return done, elapsed


def test_no_torchport_command_starts_the_tpu_runtime(tpu_environment, torchport_cli, tmp_path):
    from torchport import envs
    from torchport.trace import support

    with RuntimeWatch() as watch:
        outputs = []
        # 1. backends: the TorchTPU decision takes milliseconds (files only);
        # the command as a whole (an interpreter start and torchport's
        # imports: 0.33-0.38 s on an idle 2-core machine, up to 2.5 s with
        # four other test suites running on it) gets a bound that only a hang
        # or a runtime start would cross.
        from torchport import backends

        started = time.monotonic()
        for name in TPU_BACKENDS.split(","):
            assert not backends.availability(name).available
        assert time.monotonic() - started < 2.0
        done, elapsed = timed(torchport_cli, "backends", "--json", limit_s=15.0)
        outputs.append(done.stderr)
        rows = {row["name"]: row for row in json.loads(done.stdout)}
        for name in TPU_BACKENDS.split(","):
            assert not rows[name]["available"]
            assert rows[name]["reason"].startswith("torch_tpu 0.2.0 importable (tpu environment); "
                                                   "no TPU chip on this machine (probed in ")

        # 2. The registration query the trace makes, run fresh (the trace's
        # own result may come from its cache): torch_tpu imported, nothing started.
        started = time.monotonic()
        answer = subprocess.run([tpu_environment["python"], "-m", "torchport.trace.registrations",
                                 _request(tmp_path, support.TPU_REQUEST)], capture_output=True, text=True,
                                timeout=240, env={**os.environ, "PYTHONPATH": envs.import_root(), **support.TPU_QUERY_ENV})
        assert time.monotonic() - started < 150
        assert answer.returncode == 0, answer.stderr[-2000:]
        outputs.append(answer.stderr)
        assert "GetPjrtApi was found for TPU" in answer.stderr  # libtpu loaded: the watch is looking at the right process
        runtime = json.loads(answer.stdout.strip().splitlines()[-1])["runtime"]
        assert runtime == {"privateuse1_name": "privateuseone", "torch_tpu_loaded": False,
                           "torch_tpu_device_initialized": False}

        # 3. evaluate with the tpu backends (its trace and checks stages included).
        out = tmp_path / "evaluate"
        done, _ = timed(torchport_cli, "evaluate", "builtin:classifier", "-b", f"cpu,{TPU_BACKENDS}",
                        *QUICK_TIMING, "-o", str(out), limit_s=280, timeout=400)
        outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, done.stderr[-2000:]
        document = load_result(out)
        for name in TPU_BACKENDS.split(","):
            entry = document["backends"][name]
            assert not entry["available"] and entry["runs"] == []
            assert entry["verification"] == "API verified against torch_tpu 0.2.0; not run on TPU hardware"
        assert document["trace"]["verdicts"]["tpu"]["text"].endswith(
            "[op support from torch_tpu 0.2.0 dispatcher registrations, read live]")

        # 4. trace and check with the tpu target / backends.
        done, _ = timed(torchport_cli, "trace", "builtin:gpt", limit_s=280, timeout=400)
        outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, done.stderr[-2000:]
        assert "TorchTPU (torch_tpu): runs as is" in done.stdout
        assert "op support from torch_tpu 0.2.0 dispatcher registrations" in done.stdout
        checked = tmp_path / "check.json"
        done, _ = timed(torchport_cli, "check", "builtin:classifier", "-b", f"cpu,{TPU_BACKENDS}", "--only",
                        "parity,checkpoint", "--steps", "4", "--json", str(checked), limit_s=280, timeout=400)
        outputs += [done.stdout, done.stderr]
        report = json.loads(checked.read_text())
        for name in TPU_BACKENDS.split(","):
            assert not report["backends"][name]["available"]
            [skipped] = [c for c in report["checks"] if c.get("backend") == name]
            assert skipped["status"] == "skipped" and "no TPU chip on this machine" in skipped["reason"]

    watch.assert_nothing_started(outputs)


def _request(folder: Path, request: dict) -> str:
    path = folder / "request.json"
    path.write_text(json.dumps(request))
    return str(path)
