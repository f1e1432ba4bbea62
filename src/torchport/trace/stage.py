"""The evaluate stage: trace the evaluated app and put the section in the
result document (``document["trace"]``).

Called by ``torchport evaluate`` after the timing rounds as
``evaluate_stage(document, options, out_dir)``.  It never fails the
evaluation: a trace that cannot run is recorded with its reason.  Where the
xla backend ran, its measured compile and fallback counts are set beside the
prediction.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from torchport.trace.analysis import DEFAULT_TIMEOUT_S, build_section
from torchport.trace.compile_check import compare_with_torch_compile
from torchport.trace.job import DEFAULT_STEPS
from torchport.trace.verdict import compare_with_xla

# Evaluate traces until the op sequence has been the same for REPEATED steps
# in a row, at most EVALUATE_STEPS: a data-dependent branch that first flips at
# step 3 is seen, and an app whose step never changes stops after 3 steps.
EVALUATE_STEPS = 12
REPEATED = 3


def evaluate_stage(document: dict[str, Any], options: Any, out_dir: Path) -> None:
    from torchport.app import parse_spec
    from torchport.launch import run_worker
    from torchport.trace.analysis import TRACE_JOB, validate_targets

    spec = parse_spec(getattr(options, "app", None))
    steps = int(getattr(options, "trace_steps", EVALUATE_STEPS) or EVALUATE_STEPS)
    timeout = min(float(getattr(options, "timeout_s", DEFAULT_TIMEOUT_S)), DEFAULT_TIMEOUT_S)
    seed = getattr(getattr(options, "protocol", None), "seed", 0)
    run = run_worker("cpu", TRACE_JOB, app=spec.text, config={"steps": steps, "seed": seed, "until_repeated": REPEATED}, timeout=timeout)
    section = build_section(run, spec.text, validate_targets(getattr(options, "trace_targets", None)),
                            allow_live=getattr(options, "trace_live", True))
    section["xla_comparison"] = compare_with_xla(section, document)
    section["torch_compile_comparison"] = compare_with_torch_compile(section, document)
    document["trace"] = section


__all__ = ["evaluate_stage", "DEFAULT_STEPS"]
