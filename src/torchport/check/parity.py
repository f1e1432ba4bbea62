"""Numerical parity: does the app learn the same thing on this backend?

Three runs per comparison, same seed and data order, measured by workers
(``torchport.check.jobs:train_job``): the CPU in float64 (the ground truth),
the CPU in the backend's dtype (the reference) and the backend.  Each
quantity is judged with the error-ratio rule of ``torchport.check.tolerance``:

* the first step's loss, its outputs (the app's ``predict`` on the first batch
  before training, else the model's output in step 1), and the gradient norm
  of every parameter;
* the loss after each of K steps (the worst step counts);
* the app's quality metric after K steps, when it has one: it must reach
  99% of the reference's value (MLPerf's accuracy-target convention; 101%
  when lower is better), or pass the error-ratio rule.

When a first-step quantity fails, :func:`localise` names the first module, in
the order modules finish their forward, whose output fails the same rule.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchport.check.tolerance import judge, relative_error, tensor_error, trajectory_error, worst
from torchport.records import (Check, CheckStatus, DeterminismFigures, DivergingModule, ErrorRatio, ParityFigures,
                               TrainedRun)

# Module or tensor name -> a tensor loaded from a worker's file (None where a module gave no float output).
TensorsByName = Mapping[str, Any]

METRIC_TARGET = 0.99


def load_tensor(path: str | None) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True) if path else None


@dataclass
class Comparison:
    """One backend's run judged against the reference and the truth."""

    verdicts: dict[str, ErrorRatio]  # quantity -> its error-ratio verdict (tolerance.judge)
    first_step_failed: list[str]
    gradients_failing: int
    gradients_checked: int


def compare(run: TrainedRun, reference: TrainedRun, truth: TrainedRun, dtype: str) -> Comparison:
    """Every quantity of one backend's run against the reference and the truth."""
    verdicts: dict[str, ErrorRatio] = {}
    verdicts["first-step loss"] = judge(relative_error(run.losses[0], truth.losses[0]),
                                        relative_error(reference.losses[0], truth.losses[0]), dtype)
    if run.output_file and reference.output_file and truth.output_file:
        truth_output = load_tensor(truth.output_file)
        verdicts["first-step outputs"] = judge(tensor_error(load_tensor(run.output_file), truth_output),
                                               tensor_error(load_tensor(reference.output_file), truth_output), dtype)
    gradients = {
        name: judge(relative_error(run.grad_norms.get(name, float("nan")), value),
                    relative_error(reference.grad_norms.get(name, float("nan")), value), dtype)
        for name, value in truth.grad_norms.items()
    }
    gradient_worst = worst(gradients.items())
    if gradient_worst:
        verdicts[f"first-step gradient norm of {gradient_worst[0]}"] = gradient_worst[1]
    verdicts[f"loss over {len(truth.losses)} steps"] = judge(trajectory_error(run.losses, truth.losses),
                                                             trajectory_error(reference.losses, truth.losses),
                                                             dtype)
    if run.metric is not None and reference.metric is not None and truth.metric is not None:
        metric = judge(relative_error(run.metric, truth.metric), relative_error(reference.metric, truth.metric), dtype)
        metric.value, metric.reference_value = run.metric, reference.metric
        metric.reaches_target = _reaches_target(run.metric, reference.metric, run.metric_higher_is_better)
        metric.passed = metric.passed or metric.reaches_target
        verdicts[f"metric after {len(truth.losses)} steps"] = metric
    first_step_failed = [name for name, verdict in verdicts.items()
                         if name.startswith("first-step") and not verdict.passed]
    first_step_failed += [f"first-step gradient norm of {name}" for name, verdict in gradients.items()
                          if not verdict.passed and f"first-step gradient norm of {name}" not in first_step_failed]
    return Comparison(verdicts=verdicts, first_step_failed=first_step_failed,
                      gradients_failing=sum(1 for verdict in gradients.values() if not verdict.passed),
                      gradients_checked=len(gradients))


def _reaches_target(value: float, reference: float, higher_is_better: bool) -> bool:
    if higher_is_better:
        return value >= METRIC_TARGET * reference if reference >= 0 else value >= reference / METRIC_TARGET
    return value <= reference / METRIC_TARGET if reference >= 0 else value <= reference * METRIC_TARGET


def truth_failure(truth: TrainedRun) -> str | None:
    """Why the float64 ground truth could not be built, else None: the app's
    runs are not at fault for it."""
    error = truth.error
    if not error:
        return None
    where = f" at {error.location}" if error.location else ""
    return (f"the float64 reference could not be built ({error.message}{where}); the app's own runs "
            "succeeded, so parity was not judged")


