"""sky:ACCELERATOR targets: the task torchport builds, checked by SkyPilot's own parser, and the path without a cloud.

Nothing here can reach a cloud: there are no credentials, SkyPilot's usage
reporting is off, and its local API server (started by the no-cloud test
through the real CLI) runs under a throwaway HOME on a port of its own.
No cloud launch is run anywhere in the tests.
"""
from __future__ import annotations

import os
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest

from conftest import run_torchport
from torchport import project_config
from torchport.cli import build_parser
from torchport.remote import ship
from torchport.remote.runner import plan_from_args
from torchport.remote.sky import RESULTS, VENV, cluster_name, task_config
from torchport.remote.targets import parse_target

sky = pytest.importorskip("sky", reason="SkyPilot is not installed (pip install 'torchport[sky]'; `make test` installs it)")

TESTS = Path(__file__).resolve().parent
TARGETS = {"sky:tpu-v6e-1": {"tpu-v6e-1": 1}, "sky:H100:1": {"H100": 1}, "sky:Trainium2:1": {"Trainium2": 1}}


def _plan(monkeypatch, argv: list[str]):
    """The plan of ``torchport ARGV`` as the command line makes it (the script's arguments after `--` aside)."""
    monkeypatch.setattr(sys, "argv", ["torchport", *argv])
    options = argv[:argv.index("--")] if "--" in argv else argv
    args = build_parser().parse_args(options)
    project_config.apply(args, args.command_parsers[args.command])
    return plan_from_args(args, argv[0])


@pytest.mark.parametrize("text", list(TARGETS))
def test_the_task_is_valid_for_skypilots_own_parser(text, monkeypatch, tmp_path):
    plan = _plan(monkeypatch, ["evaluate", "--script", str(TESTS / "scripts" / "agnostic.py"), "--on", text, "--yes",
                               "--keep", "--autostop", "45", "-b", "cpu,xla", "--steps", "6", "--out-dir", str(tmp_path),
                               "--", "--epochs", "2"])
    target = parse_target(text)
    wheel = ship.build_wheel()
    wheel_file = tmp_path / wheel.filename
    wheel_file.write_bytes(wheel.data)
    config = task_config(plan, target, wheel, str(wheel_file), plan.autostop_minutes)

    task = sky.Task.from_yaml_config(config)  # raises on anything SkyPilot does not accept

    assert task.name == cluster_name(target)
    (resources,) = task.resources
    assert resources.accelerators == TARGETS[text]
    assert resources.autostop_config.enabled and resources.autostop_config.idle_minutes == 45
    assert resources.autostop_config.down
    assert task.workdir == str(TESTS / "scripts")  # the script's folder, synced by SkyPilot
    assert list(task.file_mounts.values()) == [str(wheel_file)]
    # The run is the same command with the same options; this machine's options stay here.
    run = shlex.split(task.run)
    assert run[0] == f"$HOME/{VENV}/bin/torchport" and run[1] == "evaluate"
    assert run[2:] == [*plan.remote_args, "--out-dir", RESULTS, "--", "--epochs", "2"]
    assert "--script" in run and "agnostic.py" in run and "--steps" in run
    assert not {"--yes", "--keep", "--autostop", "--on", text} & set(run)
    setup = task.setup
    assert list(task.file_mounts) == [f"~/.torchport-sky/wheels/{wheel.filename}"]
    # The setup's paths are relative to the login folder it moves to (a quoted ~ would not expand).
    assert setup.startswith("set -e\ncd ~\n") and "~" not in setup.split("cd ~", 1)[1]
    assert f"--no-deps --force-reinstall .torchport-sky/wheels/{wheel.filename}" in setup
    assert ("env create xla" in setup and "env create tpu" in setup) == text.startswith("sky:tpu")


def test_bad_sky_targets_are_one_line():
    for text in ("sky:", "sky:H100:0", "sky:H100;rm", "sky:-oProxy"):
        completed = run_torchport("evaluate", "builtin:classifier", "--on", text, "--no-trace", "--no-checks")
        assert completed.returncode == 2, (text, completed.stderr)
        assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr, completed.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _processes_with_home(home: Path) -> list[str]:
    """Processes of this user whose HOME is HOME: everything the run started (SkyPilot's API server among them)."""
    marker = f"HOME={home}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {cmdline}")
        except OSError:
            continue
    return found


def test_without_a_cloud_one_line_names_sky_check_and_no_api_server_is_left(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    port = _free_port()
    env = {"HOME": str(home), "SKYPILOT_API_SERVER_LOCAL_PORT": str(port), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    # --yes: a cloud set up would be launched; here there is none, so nothing is.
    completed = run_torchport("evaluate", "builtin:classifier", "--on", "sky:H100:1", "--yes", "--no-trace", "--no-checks",
                              "--out-dir", str(tmp_path / "out"), env=env, timeout=600)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr and completed.stdout == ""
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert "no cloud set up" in completed.stderr and "`sky check`" in completed.stderr
    # The run started SkyPilot's API server to ask it (there was none on that port) and stopped it.
    assert (home / ".sky" / "api_server" / "server.log").exists()
    deadline = time.monotonic() + 30  # a stopped server's children may take a moment to be reaped
    while (left := _processes_with_home(home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], left
    assert not os.path.exists(tmp_path / "out" / "targets.json")  # nothing launched, no row written
