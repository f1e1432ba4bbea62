"""Run the checks: which workers, in which order, and the verdicts.

Training checks (parity, checkpoint portability, input pipeline) share worker
processes: one per backend trains K steps once and serves all three.

1. The ``cpu`` worker trains the reference run (float32 by default; it is also
   the ``cpu`` backend's own run), trains it again for the determinism
   precheck, trains the float64 ground truth, times the data pipeline, and
   resumes from its own checkpoint.
2. Each other backend's worker trains its run (saving a checkpoint at step
   K/2) and resumes from every checkpoint saved before it started (the
   ``cpu`` one, the host's below, earlier backends') and from its own.
3. One more worker per backend that still lacks an ordered pair resumes from
   the remaining checkpoints, those saved after its worker ran (e.g. cpu from
   xla's); the reference and its host (below) share that worker too.
4. Only when a backend's first step diverges: one worker on the reference and
   one on that backend record every module's output, to name the first that
   diverges.

A backend that is the reference plus torch.compile (``cpu-compile``: same
device, same interpreter) hosts steps 1 and 2 in one worker: the reference's
runs are made there eagerly, and both pairs between the two are resumed
there, in both directions.  Three processes become one; checkpoints still go
through files, and the checks section records where the reference ran.  If
that worker fails, the reference runs in a ``cpu`` worker of its own.

Recovery and distributed training run their own workers
(``torchport.check.recovery`` / ``distributed``).
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from torchport import backends as backend_registry
from torchport.app import AppSpec, as_spec, preflight
from torchport.check import CHECK_NAMES, TRAINING_CHECKS, WORKER_CHECKS, checkpoint, parity, pipeline, worker_check
from torchport.check.budget import CheckBudget
from torchport.check.tolerance import CLOSE, FLOOR, RATIO_LIMIT
from torchport.errors import UserError
from torchport.failures import is_app_failure
from torchport.launch import run_worker
from torchport.sampling import format_duration
from torchport.limits import DEFAULT_TIMEOUT_S
from torchport.records import (AppFailure, BackendAvailability, Check, CheckpointSource, ChecksConfig, ChecksSection, CheckStatus,
                               ErrorRecord, ParityFigures, ResumedRun, RunRecord, RunStatus, SavedCheckpoint,
                               TrainedRun, TrainSpec)

TRAIN_JOB = "torchport.check.jobs:train_job"
REFERENCE = "cpu"
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class CheckOptions:
    # Parsed by the command (or evaluate); text from an API caller is parsed by validate.
    app: AppSpec | str | None = None
    backends: list[str] = field(default_factory=list)  # empty: every known backend
    only: tuple[str, ...] = CHECK_NAMES
    steps: int = 10
    dtype: str = "float32"
    seed: int = 0
    timeout_s: float = DEFAULT_TIMEOUT_S
    work_dir: Path | None = None
    keep_files: bool = False
    recovery_steps: int = 24
    recovery_every: int = 5
    kill_seed: int | None = None  # None: a fresh random kill step, recorded in the figures
    nproc: int = 2
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    rdzv_conf: str | None = None
    distributed_steps: int = 8
    # Parity on the app's predict() output and metric: each is one more graph for a compiling backend to
    # build; without them the outputs come from training step 1 and the metric is not compared.
    app_inference: bool = True
    # backend -> (step seconds, data-wait seconds per step, where the figure comes from): torchport evaluate's
    # sustained figures, shown beside the pipeline check's own measurement (not used for its verdict).
    step_times: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    # Training steps per round of the pipeline check's timing (pipeline.PER_ROUND; fewer when a budget is short).
    pipeline_per_round: int = pipeline.PER_ROUND
    # --budget: the whole check in this many seconds (torchport.check.budget); None: no budget.
    budget_s: float | None = None
    # The budget's clock and what it learned, set by check_section: runtime state, not an option.
    budget: CheckBudget | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class CheckEvent:
    """What the checks tell their display: the ``start`` of a check (``check``) on a backend, or a
    worker's ``progress`` (its ``phase``)."""

    kind: str
    backend: str
    check: str = ""
    runs: tuple[str, ...] = ()  # the training worker's runs
    phase: str = ""


Event = Callable[[CheckEvent], None]


