"""A test-only worker check: the whole of what adding one takes, beside the
line in ``torchport.check.WORKER_CHECKS`` (the test adds it) and the schema's
name enum.  It starts no worker: it records the steps it was given, so the
test can see the runner, the budget and the report reach it through the table."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchport.check import WorkerCost
from torchport.records import Check, CheckStatus, Figures, Record

COST = WorkerCost(startups=1, step_runs=1, minimum_steps=2)


def steps(options: Any) -> int:
    return int(options.steps)


def with_steps(options: Any, steps: int) -> tuple[Any, str | None]:
    if steps == options.steps:
        return options, None
    return dataclasses.replace(options, steps=steps), f"{steps} steps (asked {options.steps})"


@dataclass
class EchoConfig(Record):
    steps: int = 0


@dataclass
class EchoFigures(Figures):
    steps: int | None = None


def config(options: Any) -> EchoConfig:
    return EchoConfig(steps=options.steps)


def check(options: Any, backend: str, folder: Path) -> Check:
    return Check(name="steps-echo", backend=backend, status=CheckStatus.PASS,
                 figures=EchoFigures.begin().put(steps=options.steps),
                 reason=f"ran with {options.steps} steps in {folder.name}")


def headline(check: Check) -> str | None:
    figures = check.figures_as(EchoFigures)
    return f"echoed {figures.steps} steps" if figures.steps is not None else None
