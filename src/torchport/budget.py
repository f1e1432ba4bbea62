"""The time budget of an evaluation: a plan, what it bought, and the ETA.

``torchport evaluate --budget 10m`` (default ``DEFAULT_BUDGET_S``; ``--budget
none`` turns it off) makes the whole evaluation, stages included, fit the
budget.  The plan is made as measurements arrive:

* the stages (trace, checks) keep ``STAGE_SHARE`` of the budget, or what the
  first round's overheads and step times say they need when that is more;
* the timing rounds share the rest.  Each run gets a deadline: its share is the
  time left divided over the runs still planned, a later round's run counted
  at half weight (it has no first-compile surprise left);  the worker plans
  its own warm-up bound and block length to fit it (``torchport.sampling``);
* with adaptive sampling (an explicit ``--budget`` or ``--precision``), a
  worker stops when its interval is within the target, and a later round is
  spent only on the backends whose interval over runs is still wider than the
  target (or that have one run only: one process cannot show run-to-run
  variation);  a round that cannot fit a backend's start-up and one sustained
  block is not run, and the report says so;
* the stages size their step counts from the measured step time and the time
  left, within their usual bounds, and say so; a stage whose minimum cannot
  fit is left out (the report says what it needed), and the stages' workers
  end at the budget's end.  Each stage's own cost model does the sizing
  (``torchport.planning.StageCost``, named in the stage registry); the plan
  is a value, applied to a copy of the evaluation's options;
* a run the parent had to end past its share (x1.25 + 10 s: a first step, e.g.
  a compilation, that no share holds) is that backend's "budget too small"
  result; a later run cut short leaves the backend's earlier runs standing.

The default budget (15 minutes) only caps: a small app's evaluation (the demo
takes under a minute) runs the configured protocol unchanged; a 100 M-parameter
model's is planned to end within 15 minutes instead of the better part of an
hour.  Adaptive sampling is off unless asked for, so the default evaluation is
neither slower nor less precise than the fixed protocol it replaces.

The ETA is the time the plan still expects: the runs not done (each at the
lesser of its share and what this backend's previous run took), plus the
stages; corrected after every run.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from torchport.errors import UserError
from torchport.planning import Deadline, RunFigures, StageCost, StageFigures, StagePlan, StagesPlan
from torchport.records import (BackendEntry, BudgetBackend, BudgetSection, BudgetStages, ErrorKind, ErrorRecord, RunBudget, RunRecord,
                               RunStatus, Summary)

DEFAULT_BUDGET_S = 15 * 60.0
DEFAULT_PRECISION = 0.02  # 95% interval of the median within +-2%: narrow enough to decide the 5% threshold
STAGE_SHARE = 0.25  # of the budget kept for the trace and the checks, at least
# A run still going this long past its share is ended by the parent (a first step, e.g. a compilation,
# that no share can hold): its share times this, plus RUN_GRACE_S.
RUN_OVERRUN_FACTOR, RUN_GRACE_S = 1.25, 10.0
LATER_RUN_WEIGHT = 0.5  # a run of a later round, when sharing the time among the runs still planned
FIRST_ROUND_PLANNED = 2  # rounds counted when the first round's shares are made (more only as time allows)
# Kept at the end for the summary, result.json, report.md and report.html.
FINISH_SHARE, FINISH_MAX_S = 0.03, 20.0

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|min|m|sec|s)?", re.IGNORECASE)


def parse_duration(text: str) -> float | None:
    """``10m``, ``90s``, ``1h30m``, ``2.5m``, ``600`` (seconds); ``none``/``off``: no budget."""
    cleaned = str(text).strip().lower()
    if cleaned in ("none", "off", "0"):
        return None
    position, total = 0, 0.0
    while position < len(cleaned):
        match = _PART.match(cleaned, position)
        if not match or match.end() == position:
            break
        total += float(match.group(1)) * _UNITS[(match.group(2) or "s")]
        position = match.end()
        while position < len(cleaned) and cleaned[position] == " ":
            position += 1
    if position != len(cleaned) or total <= 0 or not cleaned:
        raise UserError(f"invalid duration {text!r}: expected e.g. 10m, 90s, 1h30m or none", location="--budget")
    if total < 1:
        raise UserError(f"invalid duration {text!r}: at least 1 s", location="--budget")
    return total


def format_clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass
class BudgetPlan(Deadline):
    """The deadline of ``evaluate --budget``, counted on the wall clock from the command's start, and its plan."""

    backends: list[str]
    rounds: int  # the most rounds (--repeats)
    stages: bool  # trace or checks follow the rounds
    precision: float | None = DEFAULT_PRECISION
    explicit: bool = False  # given on the command line (or --precision): sampling is adaptive
    clock: Callable[[], float] = field(default=time.time, kw_only=True)
    started: float = field(default=-1.0, kw_only=True)  # negative: this process's start (see __post_init__)
    runs: dict[str, list[RunFigures]] = field(default_factory=dict)
    shares: dict[str, list[float]] = field(default_factory=dict)
    could_not: list[str] = field(default_factory=list)
    _could_not_runs: dict[str, str] = field(default_factory=dict)  # backend -> why it got no further run
    stage_sizes: BudgetStages = field(default_factory=BudgetStages)
    stage_estimate_s: float | None = None  # set by plan_stages: what the stages that run should take
    stage_reserve_s: float = 0.0
    _in_flight: tuple[str, float, float] | None = None  # backend, started, share
    # The cost models of the stages that follow the rounds, by registry name (torchport.stages): what the
    # reserve is kept for and what is sized once the rounds are done.
    stage_costs: dict[str, StageCost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The budget counts from the command's start (its imports and checks included), as the user's clock
        # does; a process that is not the torchport command (a test session, a notebook calling the CLI in
        # process) may be hours old, so there it counts from now.
        if self.started < 0:
            self.started = self.clock() - (process_age_s() if started_as_command() else 0.0)
        self.stage_reserve_s = STAGE_SHARE * self.budget_s if self.stages else 0.0
        for name in self.backends:
            self.runs.setdefault(name, [])
            self.shares.setdefault(name, [])

    @property
    def adaptive(self) -> bool:
        return self.explicit

    @property
    def end(self) -> float:
        """When the work must be done: the budget's end less the time to write the results."""
        return self.started + self.budget_s - min(FINISH_SHARE * self.budget_s, FINISH_MAX_S)

    @property
    def timing_end(self) -> float:
        return self.end - self.stage_reserve_s

    # ---- the rounds ------------------------------------------------------------------------
    def wants_run(self, name: str, round_index: int, summary: Summary | None,
                  remaining_this_round: int = 1) -> bool:
        """Whether ``name`` gets a run in this round; a run that cannot fit is
        recorded in ``could_not``.  It fits when its part of the time left
        (shared with the ``remaining_this_round - 1`` backends after it in this
        round) holds its start-up and the fewest blocks an interval needs: a
        run too short for that only spends time the others could use."""
        if round_index == 0:
            return True
        previous = self.runs.get(name) or []
        if self.adaptive and len(previous) >= 2:
            reached = precision_of(summary)
            if reached is not None and self.precision is not None and reached <= self.precision:
                return False  # this backend's interval is narrow enough: spend the time elsewhere
        needed = self.minimum_run_s(name)
        room = (self.timing_end - self.clock()) / max(1, remaining_this_round)
        if needed is not None and needed > room:
            self._could_not_runs[name] = (
                f"{name}: {len(previous)} process{'es' if len(previous) != 1 else ''} only; another needs about "
                f"{needed:.0f} s (start-up {needed - self._one_block_s(name):.0f} s and one sustained block), "
                f"its part of the timing share left was {max(0.0, room):.0f} s"
                + ("; the interval shows within-run noise only" if len(previous) == 1 else ""))
            return False
        return True

    def run_timeout(self, entry: RunBudget, timeout_s: float) -> float:
        """The parent's limit for a run with this job entry: past its share by
        the overrun allowance, it is ended (``explain_overrun`` says why)."""
        return min(timeout_s, entry.share_s * RUN_OVERRUN_FACTOR + RUN_GRACE_S)

    def explain_overrun(self, name: str, run: RunRecord, entry: RunBudget, timeout_s: float) -> None:
        """A run the budget's limit ended is that backend's 'budget too small' result, not a timeout.
        ``entry`` is the run's job entry (``job_entry``)."""
        limit = self.run_timeout(entry, timeout_s)
        wall = float(run.wall_s or 0.0)
        if run.status != RunStatus.TIMED_OUT or limit >= timeout_s or wall < 0.98 * limit:
            return  # the user's --timeout or --phase-timeout ended it, not the budget
        phase = str(run.last_phase or "start-up")
        scale = self.budget_s / entry.share_s if entry.share_s > 0 else 1.0
        run.put(status=RunStatus.ERROR, error=ErrorRecord(
            kind=ErrorKind.BUDGET_TOO_SMALL,
            message=(f"budget too small: needs at least {format_minutes(wall)} for one run on {name}: it was still "
                     f"in phase {phase!r} when ended, its share of the budget was {format_minutes(entry.share_s)}; "
                     f"a budget of more than {format_minutes(wall * scale)} would give it that")))

    def cut_short(self, name: str, backend: BackendEntry, run: RunRecord) -> bool:
        """A later run the budget could not hold: the backend keeps its status
        (its earlier runs stand), and the report lists the run with what the
        budget could not buy."""
        if run.error is None or run.error.kind != ErrorKind.BUDGET_TOO_SMALL \
                or not any(r.status == RunStatus.OK for r in backend.runs):
            return False
        self.could_not.append(f"{name}: run {len(backend.runs)} ended: {run.error.message}")
        return True

    def _one_block_s(self, name: str) -> float:
        from torchport.sampling import MIN_BLOCKS

        steps = [run.step_s for run in self.runs.get(name, []) if run.step_s]
        return MIN_BLOCKS * steps[-1] if steps else 0.0

    def minimum_run_s(self, name: str) -> float | None:
        """Start-up (as the last run of ``name`` measured it) plus the fewest blocks an interval needs."""
        figures = self.runs.get(name) or []
        if not figures:
            return None
        return figures[-1].overhead_s + self._one_block_s(name)

    def job_entry(self, name: str, round_index: int, remaining_this_round: int) -> RunBudget:
        """The ``budget`` entry of a run's job: its deadline (wall clock) and precision target."""
        now = self.clock()
        later_rounds = max(0, (FIRST_ROUND_PLANNED if round_index == 0 and self.adaptive else self.rounds)
                           - round_index - 1)
        weight = remaining_this_round + LATER_RUN_WEIGHT * later_rounds * len(self.backends)
        share = max(0.0, self.timing_end - now) / max(1.0, weight)
        if round_index > 0:  # wants_run let it start: at least the minimum it was judged to need
            share = max(share, min(self.minimum_run_s(name) or 0.0,
                                   max(0.0, self.timing_end - now) / max(1, remaining_this_round)))
        self.shares[name].append(share)
        self._in_flight = (name, now, share)
        return RunBudget(deadline=now + share, share_s=share, budget_s=self.budget_s,
                         precision=self.precision if self.adaptive else None)

    def record_run(self, name: str, run: RunRecord) -> None:
        self._in_flight = None
        phases = run.phases or {}
        training = run.training
        overhead = sum(float(phases.get(key) or 0.0) for key in ("process_start_s", "import_s", "init_s"))
        overhead += training.first_step_s if training else 0.0
        blocks = ((training.sustained.blocks if training.sustained else None) or training.warmup.blocks) if training else []
        step_s = None
        if blocks:
            times = sorted(block.seconds / block.steps for block in blocks)
            step_s = times[len(times) // 2]
        wall = float(run.wall_s or overhead)
        parameters = run.config.parameters if run.config else None
        self.runs.setdefault(name, []).append(RunFigures(wall, overhead, step_s, run.status == RunStatus.OK,
                                                         parameters if isinstance(parameters, int) else None))
        if len(self.runs[name]) == 1 and self.stages:
            self._reserve_for_stages()

    def _reserve_for_stages(self) -> None:
        """After a first run: what the stages need at their minimum by the measured figures, if more than
        their share (never more than half the budget)."""
        measured = {name: runs[0] for name, runs in self.runs.items() if runs and runs[0].step_s}
        if not measured:
            return
        cpu = measured.get("cpu") or max(measured.values(), key=lambda run: run.step_s or 0.0)
        figures = StageFigures(reference=cpu, backends=measured)
        needed = sum(cost.minimum_s(figures) for cost in self.stage_costs.values())
        self.stage_reserve_s = min(0.5 * self.budget_s, max(STAGE_SHARE * self.budget_s, needed))

    # ---- the stages ------------------------------------------------------------------------
    def plan_stages(self, reference: str | None, measured: Iterable[str], timeout_s: float) -> StagesPlan:
        """Size each stage for the time left by the measured figures, in its
        plan order: each gets the time left less what the stages planned
        before it take and the minimum of those after it that keep one
        (``StageCost.reserved``); a stage whose minimum cannot fit is left out.
        The stages run side by side, but on a machine whose cores they share
        their costs add up: they are counted one after the other.  Their
        workers are limited to the time left (``timeout_s`` at most).
        ``reference``: the evaluation's reference backend; ``measured``: its backends."""
        left = max(0.0, self.end - self.clock())
        figures = StageFigures(
            reference=self._figures(reference or "cpu") or self._figures("cpu"),
            backends={name: run for name in measured if (run := self._figures(name)) and run.step_s})
        # A stage's worker that would run past the budget's end is ended (a stage error in the report).
        worker_timeout_s = min(timeout_s, max(30.0, left * RUN_OVERRUN_FACTOR + RUN_GRACE_S))
        order = sorted(self.stage_costs, key=lambda name: self.stage_costs[name].plan_order)
        plans: dict[str, StagePlan] = {}
        taken = 0.0
        for index, name in enumerate(order):
            kept = sum(self.stage_costs[later].minimum_s(figures) for later in order[index + 1:]
                       if self.stage_costs[later].reserved)
            plan = self.stage_costs[name].plan(figures, left - taken - kept, worker_timeout_s)
            plans[name] = plan
            taken += plan.needs_s
            if plan.could_not:
                self.could_not.append(plan.could_not)
        self.stage_sizes = BudgetStages(key_order=()).put(
            time_left_s=round(left, 1), **{name: plan.sizes for name, plan in plans.items() if plan.sizes is not None},
            timeout_s=round(worker_timeout_s, 1))
        # What the stages that run are expected to take: the ETA counts it down while they run, instead
        # of reading 0.
        self.stage_estimate_s = min(left, taken)
        return StagesPlan(plans, worker_timeout_s)

    def _figures(self, name: str | None) -> RunFigures | None:
        runs = [run for run in self.runs.get(name or "", []) if run.step_s]
        finished = [run for run in runs if run.ok]  # a run cut short measured a step or two at most
        return (finished or runs)[-1] if runs else None

    # ---- the ETA ---------------------------------------------------------------------------
    def expected_run_s(self, name: str) -> float | None:
        """What the next run of ``name`` is expected to take; None when nothing says yet.
        Adaptive runs sample until their deadline unless precise sooner: their
        share, or less when the previous run took less.  Capped runs take what
        the previous run took (of this backend, else the mean of the others)."""
        share = max(0.0, self.timing_end - self.clock()) / max(1, self._runs_left())
        previous = [run.wall_s for run in self.runs.get(name) or []]
        others = [run.wall_s for runs in self.runs.values() for run in runs]
        if previous:
            return min(share, previous[-1]) if self.adaptive else previous[-1]
        if self.adaptive:
            return share
        return sum(others) / len(others) if others else None

    def _runs_left(self) -> int:
        done = sum(len(runs) for runs in self.runs.values())
        return max(1, len(self.backends) * self.rounds - done)

    def eta(self, active: list[str]) -> tuple[float | None, dict[str, float]]:
        """Seconds left overall (None: not known yet), and per backend (its runs still planned), from now."""
        now = self.clock()
        per_backend: dict[str, float] = {}
        for name in self.backends:
            left_runs = self.rounds - len(self.runs.get(name, [])) if name in active else 0
            if left_runs <= 0:
                per_backend[name] = 0.0
                continue
            expected = self.expected_run_s(name)
            if expected is None:
                return None, {}
            if self._in_flight and self._in_flight[0] == name:
                _, since, share = self._in_flight
                running = min(share, expected) if self.adaptive else expected
                per_backend[name] = max(0.0, since + running - now) + (left_runs - 1) * expected
            else:
                per_backend[name] = left_runs * expected
        timing = sum(per_backend.values())
        if self.adaptive:
            timing = min(timing, max(0.0, self.timing_end - now))
        stages = 0.0
        if self.stage_estimate_s is not None:
            stages = self.stage_estimate_s
        elif self.stages:
            # Adaptive: the stages are sized to their reserve.  Capped: about what the runs' start-up took.
            startup = max((runs[0].overhead_s for runs in self.runs.values() if runs), default=0.0)
            stages = self.stage_reserve_s if self.adaptive else min(self.stage_reserve_s, 2 * startup)
        overall = min(timing + stages, max(0.0, self.end - now))
        return overall, {name: min(value, overall) for name, value in per_backend.items()}

    # ---- the report ------------------------------------------------------------------------
    def record(self, measured: dict[str, BackendEntry]) -> BudgetSection:
        """The document's ``budget``: what the budget bought, per backend, and what it could not.
        The precision is judged against a target only when the user asked for
        one (``--budget`` or ``--precision``); otherwise it is only stated."""
        target = self.precision if self.explicit else None
        backends = {}
        for name in self.backends:
            entry = measured.get(name)
            reached = precision_of(entry.summary if entry else None)
            runs = entry.runs if entry else []
            stopped = [run.training.sustained.stopped_by if run.training and run.training.sustained else None
                       for run in runs]
            backends[name] = BudgetBackend(
                runs=len(runs),
                precision_reached=reached,
                target_met=None if reached is None or target is None else reached <= target,
                shares_s=[round(share, 1) for share in self.shares.get(name, [])],
                stopped_by=stopped,
            )
        return BudgetSection(budget_s=self.budget_s, explicit=self.explicit, precision_target=target,
                            adaptive=self.adaptive, elapsed_s=round(self.elapsed_s(), 1),
                            backends=backends, stages=self.stage_sizes,
                            could_not=[*self._could_not_runs.values(), *self.could_not])


def format_minutes(seconds: float) -> str:
    from torchport.sampling import format_duration

    return format_duration(seconds)


def started_as_command() -> bool:
    """Whether this process was started as the torchport command (the console
    script, ``python -m torchport`` or ``python -m torchport.cli``)."""
    import os
    import sys

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (getattr(spec, "name", None) or "").startswith("torchport") or \
        os.path.basename(sys.argv[0] if sys.argv else "").startswith("torchport")


def process_age_s() -> float:
    """Seconds since this process started (Linux: /proc); 0 where unknown."""
    try:
        import os

        with open("/proc/self/stat", encoding="ascii") as handle:
            start_ticks = float(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def precision_of(summary: Summary | None) -> float | None:
    """Relative half-width of the 95% interval of the median step time in a backend's summary."""
    stat = summary.step_time_s if summary is not None else None
    if stat is None or not stat.median or not stat.ci95:
        return None
    median, interval = stat.median, stat.ci95
    return (interval[1] - interval[0]) / 2 / median


def parse_precision(text: str) -> float:
    """``2%`` or ``0.02``: the relative half-width of the 95% interval to reach."""
    cleaned = str(text).strip()
    try:
        value = float(cleaned[:-1]) / 100 if cleaned.endswith("%") else float(cleaned)
    except ValueError:
        raise UserError(f"invalid precision {text!r}: expected e.g. 2% or 0.02", location="--precision") from None
    if not 0 < value < 1:
        raise UserError(f"invalid precision {text!r}: must be between 0 and 100%", location="--precision")
    return value
