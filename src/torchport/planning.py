"""What the time budgets plan with: a deadline, measured run figures, and the
contract a stage signs to be planned.

``torchport evaluate --budget`` (``torchport.budget``) and ``torchport check
--budget`` (``torchport.check.budget``) both count down a ``Deadline``.  The
evaluation's planner sizes the stages that follow its timing rounds without
knowing any of them: each stage's registry entry (``torchport.stages``) names
a ``StageCost``, which says what the stage needs at its least and, given the
time left, returns a ``StagePlan`` (its settings, whether it fits, what it is
expected to take).  A plan is a value: nothing is set on the evaluation's
options; the evaluation runs its stages with a copy that carries the plans'
settings.

Stdlib only: this module sits below the planner and below every stage.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torchport.records import StageSize


@dataclass
class Deadline:
    """A budget of seconds, counted on ``clock`` from ``started`` (negative: from now)."""

    budget_s: float
    clock: Callable[[], float] = field(default=time.monotonic, kw_only=True)
    started: float = field(default=-1.0, kw_only=True)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return self.budget_s - self.elapsed_s()

    def worker_timeout(self, timeout_s: float) -> float:
        """A worker started now ends at the deadline at the latest (and gets a second at least)."""
        return max(1.0, min(timeout_s, self.left()))

    def limited(self, timeout_s: float) -> bool:
        """Whether a worker started now is ended by the deadline before ``timeout_s``."""
        return self.left() < timeout_s


@dataclass
class RunFigures:
    """What one finished run says about the next of the same backend."""

    wall_s: float
    overhead_s: float  # process start, imports, init and first step: paid again by every run
    step_s: float | None
    ok: bool
    parameters: int | None = None  # the model's, for the size of its checkpoints


@dataclass(frozen=True)
class StageFigures:
    """The measured figures a stage is sized by: the reference backend's run
    (or the one standing in for it) and every backend that measured a step."""

    reference: RunFigures | None
    backends: dict[str, RunFigures] = field(default_factory=dict)


@dataclass(frozen=True)
class StagePlan:
    """One stage's size for the time it was given.

    ``settings`` are the evaluation options the stage reads (``trace_steps``,
    ``check_steps``, ...); ``sizes`` is what the result's ``budget.stages``
    records for it (None: nothing measured to size it by, and nothing
    recorded); ``could_not`` is the line the report lists when it does not fit.
    """

    fits: bool = True
    needs_s: float = 0.0  # what it is expected to take when it runs
    settings: dict[str, float] = field(default_factory=dict)  # step counts and seconds
    sizes: StageSize | None = None
    could_not: str | None = None


class StageCost(Protocol):
    """What a stage tells the planner about its time.

    ``reserved``: the stages planned before it leave its minimum free;
    ``plan_order``: the lower is planned first (the one with verdicts, and
    the larger, goes first)."""

    reserved: bool
    plan_order: int

    def minimum_s(self, figures: StageFigures) -> float:
        """Its cost at its smallest size (0.0: nothing measured to tell)."""

    def plan(self, figures: StageFigures, room_s: float, worker_timeout_s: float) -> StagePlan:
        """Its size for ``room_s`` seconds; its workers may run ``worker_timeout_s`` each."""


@dataclass(frozen=True)
class StagesPlan:
    """The plans of the stages that follow the timing rounds, in the order they were made."""

    plans: dict[str, StagePlan]
    worker_timeout_s: float  # a stage's worker that would run past the budget's end is ended

    def left_out(self) -> set[str]:
        return {name for name, plan in self.plans.items() if not plan.fits}

    def settings(self) -> dict[str, float]:
        """The evaluation options the stages run with: every plan's settings and the workers' timeout."""
        merged: dict[str, float] = {}
        for plan in self.plans.values():
            merged.update(plan.settings)
        return {**merged, "timeout_s": self.worker_timeout_s}
