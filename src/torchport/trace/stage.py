"""The evaluate stage: trace the evaluated app and put the section in the
result document (``document["trace"]``).

Called by ``torchport evaluate`` after the timing rounds as
``evaluate_stage(document, options, out_dir)``.  It never fails the
evaluation: a trace that cannot run is recorded with its reason.  Where the
xla backend ran, its measured compile and fallback counts are set beside the
prediction.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchport.limits import TRACE_TIMEOUT_S
from torchport.planning import RunFigures, StageFigures, StagePlan
from torchport.sampling import format_duration
from torchport.trace.analysis import trace_section
from torchport.trace.compile_check import compare_with_torch_compile
from torchport.trace.job import DEFAULT_STEPS
from torchport.records import (AppScan, BackendEntry, BackendStatus, MeasuredOnTarget, ResultDocument, ScanHit, StageSize,
                               TraceSection,
                               TraceVerdictStatus)
from torchport.trace.verdict import compare_with_xla, verdicts

if TYPE_CHECKING:
    from torchport.app import AppSpec

# Evaluate traces until the op sequence has been the same for REPEATED steps
# in a row, at most EVALUATE_STEPS: a data-dependent branch that first flips at
# step 3 is seen, and an app whose step never changes stops after 3 steps.
EVALUATE_STEPS = 12
REPEATED = 3


@dataclass(frozen=True)
class TraceStageOptions:
    """What the trace stage reads of an evaluation."""

    app: AppSpec | str | None = None
    seed: int = 0
    steps: int = EVALUATE_STEPS  # a bound: the trace stops once REPEATED steps agree
    until_repeated: int = REPEATED
    timeout_s: float = TRACE_TIMEOUT_S
    targets: list[str] | None = None
    live: bool = True

    @classmethod
    def from_evaluation(cls, options: Any) -> TraceStageOptions:
        return cls(app=getattr(options, "app", None),
                   seed=getattr(getattr(options, "protocol", None), "seed", 0),
                   steps=int(getattr(options, "trace_steps", EVALUATE_STEPS) or EVALUATE_STEPS),
                   timeout_s=min(float(getattr(options, "timeout_s", TRACE_TIMEOUT_S)), TRACE_TIMEOUT_S),
                   targets=getattr(options, "trace_targets", None), live=getattr(options, "trace_live", True))


TRACE_STEP_FACTOR = 2.0  # a traced step costs about 1.8x an untraced one (benchmarks/bench_trace.py)


@dataclass(frozen=True)
class TraceCost:
    """The trace stage's time, for evaluate's budget: the reference's start-up
    and its traced steps, between ``REPEATED`` (it stops once the op sequence
    repeats that often) and ``EVALUATE_STEPS``.  The checks, planned first,
    leave its minimum free."""

    reserved: bool = True
    plan_order: int = 1

    @staticmethod
    def seconds(reference: RunFigures, steps: int) -> float:
        return reference.overhead_s + steps * TRACE_STEP_FACTOR * (reference.step_s or 0.0)

    def minimum_s(self, figures: StageFigures) -> float:
        reference = figures.reference
        return self.seconds(reference, REPEATED) if reference is not None and reference.step_s else 0.0

    def plan(self, figures: StageFigures, room_s: float, worker_timeout_s: float) -> StagePlan:
        cpu = figures.reference
        if cpu is None or not cpu.step_s:
            return StagePlan()
        fit = int((room_s - cpu.overhead_s) / (TRACE_STEP_FACTOR * cpu.step_s)) if room_s > cpu.overhead_s else 0
        steps = min(max(fit, REPEATED), EVALUATE_STEPS)
        fits = fit >= REPEATED
        sizes = StageSize(key_order=()).put(
            steps=steps, bounds=[REPEATED, EVALUATE_STEPS], step_s=cpu.step_s, startup_s=round(cpu.overhead_s, 1),
            fits=fits, why=f"{room_s:.0f} s left for it, a traced step about {TRACE_STEP_FACTOR:g}x the "
                           f"measured {cpu.step_s:.3g} s")
        could_not = None if fits else (
            f"trace: not run: its minimum of {steps} steps needs about "
            f"{format_duration(self.seconds(cpu, steps))} (start-up "
            f"{format_duration(cpu.overhead_s)}), {format_duration(max(0.0, room_s))} were left")
        return StagePlan(fits=fits, needs_s=self.seconds(cpu, steps) if fits else 0.0,
                         settings={"trace_steps": steps}, sizes=sizes, could_not=could_not)


COST = TraceCost()


MAX_SCAN_FINDINGS = 50


def app_files(app_file: Path) -> list[Path]:
    """The app's file and the modules beside it that it imports (one level):
    the app's own code, not its libraries."""
    import ast

    files = [app_file]
    try:
        tree = ast.parse(app_file.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return files
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for name in names:
            candidate = app_file.parent / f"{name.split('.')[0]}.py"
            if candidate.is_file() and candidate not in files:
                files.append(candidate)
    return files


def app_scan(app_file: Path | None) -> AppScan | None:
    """``torchport scan`` over the app's own files (None for a built-in or a
    package app): each finding with scan's rule id, title, line and
    severity per scan target, as ``scan`` reports it (a guarded line's cap
    and a target the finding is fine on included)."""
    if app_file is None:
        return None
    from torchport.scan.catalogue import find
    from torchport.scan.config import ScanConfig
    from torchport.scan.rules import finding_severity
    from torchport.scan.scanner import scan

    files = app_files(Path(app_file))
    result = scan(files, ScanConfig())
    findings = []
    for finding in result.findings[:MAX_SCAN_FINDINGS]:
        rule = find(finding.rule_id)
        findings.append(ScanHit(id=finding.rule_id, title=rule.title, detail=finding.detail,
                                # Absolute, as the trace's own locations are (scan displays paths from the cwd).
                                location=f"{Path(finding.path).resolve()}:{finding.line}",
                                severity={target: finding_severity(finding, target) for target in rule.severity},
                                replacement=rule.replacement))
    return AppScan(files=[str(path) for path in files], findings=findings, total=len(result.findings),
                   suppressed=result.suppressed)


def attach_scan(section: TraceSection, app_file: Path | None) -> None:
    """Scan's findings for the app's own files in the section, merged with the
    device-typed API calls the trace saw run (one finding per line and rule),
    and the verdicts again with them beside the trace's: a CUDA-typed API
    silent elsewhere is no "runs as is"."""
    from torchport.trace.device_apis import merge_with_scan

    section.put(app_scan=merge_with_scan(app_scan(app_file), section.device_apis))
    if section.verdicts:
        section.verdicts = verdicts(section, list(section.verdicts))


FAILED_RUNS = (BackendStatus.ERROR, BackendStatus.CRASHED, BackendStatus.TIMED_OUT)


def reconcile(section: TraceSection, backends: dict[str, BackendEntry]) -> None:
    """A measured run outranks the trace's prediction for its target: each
    verdict whose target a backend of this evaluation measured says what
    that run did, beside what the trace predicted (``measured``)."""
    from torchport import backends as backend_registry

    for name, backend in backends.items():
        try:
            family = backend_registry.get(name).family
        except Exception:  # noqa: BLE001  a backend recorded here but not known now: nothing to set beside
            continue
        target = family.trace_target if family else None
        verdict = section.verdicts.get(target) if target else None
        status = backend.status
        if verdict is None or verdict.measured or status not in (BackendStatus.OK, *FAILED_RUNS):
            continue
        ran = status == BackendStatus.OK and backend.summary is not None
        proxy = f", a proxy for {backend.proxy_for}" if backend.proxy_for else ""
        verdict.measured = MeasuredOnTarget(backend=name, status=status, ran=ran, proxy_for=backend.proxy_for)
        if ran and verdict.status == TraceVerdictStatus.BLOCKED:
            verdict.text = f"ran on the {name} backend{proxy} (measured; it outranks the trace's prediction: {verdict.text})"
        elif not ran and verdict.status != TraceVerdictStatus.BLOCKED:
            message = backend.error.message if backend.error else "no message"
            verdict.text += f"; measured: the {name} run {status}{proxy} ({message}), which outranks this prediction"
        else:
            verdict.text += f"; measured on the {name} backend{proxy}: {'ran' if ran else status}, as predicted"


def evaluate_stage(document: ResultDocument, options: Any, out_dir: Path) -> None:
    from torchport.app import as_spec
    from torchport.launch import run_worker
    from torchport.trace.analysis import TRACE_JOB, validate_targets

    stage = TraceStageOptions.from_evaluation(options)
    spec = as_spec(stage.app)  # evaluate's, parsed and checked
    run = run_worker("cpu", TRACE_JOB, app=spec,
                     config={"steps": stage.steps, "seed": stage.seed, "until_repeated": stage.until_repeated},
                     timeout=stage.timeout_s)
    section = trace_section(run, spec.text, validate_targets(stage.targets), allow_live=stage.live)
    attach_scan(section, spec.file)
    reconcile(section, document.backends)
    section.xla_comparison = compare_with_xla(section, document.backends)
    section.put(torch_compile_comparison=compare_with_torch_compile(section, document.backends))
    document.put(trace=section)


__all__ = ["evaluate_stage", "TraceStageOptions", "DEFAULT_STEPS"]
