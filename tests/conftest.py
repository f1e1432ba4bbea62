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


@pytest.fixture
def xla_environment():
    """Tests on the xla backend need torchport's xla environment: skipped
    locally when it is missing, a failure in CI (which creates it first)."""
    from torchport import envs

    record = envs.status("xla")
    if not record["ready"]:
        message = f"{record['problem']}; run: torchport env create xla"
        if os.environ.get("CI"):
            pytest.fail(f"CI must create the xla environment before the tests: {message}")
        pytest.skip(message)
    return record
