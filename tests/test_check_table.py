"""A check that starts workers of its own is added in one module plus one line
in ``torchport.check.WORKER_CHECKS`` (and the schema's name enum): the runner,
the time budget, the section's config and the report reach it only through
that table.  The test registers ``tests/plugin_check/steps_echo_check.py``
and runs it through the real runner, with and without a budget."""
from __future__ import annotations

from pathlib import Path

import pytest

import torchport.check
from torchport.check import report, runner
from torchport.check.budget import CheckBudget
from torchport.records import ChecksSection

PLUGIN = Path(__file__).parent / "plugin_check"


@pytest.fixture
def echo_check(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.setitem(torchport.check.WORKER_CHECKS, "steps-echo", "steps_echo_check")
    monkeypatch.setattr(runner, "CHECK_NAMES", (*runner.CHECK_NAMES, "steps-echo"))
    return "steps-echo"


def test_a_worker_check_runs_from_the_table(echo_check, tmp_path):
    options = runner.CheckOptions(app="builtin:classifier", backends=["cpu"], only=(echo_check,), steps=7,
                                  work_dir=tmp_path)
    section = runner.check_section(options).to_dict()
    (check,) = section["checks"]
    assert check == {"name": "steps-echo", "backend": "cpu", "status": "pass", "figures": {"steps": 7},
                     "reason": "ran with 7 steps in steps-echo-cpu"}
    assert section["config"]["steps-echo"] == {"steps": 7}
    assert section["config"]["recovery"] == {"steps": 24, "every": 5}  # the built-in ones still record theirs
    assert "echoed 7 steps" in report.markdown(ChecksSection.from_dict(section))


def test_the_budget_sizes_a_worker_check_from_its_cost(echo_check):
    options = runner.CheckOptions(steps=50, timeout_s=600.0)
    budget = CheckBudget(20.0)
    budget.step_s["cpu"], budget.startup_s["cpu"] = 1.0, 2.0
    sized, skip = budget.size(echo_check, options, "cpu", checks_left=1)
    # 20 s left: 1 start-up (2 s) + steps x 1 s x 1 run x 1.3 margin -> 13 steps
    assert skip is None and sized.steps == 13
    assert budget.sized == ["steps-echo on cpu: 13 steps (asked 50)"]
    budget.started -= 18.0  # 2 s left: 1 start-up + 2 steps x 1.3 s do not fit
    _, skip = budget.size(echo_check, options, "cpu", checks_left=1)
    assert skip is not None and skip.startswith("budget too small: steps-echo on cpu needs about ")


def test_every_worker_check_module_defines_the_whole_interface():
    for name in torchport.check.WORKER_CHECKS:
        module = torchport.check.worker_check(name)
        for attribute in ("COST", "steps", "with_steps", "config", "check", "headline"):
            assert hasattr(module, attribute), f"{name}: {attribute}"
        assert isinstance(module.COST, torchport.check.WorkerCost)
