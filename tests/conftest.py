"""Shared test helpers.  Tests run the real CLI in real subprocesses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "apps"

# Small protocol settings for tests where the figures are not the point.
QUICK_TIMING = ["--repeats", "1", "--steps", "4", "--blocks", "2", "--max-warmup", "4", "--no-inference"]
# ...and without the trace and checks stages, which have tests of their own.
QUICK = QUICK_TIMING + ["--no-trace", "--no-checks"]


def run_torchport(*args: str, timeout: float = 300, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m torchport.cli ARGS`` as a user would, capturing output."""
    return subprocess.run(
        [sys.executable, "-m", "torchport.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )


def load_result(out_dir: Path) -> dict:
    return json.loads((out_dir / "result.json").read_text())


@pytest.fixture
def torchport_cli():
    return run_torchport


@pytest.fixture
def apps_dir() -> Path:
    return APPS


def _environment(name: str) -> dict:
    """A torchport environment the test needs: skipped locally when it is
    missing, a failure in CI (whose `make test` creates it first)."""
    from torchport import envs

    record = envs.status(name)
    if not record["ready"]:
        message = f"{record['problem']}; run: torchport env create {name}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must create the {name} environment before the tests: {message}")
        pytest.skip(message)
    return record


@pytest.fixture
def xla_environment():
    return _environment("xla")


@pytest.fixture(scope="session")
def tpu_environment():
    """torchport's tpu environment (CPU torch 2.13.0 + torch_tpu 0.2.0 + libtpu)."""
    return _environment("tpu")
