"""``torchport check``: does the app still learn the same thing, and does the
rest of a training job (checkpoints, crash recovery, distributed training, the
input pipeline) survive the move?

Layout, parent side first:

* ``runner``: runs the requested checks on the requested backends and returns
  the ``checks`` section of the result document;
* ``parity``, ``checkpoint``, ``recovery``, ``distributed``, ``pipeline``: one
  module per check; each judges figures that workers measured;
* ``WORKER_CHECKS`` below: the checks that start workers of their own (crash
  recovery, distributed training).  Each is one module with the same few
  names (``WorkerCheck``); the runner, the time budget and the report reach
  them only through this table.  Adding such a check touches three files: its
  module, this table and the name enum in ``schemas/checks.schema.json`` (and
  ``CheckOptions`` and ``commands/check.py`` for an option of its own);
* ``tolerance``: the error-ratio rule and the thresholds every check uses;
* ``stage``: the cheap subset that ``torchport evaluate`` runs;
* ``report``: the markdown section.

Worker side (runs in a backend's own process, on torch 2.9 or newer):

* ``jobs``: the job functions started through ``torchport.launch.run_worker``
  (and, for distributed training, through ``torchrun``);
* ``training``: one seeded training run of an app, with what the checks record;
* ``savefile``: checkpoint files with a size and checksum beside them, never
  loaded before they are validated.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from torchport.records import Check, Record

# Parity, checkpoint portability and the input pipeline share one training worker per backend
# (``runner.training_checks``): they are judged from the same runs, so they are not pluggable one by one.
TRAINING_CHECKS = ("parity", "checkpoint", "pipeline")

# name -> module of a check that starts workers of its own, run per backend after the training checks.
WORKER_CHECKS = {
    "recovery": "torchport.check.recovery",
    "distributed": "torchport.check.distributed",
}

CHECK_NAMES = ("parity", "checkpoint", *WORKER_CHECKS, "pipeline")


@dataclass(frozen=True)
class WorkerCost:
    """What one run of a worker check costs, for ``check --budget``: worker
    start-ups, and how many times each of its steps is trained (each counted at
    the budget's margin); ``minimum_steps`` is the fewest that still judge."""

    startups: int
    step_runs: int
    minimum_steps: int


class WorkerCheck(Protocol):
    """The names a worker check's module defines."""

    COST: WorkerCost

    def steps(self, options: Any) -> int:
        """The steps the user asked for (``--recovery-steps`` and the like)."""

    def with_steps(self, options: Any, steps: int) -> tuple[Any, str | None]:
        """``options`` cut to ``steps``, and a line saying so (None when unchanged)."""

    def config(self, options: Any) -> Record:
        """Its settings, recorded in the section's ``config`` under its name."""

    def check(self, options: Any, backend: str, folder: Path) -> Check:
        """Run it on ``backend`` in ``folder``; one check record."""

    def headline(self, check: Check) -> str | None:
        """Its figure that matters most, in a few words (None: nothing measured)."""


def worker_check(name: str) -> WorkerCheck:
    return cast(WorkerCheck, importlib.import_module(WORKER_CHECKS[name]))
