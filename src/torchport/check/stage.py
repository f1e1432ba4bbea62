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
from torchport.check.runner import CheckOptions, run_checks
from torchport.limits import DEFAULT_TIMEOUT_S

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


def _step_times(document: dict[str, Any]) -> dict[str, tuple[float, float, str]]:
    found = {}
    for name, backend in document.get("backends", {}).items():
        summary = backend.get("summary") or {}
        median = (summary.get("step_time_s") or {}).get("median")
        if median:
            share = summary.get("data_wait_share") or 0.0
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


def evaluate_stage(document: dict[str, Any], options: Any, out_dir: Path) -> None:
    """Run the stage's checks on the backends that ran OK; set ``document["checks"]``."""
    stage = CheckStageOptions.from_evaluation(options)
    names = [name for name, backend in document.get("backends", {}).items() if backend.get("status") == "ok"]
    if not names:
        document["checks"] = {"checks": [], "config": {"checks": list(stage.checks)},
                              "note": "no backend finished its evaluation runs: nothing to check"}
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
    section = run_checks(check_options)
    sized = ""
    if stage.steps != STAGE_STEPS or stage.pipeline_per_round != pipeline.PER_ROUND:
        sized = " (sized by the time budget" + (
            f"; the pipeline timed over {stage.pipeline_per_round} of its {pipeline.PER_ROUND} steps a round"
            if stage.pipeline_per_round != pipeline.PER_ROUND else "") + ")"
    section["note"] = (f"Evaluate runs the cheap subset ({', '.join(stage.checks)}; {stage.steps} steps{sized}; outputs "
                       "from training step 1, no metric). "
                       "`torchport check` adds crash recovery and distributed training.")
    document["checks"] = section
