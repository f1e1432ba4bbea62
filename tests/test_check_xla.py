"""`torchport check` on the xla backend (torch_xla 2.9 on XLA's CPU client, in
torchport's xla environment).  Skipped when the environment is missing
locally; a failure in CI, which creates it first.

Verified here: parity against the float64 CPU run, checkpoints both ways
between cpu and xla (with the device RNG reported as not restorable across
them), the input pipeline.  Not verified: a TPU, recovery and DDP on xla."""
from __future__ import annotations

import importlib.util

import pytest

from torchport.check.runner import CheckOptions, check_section

pytestmark = [pytest.mark.xla, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_xla(xla_environment):
    """Every test here runs on the xla backend (see conftest.xla_environment)."""


@pytest.mark.alone
def test_parity_checkpoints_and_pipeline_on_xla(tmp_path):
    section = check_section(CheckOptions(app="builtin:classifier", backends=["cpu", "xla"],
                                      only=("parity", "checkpoint", "pipeline"), steps=4, work_dir=tmp_path)).to_dict()
    checks = {(c["name"], c.get("backend") or c.get("pair")): c for c in section["checks"]}
    assert all(c["status"] == "pass" for c in checks.values()), [c["reason"] for c in checks.values()]
    assert checks[("parity", "xla")]["figures"]["worst_ratio"] < 8
    assert checks[("checkpoint", "xla -> xla")]["figures"]["not_restored"] == []
    into_cpu = checks[("checkpoint", "xla -> cpu")]["figures"]["not_restored"]
    expected = ["xla device RNG state (no xla generator on cpu)"]
    if importlib.util.find_spec("numpy") is None:
        # The xla environment has numpy; a main environment without it cannot
        # restore numpy's RNG state, and the check says so.
        expected = [entry for entry in into_cpu if entry.startswith("numpy RNG")] + expected
    assert sorted(into_cpu) == sorted(expected)
    assert checks[("pipeline", "xla")]["figures"]["step_time_source"].startswith("5 rounds of 4 compute-only steps")
