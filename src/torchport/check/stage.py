"""The checks as a stage of ``torchport evaluate``.

The evaluation already spends its time budget on timing, so the stage runs
the cheap subset that shares one training worker per backend: parity,
checkpoint portability and the input pipeline, over ``STAGE_STEPS`` steps,
on the backends whose evaluation runs finished.  Parity compares the model's
output in training step 1 rather than the app's ``predict``, and skips the
metric: each would be one more graph for a compiling backend to build.  The
pipeline check measures as ``torchport check`` does (data and compute in each
backend's worker), so both give the same verdict; the evaluation's sustained
step time is shown beside it.  Recovery and
distributed training need several workers each and run in ``torchport check``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchport.check import pipeline
from torchport.app import AppSpec
from torchport.check.runner import REFERENCE, CheckOptions, check_section
from torchport.limits import DEFAULT_TIMEOUT_S
from torchport.planning import StageFigures, StagePlan
from torchport.records import BackendStatus, ChecksConfig, ChecksSection, ResultDocument, StageSize
from torchport.sampling import format_duration

STAGE_STEPS = 6
STAGE_CHECKS = ("parity", "checkpoint", "pipeline")

# What the stage costs, for the time budget (``stage_seconds``).  Measured on GPT-2 small (124 M parameters)
# on the 2-core development machine: a float64 step took 2.0x a float32 one, a 1.5 GB checkpoint 3.2 s to save
# and checksum and 2.2 s to check and load; both are taken with a margin.
FLOAT64_STEP_FACTOR = 2.5
CHECKPOINT_BYTES_PER_S = 4e8
CHECKPOINT_COPIES = 3  # parameters and an optimizer's two moments (Adam): what a checkpoint holds, about


def stage_seconds(steps: int, per_round: int, backends: dict[str, tuple[float, float]], reference: str,
                  parameters: int | None) -> float:
    """About how long the stage takes on ``backends`` (name -> (step seconds,
    seconds a run pays before its steps: start-up, model, compilation)), by
    the runs ``runner.training_checks`` makes: on each of n backends its own
    run, the pipeline's timed steps, and a resume from each backend's
    checkpoint (half the steps each, a checkpoint read); two checkpoints saved
    per backend; on the reference (``runner.REFERENCE``) a repeat run and a
    float64 run besides, and its own run when it is not among ``backends``.
    Each run is counted as paying the whole overhead again (a new model, a new
    compilation): an estimate on the safe side."""
    if not backends:
        return 0.0
    n = len(backends)
    checkpoint_s = (parameters or 0) * 4 * CHECKPOINT_COPIES / CHECKPOINT_BYTES_PER_S
    timed_pipeline_steps = pipeline.ROUNDS * per_round
    total = 0.0
    for step_s, overhead_s in backends.values():
        total += (1 + n) * overhead_s + (steps + timed_pipeline_steps + n * steps / 2) * step_s
        total += (2 + n) * checkpoint_s
    if reference in backends:
        step_s, overhead_s = backends[reference]
    else:
        # The reference's runs are made all the same (on the CPU; its own run is not checkpointed), at a
        # step time nothing here measured: the slowest backend's stands in for it.
        step_s, overhead_s = max(backends.values())
        total += overhead_s + (steps + timed_pipeline_steps) * step_s
    return total + 2 * overhead_s + steps * step_s * (1 + FLOAT64_STEP_FACTOR)


MIN_STEPS = 2  # a checkpoint is taken half way: at least 2
MIN_PIPELINE_PER_ROUND = 1  # the pipeline check's timed steps a round are cut before the stage is left out


@dataclass(frozen=True)
class ChecksCost:
    """The checks stage's time, for evaluate's budget (``stage_seconds``): it
    is planned first (the larger stage, and the one with verdicts) and takes
    the most steps, between ``MIN_STEPS`` and ``STAGE_STEPS``, at the full
    pipeline timing; failing that, the fewest steps with fewer timed pipeline
    steps a round; failing that, it is left out.  Its workers share the time
    its stage may run (``check_budget_s``)."""

    reserved: bool = False
    plan_order: int = 0

    @staticmethod
    def seconds(figures: StageFigures, steps: int, per_round: int) -> float:
        parameters = max((run.parameters or 0 for run in figures.backends.values()), default=0) or None
        return stage_seconds(steps, per_round, {name: (run.step_s or 0.0, run.overhead_s)
                                                for name, run in figures.backends.items()}, REFERENCE, parameters)

    def minimum_s(self, figures: StageFigures) -> float:
        return self.seconds(figures, MIN_STEPS, MIN_PIPELINE_PER_ROUND)

    def plan(self, figures: StageFigures, room_s: float, worker_timeout_s: float) -> StagePlan:
        settings: dict[str, float] = {"check_budget_s": worker_timeout_s}
        if not figures.backends:
            return StagePlan(settings=settings)
        choices = [(steps, pipeline.PER_ROUND) for steps in range(STAGE_STEPS, MIN_STEPS - 1, -1)]
        choices += [(MIN_STEPS, per_round) for per_round in range(pipeline.PER_ROUND - 1, MIN_PIPELINE_PER_ROUND - 1, -1)]
        for steps, per_round in choices:  # ends on the last choice when none fits
            needs_s = self.seconds(figures, steps, per_round)
            if needs_s <= room_s:
                break
        settings.update(check_steps=steps, check_pipeline_per_round=per_round)
        slowest = max(figures.backends.values(), key=lambda run: run.step_s or 0.0)
        fits = needs_s <= room_s
        sizes = StageSize(key_order=()).put(
            steps=steps, bounds=[MIN_STEPS, STAGE_STEPS], pipeline_steps_per_round=per_round, step_s=slowest.step_s,
            needs_s=round(needs_s, 1), fits=fits,
            why=f"{room_s:.0f} s left for it; its runs (a float64 reference, a resume from each checkpoint, the "
                f"pipeline's timed steps) need about {format_duration(needs_s)} at the measured step times")
        could_not = None if fits else (
            f"checks: not run: even {steps} steps, with {per_round} timed pipeline "
            f"step{'s' if per_round != 1 else ''} a round, need about "
            f"{format_duration(needs_s)}, and {format_duration(max(0.0, room_s))} were left "
            f"(after the trace's minimum)")
        return StagePlan(fits=fits, needs_s=needs_s if fits else 0.0, settings=settings, sizes=sizes,
                         could_not=could_not)


COST = ChecksCost()


def _step_times(document: ResultDocument) -> dict[str, tuple[float, float, str]]:
    found = {}
    for name, backend in document.backends.items():
        summary = backend.summary
        median = summary.step_time_s.median if summary and summary.step_time_s else None
        if summary and median:
            share = summary.data_wait_share or 0.0
            found[name] = (median, median * share, "the evaluation's sustained step time (median)")
    return found


@dataclass(frozen=True)
class CheckStageOptions:
    """What the checks stage reads of an evaluation."""

    app: AppSpec | str | None = None
    seed: int = 0
    dtype: str = "float32"
    timeout_s: float = DEFAULT_TIMEOUT_S
    steps: int = STAGE_STEPS
    checks: tuple[str, ...] = STAGE_CHECKS
    budget_s: float | None = None  # evaluate's time budget left for this stage (its workers share it)
    pipeline_per_round: int = pipeline.PER_ROUND

    @classmethod
    def from_evaluation(cls, options: Any) -> CheckStageOptions:
        protocol = getattr(options, "protocol", None)
        return cls(app=options.app, seed=getattr(protocol, "seed", 0), dtype=getattr(protocol, "dtype", "float32"),
                   timeout_s=getattr(options, "timeout_s", DEFAULT_TIMEOUT_S),
                   # sized by the time budget when there is one
                   steps=getattr(options, "check_steps", None) or STAGE_STEPS,
                   budget_s=getattr(options, "check_budget_s", None),
                   pipeline_per_round=getattr(options, "check_pipeline_per_round", None) or pipeline.PER_ROUND)


def evaluate_stage(document: ResultDocument, options: Any, out_dir: Path) -> None:
    """Run the stage's checks on the backends that ran OK; set the document's ``checks``."""
    stage = CheckStageOptions.from_evaluation(options)
    names = [name for name, backend in document.backends.items() if backend.status == BackendStatus.OK]
    if not names:
        nothing = ChecksSection(key_order=()).put(checks=[], config=ChecksConfig(key_order=()).put(checks=list(stage.checks)),
                                                  note="no backend finished its evaluation runs: nothing to check")
        document.put(checks=nothing)
        return
    check_options = CheckOptions(
        app=stage.app,
        backends=names,
        only=stage.checks,
        steps=stage.steps,
        seed=stage.seed,
        dtype=stage.dtype,
        timeout_s=stage.timeout_s,
        budget_s=stage.budget_s,
        step_times=_step_times(document),
        app_inference=False,
        pipeline_per_round=stage.pipeline_per_round,
    )
    section = check_section(check_options)
    sized = ""
    if stage.steps != STAGE_STEPS or stage.pipeline_per_round != pipeline.PER_ROUND:
        sized = " (sized by the time budget" + (
            f"; the pipeline timed over {stage.pipeline_per_round} of its {pipeline.PER_ROUND} steps a round"
            if stage.pipeline_per_round != pipeline.PER_ROUND else "") + ")"
    section.note = (f"Evaluate runs the cheap subset ({', '.join(stage.checks)}; {stage.steps} steps{sized}; outputs "
                    "from training step 1, no metric). "
                    "`torchport check` adds crash recovery and distributed training.")
    document.put(checks=section)