def validate(options: CheckOptions) -> list[str]:
    """Check every input before any worker starts; return the backends to consider.
    The app is parsed and checked once: ``options.app`` becomes that record."""
    options.app = preflight(as_spec(options.app))
    unknown = [name for name in options.only if name not in CHECK_NAMES]
    if unknown:
        raise UserError(f"unknown check {unknown[0]!r} (choose from {', '.join(CHECK_NAMES)})", location="--only")
    names = options.backends or list(backend_registry.registry())
    for name in names:
        backend_registry.get(name)
    if options.dtype not in DTYPES:
        raise UserError(f"unsupported dtype {options.dtype!r} (choose from {', '.join(DTYPES)})", location="--dtype")
    if options.steps < 2:
        raise UserError(f"--steps must be at least 2 (a checkpoint is taken half way), got {options.steps}", location="--steps")
    if options.recovery_steps < 2 * options.recovery_every + 2:
        raise UserError(f"recovery needs at least 2 x every + 2 steps, got {options.recovery_steps} steps "
                        f"with a checkpoint every {options.recovery_every}", location="--recovery-steps")
    if not (math.isfinite(options.timeout_s) and options.timeout_s > 0):
        raise UserError(f"--timeout must be positive, got {options.timeout_s}", location="--timeout")
    if options.nproc < 2:
        raise UserError(f"--nproc must be at least 2, got {options.nproc}", location="--nproc")
    return list(dict.fromkeys(names))


