"""The checks as a stage of ``torchport evaluate``.

The evaluation already spends its time budget on timing, so the stage runs
the cheap subset that shares one training worker per backend: parity,
checkpoint portability and the input pipeline, over ``STAGE_STEPS`` steps,
on the backends whose evaluation runs finished.  Parity compares the model's
output in training step 1 rather than the app's ``predict``, and skips the
metric: each would be one more graph for a compiling backend to build.  The
pipeline check uses the evaluation's own sustained step times rather than a
short run.  Recovery and
distributed training need several workers each and run in ``torchport check``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from torchport.check.runner import CheckOptions, run_checks

STAGE_STEPS = 6
STAGE_CHECKS = ("parity", "checkpoint", "pipeline")


def _step_times(document: dict[str, Any]) -> dict[str, tuple[float, float, str]]:
    found = {}
    for name, backend in document.get("backends", {}).items():
        summary = backend.get("summary") or {}
        median = (summary.get("step_time_s") or {}).get("median")
        if median:
            share = summary.get("data_wait_share") or 0.0
            found[name] = (median, median * share, "the evaluation's sustained step time (median)")
    return found


def evaluate_stage(document: dict[str, Any], options: Any, out_dir: Path) -> None:
    """Run the stage's checks on the backends that ran OK; set ``document["checks"]``."""
    names = [name for name, backend in document.get("backends", {}).items() if backend.get("status") == "ok"]
    if not names:
        document["checks"] = {"checks": [], "config": {"checks": list(STAGE_CHECKS)},
                              "note": "no backend finished its evaluation runs: nothing to check"}
        return
    protocol = getattr(options, "protocol", None)
    steps = getattr(options, "check_steps", None) or STAGE_STEPS  # sized by the time budget when there is one
    check_options = CheckOptions(
        app=options.app,
        backends=names,
        only=STAGE_CHECKS,
        steps=steps,
        seed=getattr(protocol, "seed", 0),
        dtype=getattr(protocol, "dtype", "float32"),
        timeout_s=getattr(options, "timeout_s", 600.0),
        step_times=_step_times(document),
        app_inference=False,
    )
    section = run_checks(check_options)
    section["note"] = (f"Evaluate runs the cheap subset ({', '.join(STAGE_CHECKS)}; {steps} steps"
                       + (" (sized by the time budget)" if steps != STAGE_STEPS else "") + "; outputs "
                       "from training step 1, no metric). "
                       "`torchport check` adds crash recovery and distributed training.")
    document["checks"] = section