def truth_note(truth: TrainedRun) -> str:
    held = truth.casts_held or 0
    return (f"; the float64 reference kept {held} of the app's casts to a lower float dtype in float64 "
            "(autocast leaves float64 alone)" if held else "")


def check(backend: str, run: TrainedRun, reference: TrainedRun, truth: TrainedRun, dtype: str,
          nondeterministic: bool) -> Check:
    problem = truth_failure(truth)
    if problem:
        return Check(name="parity", backend=backend, status=CheckStatus.ERROR, reason=problem,
                     figures=ParityFigures.begin().put(dtype=dtype, reference_not_built=True))
    comparison = compare(run, reference, truth, dtype)
    verdicts = comparison.verdicts
    failing = [name for name, verdict in verdicts.items() if not verdict.passed]
    found = worst(verdicts.items())
    assert found is not None, "compare() judges at least the losses"
    name, verdict = found
    figures = ParityFigures.begin().put(
        dtype=dtype,
        steps=len(truth.losses),
        worst_quantity=name,
        worst_ratio=verdict.ratio,
        quantities=verdicts,
        gradients_checked=comparison.gradients_checked,
        gradients_failing=comparison.gradients_failing,
        final_loss=run.losses[-1],
        reference_final_loss=reference.losses[-1],
        float64_final_loss=truth.losses[-1],
        # The trajectories themselves, for the report's loss chart (a few floats each).
        losses=list(run.losses),
        reference_losses=list(reference.losses),
        float64_losses=list(truth.losses),
        output_source=run.output_source,
        first_step_failed=comparison.first_step_failed,
    )
    if failing:
        reason = (f"{len(failing)} quantit{'y' if len(failing) == 1 else 'ies'} beyond the error-ratio limit; worst: "
                  f"{name}, error {verdict.backend_error:.2e} vs reference {verdict.reference_error:.2e} "
                  f"(ratio {_ratio_text(verdict.ratio)})")
    else:
        reason = (f"all quantities within the error-ratio limit; worst: {name}, ratio {_ratio_text(verdict.ratio)}")
    figures.put(float64_casts_held=truth.casts_held or 0)
    reason += truth_note(truth)
    if nondeterministic:
        reason += "; the reference itself is nondeterministic (see determinism), so these figures are noisy"
    return Check(name="parity", backend=backend, status=CheckStatus.FAIL if failing else CheckStatus.PASS,
                 reason=reason, figures=figures)


def _ratio_text(ratio: float) -> str:
    return f"{ratio:.3g}" if ratio < 1e6 else f"{ratio:.2e}"


def determinism(first: TrainedRun, second: TrainedRun) -> Check:
    """Two identical CPU runs must agree bit for bit."""
    differences = []
    for step, (a, b) in enumerate(zip(first.losses, second.losses), start=1):
        if a != b:
            differences.append(f"loss at step {step}: {a!r} vs {b!r}")
            break
    changed = [name for name, value in first.grad_norms.items() if second.grad_norms.get(name) != value]
    if changed:
        differences.append(f"first-step gradient norm of {changed[0]}")
    if first.output_file and second.output_file:
        import torch

        if not torch.equal(load_tensor(first.output_file), load_tensor(second.output_file)):
            differences.append("first-step outputs")
    figures = DeterminismFigures.begin().put(runs=2, steps=len(first.losses), bit_exact=not differences)
    if differences:
        return Check(name="determinism", backend="cpu", status=CheckStatus.FAIL, figures=figures,
                     reason="nondeterministic app: two identical cpu runs (same seed, same data, deterministic "
                            f"kernels) differ: {'; '.join(differences)}. Tolerances are not widened for this")
    return Check(name="determinism", backend="cpu", status=CheckStatus.PASS, figures=figures,
                 reason=f"two identical cpu runs agree bit for bit over {len(first.losses)} steps")


def localise(backend_modules: TensorsByName, order: list[str], reference_modules: TensorsByName,
             truth_modules: TensorsByName, dtype: str) -> DivergingModule | None:
    """The first module, in the order the backend's modules finished their
    forward, whose output fails the error-ratio rule."""
    checked = 0
    for name in order:
        if name not in reference_modules or name not in truth_modules:
            continue
        value, reference, truth = backend_modules[name], reference_modules[name], truth_modules[name]
        if value is None or reference is None or truth is None:
            continue
        checked += 1
        verdict = judge(tensor_error(value, truth), tensor_error(reference, truth), dtype)
        if not verdict.passed:
            return DivergingModule(module=name, position=checked, backend_error=verdict.backend_error,
                                   reference_error=verdict.reference_error, ratio=verdict.ratio, passed=False)
    return None