def check_section(options: CheckOptions, on_event: Event | None = None) -> ChecksSection:
    """The ``checks`` section of a result document."""
    on_event = on_event or (lambda event: None)
    names = validate(options)
    started = time.monotonic()
    budget = CheckBudget(options.budget_s, started=started) if options.budget_s else None
    options = dataclasses.replace(options, budget=budget)
    backends_seen = {}
    available = []
    for name in names:
        verdict = backend_registry.availability(name)
        backends_seen[name] = BackendAvailability(available=verdict.available, reason=verdict.reason)
        if verdict.available:
            available.append(name)
    checks: list[Check] = []
    for name in names:
        if name not in available:
            checks.append(Check(name="all", backend=name, status=CheckStatus.SKIPPED,
                                reason=f"backend not available: {backends_seen[name].reason}"))
    work = Path(options.work_dir) if options.work_dir else Path(tempfile.mkdtemp(prefix="torchport-check-"))
    work.mkdir(parents=True, exist_ok=True)
    app_error = None
    reference_worker = None
    try:
        if set(TRAINING_CHECKS) & set(options.only):
            training, app_error, reference_worker = training_checks(options, available, work / "training", on_event)
            checks += training
        later = [(check, name) for check in WORKER_CHECKS if check in options.only for name in available]
        for index, (check, name) in enumerate(later):
            on_event(CheckEvent("start", name, check=check))
            sized, skip = (options, None) if budget is None else budget.size(check, options, name, len(later) - index)
            if skip:
                checks.append(Check(name=check, backend=name, status=CheckStatus.SKIPPED, reason=skip))
                continue
            limited = budget is not None and budget.limited(options.timeout_s)
            result = worker_check(check).check(sized, name, work / f"{check}-{name}")
            checks.append(budget.explain(result, sized.timeout_s, limited) if budget else result)
    finally:
        if not options.keep_files and not options.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    config = ChecksConfig(key_order=()).put(
        app=as_spec(options.app).text,
        checks=list(options.only),
        backends=names,
        reference=REFERENCE,
        reference_worker=reference_worker,
        ground_truth="cpu, float64",
        steps=options.steps,
        checkpoint_step=max(1, options.steps // 2),
        dtype=options.dtype,
        seed=options.seed,
        ratio_limit=RATIO_LIMIT,
        floor=FLOOR[options.dtype],
        close=CLOSE[options.dtype],
        # each worker check's own settings under its name, as its dictionary (they are not fields of the config)
        **{check: worker_check(check).config(options).to_dict() for check in WORKER_CHECKS},
        budget=budget.record() if budget else None,
    )
    return ChecksSection(checks=checks, config=config, backends=backends_seen, app_error=app_error,
                         duration_s=time.monotonic() - started)


@dataclass
class TrainWorker:
    """What one training worker (``jobs.train_job``) returned: how it ended,
    its runs by label, and what it resumed (target -> checkpoint source -> the
    resumed run), read from the worker's JSON once, in ``from_result``."""

    status: RunStatus | str | None
    error: ErrorRecord | None = None
    runs: dict[str, TrainedRun] = field(default_factory=dict)
    resumed: dict[str, dict[str, ResumedRun]] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    # The worker's timeout when the time budget ended it, else None.
    budget_limited_s: float | None = None

    @classmethod
    def from_result(cls, result: RunRecord) -> TrainWorker:
        runs = result.extra.get("runs") or {}
        resumed = result.extra.get("resumed") or {}
        return cls(status=result.status, error=result.error,
                   runs={label: TrainedRun.from_dict(run) for label, run in runs.items()},
                   resumed={target: {source: ResumedRun.from_dict(run) for source, run in by_source.items()}
                            for target, by_source in resumed.items()},
                   phases=result.phases or {})

    def failure(self, backend: str) -> str | None:
        """One line for a worker that did not finish, else None."""
        if self.status == RunStatus.OK:
            return None
        if self.budget_limited_s:
            return (f"budget too small: the time budget ended the {backend} worker after "
                    f"{format_duration(self.budget_limited_s)}, before its runs were done")
        error = self.error or ErrorRecord(message="no message")
        where = f" at {error.location}" if error.location else ""
        return f"{backend} worker {self.status}: {error.message}{where}"

    def saved(self, label: str) -> SavedCheckpoint | None:
        """The checkpoint run ``label`` saved, else None."""
        run = self.runs.get(label)
        return run.checkpoint if run else None

    def saved_bytes(self, label: str) -> bool:
        """Whether run ``label`` wrote a checkpoint file."""
        saved = self.saved(label)
        return bool(saved and saved.bytes)

    def resumed_into(self, target: str) -> dict[str, ResumedRun]:
        """What this worker resumed into ``target``'s run, by checkpoint source."""
        return self.resumed.get(target) or {}


def _train(backend: str, options: CheckOptions, work: Path, runs: list[TrainSpec], on_event: Event,
           resume: list[CheckpointSource] | None = None, resume_spec: TrainSpec | None = None) -> TrainWorker:
    on_event(CheckEvent("start", backend, check="training", runs=tuple(run.label for run in runs)))
    budget = options.budget
    timeout = budget.worker_timeout(options.timeout_s) if budget else options.timeout_s
    # The job crosses to the worker as JSON: the records' dictionaries, here only.
    job = {"work_dir": str(work), "runs": [run.to_dict() for run in runs],
           "resume": [source.to_dict() for source in resume or []],
           **({"resume_spec": resume_spec.to_dict()} if resume_spec else {})}
    worker = TrainWorker.from_result(run_worker(
        backend, TRAIN_JOB, app=options.app, extra=job, timeout=timeout,
        on_progress=lambda event: on_event(CheckEvent("progress", backend, phase=str(event.get("phase", ""))))))
    if budget is not None:
        if worker.status == RunStatus.TIMED_OUT and timeout < options.timeout_s:
            worker.budget_limited_s = timeout
        elif worker.status == RunStatus.OK:
            budget.learn(backend, worker.runs.values(), worker.phases)
    return worker


def reference_host(names: list[str]) -> str | None:
    """A backend among ``names`` whose worker can also make the reference's
    runs: the reference's device and interpreter, plus torch.compile."""
    reference = backend_registry.get(REFERENCE)
    for name in names:
        cls = backend_registry.get(name)
        if (name != REFERENCE and cls.compile_backend is not None and cls.device_type == reference.device_type
                and cls.environment == reference.environment):
            return name
    return None


def training_checks(options: CheckOptions, names: list[str], work: Path,
                    on_event: Event) -> tuple[list[Check], AppFailure | None, str]:
    """The parity, checkpoint and pipeline checks, the app's own error when
    the reference run failed in the app's code (every backend would say the
    same), and the backend whose worker made the reference's runs."""
    want = set(options.only)
    steps = options.steps
    saved_at = max(1, steps // 2)

    def run_spec(label: str, dtype: str | None = None, **flags: Any) -> TrainSpec:
        return TrainSpec(label=label, dtype=dtype or options.dtype, seed=options.seed, steps=steps,
                         app_inference=options.app_inference, **flags)

    def own_run(label: str, with_checkpoint: bool) -> TrainSpec:
        keep = "checkpoint" in want and with_checkpoint
        return run_spec(label, outputs="parity" in want, checkpoint_step=saved_at if keep else None, save_final=keep,
                        pipeline="pipeline" in want, pipeline_per_round=options.pipeline_per_round)

    results: dict[str, TrainWorker] = {}
    reference_runs = [own_run(REFERENCE, REFERENCE in names)]
    if "parity" in want:
        reference_runs += [run_spec("cpu-repeat", outputs=True), run_spec("cpu-float64", "float64", outputs=True)]
    self_resume = "checkpoint" in want and REFERENCE in names
    host = reference_host(names)
    if host is not None:
        eager_runs = [dataclasses.replace(run, eager=True) for run in reference_runs]
        host_spec = own_run(host, True)
        ends = ([eager_runs[0]] if self_resume else []) + ([host_spec] if "checkpoint" in want else [])
        resume = [dataclasses.replace(_source(work, source.label), into=into) for into in ends for source in ends]
        results[host] = _train(host, options, work, eager_runs + [host_spec], on_event,
                               resume=resume, resume_spec=host_spec)
        if results[host].failure(host) is None:
            results[REFERENCE] = results[host]
        # Otherwise the reference runs on its own below: the host's failure (a compiler
        # crash, a timeout) must not become the reference's, nor be blamed on the app.
    if REFERENCE not in results:
        results[REFERENCE] = _train(
            REFERENCE, options, work, reference_runs, on_event,
            resume=[_source(work, REFERENCE)] if self_resume else [], resume_spec=reference_runs[0])
    reference = results[REFERENCE]
    reference_worker = host if host is not None and reference is results[host] else REFERENCE
    reference_checkpoint_ok = self_resume and reference.failure(REFERENCE) is None
    for name in names:
        if name in results:
            continue
        spec = own_run(name, True)
        # Every checkpoint saved so far (the reference's, the host's, earlier backends'), then its own: each
        # pair resumed here is one a later worker need not start for.
        sources = [REFERENCE] if reference_checkpoint_ok else []
        if "checkpoint" in want:
            sources += [source for source in results if source not in sources and results[source].saved_bytes(source)]
            sources.append(name)
        results[name] = _train(name, options, work, [spec], on_event,
                               resume=[_source(work, source) for source in sources], resume_spec=spec)
    if "checkpoint" in want:
        _remaining_pairs(options, names, work, results, on_event, host if reference_worker == host else None)

    checks: list[Check] = []
    reference_failure = reference.failure(REFERENCE)
    nondeterministic = False
    if "parity" in want:
        if reference_failure:
            checks.append(_error("determinism", REFERENCE, reference_failure))
        else:
            check = parity.determinism(reference.runs[REFERENCE], reference.runs["cpu-repeat"])
            nondeterministic = check.status == CheckStatus.FAIL
            checks.append(check)
        for name in names:
            if name == REFERENCE:
                continue
            problem = reference_failure or results[name].failure(name)
            if problem:
                checks.append(_error("parity", name, problem))
                continue
            check = parity.check(name, results[name].runs[name], reference.runs[REFERENCE],
                                 reference.runs["cpu-float64"], options.dtype, nondeterministic)
            if check.figures_as(ParityFigures).first_step_failed:
                _localise(options, name, work, check, on_event)
            checks.append(check)
    if "checkpoint" in want:
        for source in names:
            for target in names:
                checks.append(_checkpoint_check(source, target, results, options.dtype))
    if "pipeline" in want:
        for name in names:
            checks.append(_pipeline_check(options, name, results))
    error = reference.error
    app_error = (AppFailure(message=error.message, location=error.location, kind=error.kind)
                 if error and is_app_failure(error) else None)
    return checks, app_error, reference_worker


def _source(work: Path, label: str) -> CheckpointSource:
    return CheckpointSource(label=label, path=str(work / f"{label}.ckpt"))


def _remaining_pairs(options: CheckOptions, names: list[str], work: Path, results: dict[str, TrainWorker],
                     on_event: Event, host: str | None = None) -> None:
    """Resume each backend from the checkpoints it has not loaded yet (those saved after its worker ran), one
    worker per backend; the reference and the ``host`` whose worker made its runs share one, as at first."""
    missing: dict[str, list[str]] = {}
    for target in names:
        target_worker = results[target]
        if target_worker.failure(target):
            continue
        done = set(target_worker.resumed_into(target))
        sources = [source for source in names if source not in done and results[source].saved_bytes(source)]
        if sources:
            missing[target] = sources

    shared = host is not None and REFERENCE in missing and host in missing
    worker_of = {target: host if shared and host and target == REFERENCE else target for target in missing}

    def resume_spec(target: str) -> TrainSpec:
        run = results[target].runs[target]
        eager = worker_of.get(target, target) != target  # the reference on its host
        return TrainSpec(label=target, dtype=run.dtype, seed=options.seed, steps=run.steps, eager=eager)

    for worker in dict.fromkeys(worker_of.values()):
        targets = [target for target in missing if worker_of[target] == worker]
        resume = [dataclasses.replace(_source(work, source), into=resume_spec(target)) for target in targets
                  for source in missing[target]]
        resumer = _train(worker, options, work, [], on_event, resume=resume, resume_spec=resume_spec(worker))
        problem = resumer.failure(worker)
        for target in targets:
            for source in missing[target]:
                resumed = resumer.resumed_into(target).get(source)
                results[target].resumed.setdefault(target, {})[source] = \
                    resumed or ResumedRun(error=problem or "not run")


def _checkpoint_check(source: str, target: str, results: dict[str, TrainWorker], dtype: str) -> Check:
    for name in (source, target):
        problem = results[name].failure(name)
        if problem and not results[name].saved(name):
            return Check(name="checkpoint", pair=f"{source} -> {target}", status=CheckStatus.ERROR, reason=problem)
    target_worker = results[target]
    source_worker, target_worker = results[source], results[target]
    return checkpoint.check(source, target, source_worker.saved(source), target_worker.resumed_into(target).get(source),
                            source_worker.runs.get(source), target_worker.runs[target], dtype)


def _pipeline_check(options: CheckOptions, name: str, results: dict[str, TrainWorker]) -> Check:
    """Each backend's verdict from its own run's measurement (``pipeline.measure``)."""
    device_type = backend_registry.get(name).device_type
    run = results[name].runs.get(name)
    measured = run.pipeline if run else None
    if not measured:
        return _error("pipeline", name, results[name].failure(name) or "the data pipeline was not timed")
    evaluation = options.step_times.get(name)
    return pipeline.check(name, device_type, measured, evaluation[0] if evaluation else None)


def _localise(options: CheckOptions, name: str, work: Path, check: Check, on_event: Event) -> None:
    """Record every module's output in step 1 on the reference, the truth and
    the backend, and name the first module that diverges."""
    def single(label: str, dtype: str) -> TrainSpec:
        return TrainSpec(label=label, dtype=dtype, seed=options.seed, steps=1, modules=True, app_inference=False)

    figures = check.figures_as(ParityFigures)
    check.figures = figures
    reference_folder = work / "modules"
    reference_path = reference_folder / "cpu-float64-modules.modules.pt"
    if not reference_path.exists():
        _train(REFERENCE, options, reference_folder,
               [single("cpu-modules", options.dtype), single("cpu-float64-modules", "float64")], on_event)
    worker = _train(name, options, reference_folder, [single(f"{name}-modules", options.dtype)], on_event)
    problem = worker.failure(name)
    if problem or not reference_path.exists():
        figures.put(diverging_module=None)
        check.reason += f"; locating the module failed: {problem or 'the reference run failed'}"
        return
    record = worker.runs[f"{name}-modules"]
    found = parity.localise(parity.load_tensor(record.modules_file), record.modules or [],
                            parity.load_tensor(str(reference_folder / "cpu-modules.modules.pt")),
                            parity.load_tensor(str(reference_path)), options.dtype)
    if found is None:
        figures.put(diverging_module=None)
        check.reason += "; no single module's forward output diverges (the difference is in the backward or the optimizer)"
        return
    found.type = (record.module_types or {}).get(found.module)
    figures.put(diverging_module=found)
    check.reason = (f"first diverging module: {found.module} ({found.type}), output error ratio "
                    f"{found.ratio:.3g}; " + check.reason)


def _error(name: str, backend: str, reason: str) -> Check:
    return Check(name=name, backend=backend, status=CheckStatus.ERROR, reason=reason)


def exit_status(section: ChecksSection) -> int:
    """0 when every check passed (or was borderline, skipped, or not applicable on its backend), 1 when one
    failed or could not run.  Borderline is inside the band between pass and fail: reported as such, but not
    a failure to stop a build on."""
    return 1 if any(check.failed for check in section.checks) else 0
