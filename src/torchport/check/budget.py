"""``torchport check --budget DURATION``: the checks fit a time budget.

The checks run in a fixed order: the training checks (parity, checkpoint,
pipeline) first, then crash recovery and distributed training per backend.
With a budget:

* every worker (and torchrun) is ended at the budget's end at the latest: its
  timeout is the lesser of ``--timeout`` and the time left;
* the training checks' workers measure each backend's step time and start-up;
  from those, each later check is sized before it starts: it gets the time left
  divided over the checks still to run, and its step count (``--recovery-steps``,
  ``--distributed-steps``) is cut to what fits that share, never below the
  check's minimum;
* a check whose minimum does not fit the time left is skipped, with what it
  needed;  a worker the budget ended is reported as "budget too small", not as
  the backend's timeout.

The section's ``config.budget`` records the budget, the time spent, what was
sized and what was skipped.  Without ``--budget`` nothing here applies.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from torchport.check import worker_check
from torchport.planning import Deadline
from torchport.records import Check, CheckBudgetRecord, CheckStatus, TrainedRun
from torchport.sampling import format_duration

STEP_MARGIN = 1.3  # each step counted at a margin: checkpoints written and read, the float64 reference beside it


@dataclass
class CheckBudget(Deadline):
    """The deadline of ``check --budget`` (counted from now) and what it learned, sized and skipped."""

    step_s: dict[str, float] = field(default_factory=dict)
    startup_s: dict[str, float] = field(default_factory=dict)
    sized: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def learn(self, backend: str, runs: Iterable[TrainedRun], phases: dict[str, float]) -> None:
        """Step time and start-up of ``backend`` from a training-checks worker's runs and phases."""
        timed = [run.timing.step_s for run in runs if run.timing and run.timing.step_s]
        if timed:
            self.step_s[backend] = max(timed)
        self.startup_s[backend] = float(phases.get("process_start_s") or 0.0) + float(phases.get("import_s") or 0.0)

    def size(self, check: str, options: Any, backend: str, checks_left: int) -> tuple[Any, str | None]:
        """``options`` sized for one ``check`` on ``backend`` (its steps, its
        workers' timeout), or a reason to skip it."""
        left = self.left()
        share = left / max(1, checks_left)
        step = self.step_s.get(backend)
        startup = self.startup_s.get(backend, 0.0)
        module = worker_check(check)
        cost = module.COST
        startups, step_runs, minimum = cost.startups, cost.step_runs, cost.minimum_steps
        wanted = module.steps(options)
        if step is None:  # nothing measured (the training checks were not run): only the deadline applies
            return dataclasses.replace(options, timeout_s=self.worker_timeout(options.timeout_s)), None
        per_step = step * step_runs * STEP_MARGIN
        needed = startups * startup + minimum * per_step
        if needed > left:
            reason = (f"budget too small: {check} on {backend} needs about {format_duration(needed)} "
                      f"({minimum} steps at {step * 1e3:.0f} ms, {startups} worker start-ups), "
                      f"{format_duration(max(0.0, left))} of the budget was left")
            self.skipped.append(reason)
            return options, reason
        fits = math.floor((max(share, needed) - startups * startup) / per_step)
        steps = max(minimum, min(wanted, fits))
        sized, note = module.with_steps(
            dataclasses.replace(options, timeout_s=self.worker_timeout(options.timeout_s)), steps)
        if note:
            self.sized.append(f"{check} on {backend}: {note}")
        return sized, None

    def explain(self, check: Check, timeout_s: float, limited: bool) -> Check:
        """A check whose worker the budget ended says so (not a timeout of the backend)."""
        if limited and check.failed and any(word in check.reason for word in ("timed out", "timed_out", "did not finish")):
            check = dataclasses.replace(check, status=CheckStatus.SKIPPED,
                                        reason=f"budget too small: the time budget ended this check's worker after "
                                               f"{format_duration(timeout_s)} ({check.reason})")
            self.skipped.append(f"{check.name} on {check.backend}: ended at the budget's end")
        return check

    def record(self) -> CheckBudgetRecord:
        return CheckBudgetRecord(budget_s=self.budget_s, spent_s=self.elapsed_s(), step_s=self.step_s,
                                 sized=self.sized, skipped=self.skipped)
