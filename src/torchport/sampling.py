"""How many steps a worker samples, and when it stops (runs in the worker).

Fixed sampling is the protocol as configured: warm-up in blocks of
``steps // blocks`` steps up to ``max_warmup_steps``, then exactly ``blocks``
sustained blocks.  Budgeted sampling gets this run's share of the evaluation's
time budget (a deadline) and, when adaptive, a precision target, and plans from
what it measures:

* warm-up starts with one-step blocks (the step time is unknown until then;
  the first step carries compilation and says nothing about it), and is
  bounded by ``WARMUP_SHARE`` of the time left as well as by ``max_warmup_steps``;
* the sustained block length is the configured one, shortened so that at
  least ``MIN_BLOCKS`` blocks fit before the deadline;
* sampling stops when the 95% interval of the run's median block time is
  within the precision target (after at least ``MIN_BLOCKS`` blocks), when
  the next block would pass the deadline, or at ``MAX_BLOCK_FACTOR`` times the
  configured block count; without a precision target, at the configured count;
* a run whose deadline leaves no room for one sustained block ends with a
  ``budget-too-small`` error saying how much it needed, and the evaluation's
  other backends go on.

The interval here is the distribution-free one from order statistics (the
ranks a Binomial(n, 1/2) puts around the median): cheap enough to compute
after every block.  The report's interval is the parent's hierarchical
bootstrap over runs and blocks (``torchport.stats``).

Standard library only: runs on every torch a backend environment holds.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

from torchport.records import ErrorKind, RunBudget, SamplingPlan, SustainedSamples

CONFIDENCE = 0.95
MIN_BLOCKS = 6  # the fewest blocks whose order statistics give a 95% interval of the median
MAX_BLOCK_FACTOR = 10  # adaptive sampling's bound: this many times the configured block count
WARMUP_SHARE = 0.3  # of the time a run has left after its first step, at most this much for warm-up
INFERENCE_SHARE = 0.2  # of a budgeted run's time, kept for the forward-only scenario when there is one


def median_interval_ranks(count: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """0-based ranks (low, high) of the sorted values that bound the median
    with at least ``confidence``; None when ``count`` values are too few."""
    tail = (1 - confidence) / 2
    cumulative = 0.0
    low = -1
    for k in range(count + 1):
        cumulative += math.comb(count, k) / 2**count
        if cumulative > tail:
            break
        low = k  # P(B <= k) <= tail: rank k can bound the interval from below
    if low < 0:
        return None
    return low, count - 1 - low


def relative_half_width(values: Sequence[float]) -> float | None:
    """Half the width of the 95% interval of the median, relative to the median."""
    ranks = median_interval_ranks(len(values))
    if ranks is None:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    if median <= 0:
        return None
    return (ordered[ranks[1]] - ordered[ranks[0]]) / 2 / median


class BudgetTooSmall(Exception):
    """Raised in the worker; ``failures`` files it under its own kind."""

    kind = ErrorKind.BUDGET_TOO_SMALL.value

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def one_line(self) -> str:
        return self.message


@dataclass
class FixedSampling:
    """The configured protocol: ``blocks`` sustained blocks of ``block_steps``."""

    config: Any  # a ProtocolConfig

    def warmup_continues(self, warmup: Sequence[Any]) -> bool:
        return sum(block.steps for block in warmup) < self.config.max_warmup_steps

    def next_warmup_steps(self, warmup: Sequence[Any]) -> int:
        done = sum(block.steps for block in warmup)
        return min(self.config.block_steps, self.config.max_warmup_steps - done)

    def block_steps(self, warmup: Sequence[Any], first_step_s: float) -> int:
        return self.config.block_steps

    def stop(self, sustained: Sequence[Any]) -> str | None:
        return "blocks" if len(sustained) >= self.config.blocks else None

    def describe(self, stopped_by: str | None, sustained: Sequence[Any]) -> SustainedSamples:
        """Why sampling stopped, and the precision and plan it had (the caller adds the blocks)."""
        return SustainedSamples(stopped_by=stopped_by, precision=relative_half_width([b.step_s for b in sustained]))


@dataclass
class BudgetedSampling(FixedSampling):
    """This run's share of the budget: sample until ``deadline`` (``time.time()``)
    or, with a ``precision`` target, until the interval is that narrow."""

    deadline: float = math.inf
    precision: float | None = None
    backend: str = "this backend"
    budget_s: float | None = None  # the whole evaluation's budget and this run's share: for the message
    share_s: float | None = None
    started: float = 0.0  # time.time() when the worker process started
    # When the parent started this run's share (the worker's start-up comes out of it), and the seconds
    # of it kept for the inference scenario: both count in what one sustained block needs.
    share_started: float | None = None
    reserved_s: float = 0.0
    # Adaptive sampling's bound, in configured block counts.  Script mode keeps 1: the script's own loop
    # must not have to be longer than the fixed protocol's.
    max_block_factor: int = MAX_BLOCK_FACTOR
    _warmup_deadline: float | None = None
    _planned_block_steps: int | None = None

    def _step_estimate(self, warmup: Sequence[Any], first_step_s: float) -> float:
        # The last warm-up block is the best guess; the first step only when there is none (it is an upper bound).
        return warmup[-1].step_s if warmup else first_step_s

    def warmup_continues(self, warmup: Sequence[Any]) -> bool:
        now = time.time()
        if self._warmup_deadline is None:
            self._warmup_deadline = now + WARMUP_SHARE * max(0.0, self.deadline - now)
        if not super().warmup_continues(warmup):
            return False
        # The next warm-up block must end before warm-up's share of the time is spent.
        next_block_s = warmup[-1].step_s * self.next_warmup_steps(warmup) if warmup else 0.0
        return now + next_block_s <= self._warmup_deadline

    def next_warmup_steps(self, warmup: Sequence[Any]) -> int:
        if not warmup and self.precision is not None:
            # Adaptive sampling: one step first measures the step time its plan needs.  A budget
            # that only caps keeps the configured blocks, so the protocol is unchanged when it fits.
            return 1
        return super().next_warmup_steps(warmup)

    def block_steps(self, warmup: Sequence[Any], first_step_s: float) -> int:
        step_s = self._step_estimate(warmup, first_step_s)
        left = self.deadline - time.time()
        if left < step_s:
            reached = time.time() - (self.share_started if self.share_started is not None else self.started)
            needed = reached + step_s + self.reserved_s
            share = self.share_s if self.share_s else reached + left
            whole = ""
            reserve = f", and {format_duration(self.reserved_s)} kept for inference" if self.reserved_s >= 0.5 else ""
            if self.budget_s and share > 0:
                whole = f"; a budget of at least {format_duration(self.budget_s * needed / share)} would give it that"
            raise BudgetTooSmall(
                f"budget too small: needs at least {format_duration(needed)} for one sustained block on "
                f"{self.backend} ({format_duration(reached)} to reach the sustained phase, then {step_s:.3g} s "
                f"a step{reserve}), its share of the budget was {format_duration(share)}{whole}")
        fits = int(left / (step_s * MIN_BLOCKS)) if step_s > 0 else self.config.block_steps
        self._planned_block_steps = max(1, min(self.config.block_steps, fits))
        return self._planned_block_steps

    def stop(self, sustained: Sequence[Any]) -> str | None:
        times = [block.step_s for block in sustained]
        if self.precision is not None and len(times) >= MIN_BLOCKS:
            reached = relative_half_width(times)
            if reached is not None and reached <= self.precision:
                return "precision"
        if self.precision is None and len(times) >= self.config.blocks:
            return "blocks"
        last = sustained[-1]
        if time.time() + last.seconds > self.deadline:
            return "budget"  # the next block would end past this run's share
        if len(times) >= self.max_block_factor * self.config.blocks:
            return "max_blocks"
        return None

    def describe(self, stopped_by: str | None, sustained: Sequence[Any]) -> SustainedSamples:
        described = super().describe(stopped_by, sustained)
        described.plan = SamplingPlan(deadline_in_s=round(self.deadline - self.started, 3),
                                      precision_target=self.precision, block_steps=self._planned_block_steps,
                                      warmup_share=WARMUP_SHARE)
        return described


def from_job(config: Any, budget: RunBudget | None, backend: str, started: float,
             has_inference: bool, max_block_factor: int = MAX_BLOCK_FACTOR) -> tuple[FixedSampling, FixedSampling]:
    """The training and inference sampling of one run, from the job's
    ``budget`` (set by the parent's plan; None: fixed sampling)."""
    if budget is None:
        return FixedSampling(config), FixedSampling(config)
    deadline = budget.deadline
    training_deadline = deadline
    if has_inference:
        training_deadline = deadline - INFERENCE_SHARE * max(0.0, deadline - time.time())
    share_s = budget.share_s

    def sampling(until: float, reserved_s: float = 0.0) -> BudgetedSampling:
        return BudgetedSampling(config, until, precision=budget.precision, backend=backend, budget_s=budget.budget_s,
                                share_s=share_s, started=started, max_block_factor=max_block_factor,
                                share_started=deadline - share_s if share_s else None, reserved_s=reserved_s)

    return sampling(training_deadline, reserved_s=deadline - training_deadline), sampling(deadline)


def format_duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.1f} min"
    return f"{minutes / 60:.1f} h"
