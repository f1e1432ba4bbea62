"""``torchport evaluate``: the same app, the same configuration, every backend.

Runs are interleaved across backends in rounds (asv-style) so that slow drift
of the machine touches all backends alike; every run is a fresh worker
process.  The result document is rewritten after each run.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from torchport import backends as backend_registry
from torchport import failures, results, summary
from torchport.document import new_document, read_document, result_record
from torchport.environment import git_state
from torchport import stages as stage_registry
from torchport.app import AppSpec, as_spec, parse_user_file, preflight
from torchport.errors import UserError, interrupted_by
from torchport.launch import cancel_all, cancelled, run_worker
from torchport.planning import StagesPlan
from torchport.prices import Prices
from torchport.limits import DEFAULT_TIMEOUT_S
from torchport.protocol import ProtocolConfig
from torchport.records import (AppRecord, BackendEntry, BackendStatus, DocumentStatus, ErrorRecord, ResultDocument, RunRecord,
                               RunStatus, StageError)

EVALUATE_JOB = "torchport.protocol:evaluate_job"
SCRIPT_JOB = "torchport.script.job:script_job"

# A backend with these statuses still gets its next round's run.
STILL_RUNNING = (BackendStatus.PENDING, BackendStatus.OK)

if TYPE_CHECKING:
    from torchport.budget import BudgetPlan


@dataclass
class EvaluationOptions:
    # The app: parsed (AppSpec) by the command; text from an API caller is parsed by validate_options.
    app: AppSpec | str | None = None
    backends: list[str] = field(default_factory=list)  # empty: every known backend
    repeats: int = 3
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    timeout_s: float = DEFAULT_TIMEOUT_S
    phase_timeout_s: float | None = None
    prices: Prices = field(default_factory=Prices)
    reference: str = "cpu"
    out_dir: Path | None = None
    command: list[str] = field(default_factory=lambda: list(sys.argv))
    # torchport.stages entries (or plain stage functions): run after the timing rounds
    stages: list[Any] = field(default_factory=list)
    # Script mode: the user's own training script instead of an app (torchport.script).
    script: Path | None = None
    script_args: list[str] = field(default_factory=list)
    redirect_cuda: bool = False
    # The time budget (torchport.budget): None runs the fixed protocol with no deadline.
    budget_s: float | None = None
    budget_explicit: bool = False  # --budget or --precision given: sampling is adaptive
    precision: float | None = None
    # Step counts of the stages: set in the copy of the options the stages run with, from the
    # budget's plan (``planned``); None: each stage's own default.
    trace_steps: int | None = None
    check_steps: int | None = None
    check_pipeline_per_round: int | None = None
    check_budget_s: float | None = None  # set by the time budget: the checks stage's workers share it


def planned(options: EvaluationOptions, plan: StagesPlan) -> EvaluationOptions:
    """The options the stages run with: those of the evaluation, less the stages the plan
    leaves out, with the plan's settings (step counts, the workers' timeout)."""
    left_out = plan.left_out()
    sized = dataclasses.replace(options, stages=[stage for stage in options.stages
                                                 if stage_registry.name_of(stage) not in left_out])
    known = {option.name for option in dataclasses.fields(sized)}
    for name, value in plan.settings().items():  # step counts and seconds, named as the options they set
        if name not in known:
            raise TypeError(f"a stage's plan sets {name!r}, which is not an evaluation option")
        setattr(sized, name, value)
    return sized


def validate_options(options: EvaluationOptions) -> list[str]:
    """Check every input before any worker starts; return the backends to consider."""
    if options.script is not None:
        if options.app:
            text = options.app.text if isinstance(options.app, AppSpec) else options.app
            raise UserError(f"give an app or --script, not both (app {text!r}, script {options.script})")
        parse_user_file(options.script, "script")  # exists and parses; nothing of it runs here
    else:
        # Parsed and checked once: the stages and the workers receive this record.
        options.app = preflight(as_spec(options.app))
    known = backend_registry.registry()
    names = options.backends or list(known)
    for name in names + options.prices.backends() + [options.reference]:
        backend_registry.get(name)  # raises a UserError naming the known backends
    if options.repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {options.repeats}")
    for flag, value in (("--timeout", options.timeout_s), ("--phase-timeout", options.phase_timeout_s)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UserError(f"{flag} must be a positive, finite number of seconds, got {value}")
    return list(dict.fromkeys(names))


RESULTS_ROOT = Path("torchport-results")  # where results go without -o, relative to the working folder


def default_out_dir(app: AppSpec | str | None) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", as_spec(app).text).strip("-") or "app"
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return RESULTS_ROOT / f"{name}-{stamp}"


def app_record(app: AppSpec | str | None) -> AppRecord:
    spec = as_spec(app)
    if spec.file is None:
        return AppRecord(spec=spec.text)
    commit, dirty = git_state(spec.file.resolve())
    return AppRecord(spec=spec.text, file=str(spec.file.resolve()), git_commit=commit, git_dirty=dirty)


@dataclass(frozen=True)
class EvaluationEvent:
    """What the evaluation tells its display, by ``kind``: ``plan`` (the runnable
    ``backends``, ``repeats``, the result's ``path``); ``start`` and ``done`` of
    one run (``backend``, ``round``; done: its ``run``); ``progress`` (the
    worker's ``phase``); ``stage`` (the stages' names); ``eta`` (``seconds``
    left overall, ``per_backend``, the ``running`` backend)."""

    kind: str
    backend: str = ""
    round: int = 0
    phase: str | None = None  # None: the worker has not named one
    run: RunRecord | None = None
    backends: list[str] = field(default_factory=list)
    repeats: int = 1
    path: str = ""
    stage: str = ""
    seconds: float = 0.0
    per_backend: dict[str, float] = field(default_factory=dict)
    running: str | None = None


class Evaluation:
    """One evaluation in progress: the document, where it is written, and the
    runs still to do.  Each backend is a BackendEntry (``backends``); the
    document's ``backends`` are written from them at each save."""

    def __init__(self, options: EvaluationOptions, on_event: Callable[[EvaluationEvent], None] | None = None):
        self.options = options
        self.names = validate_options(options)
        self.on_event = on_event or (lambda event: None)
        self.spec = options.app if isinstance(options.app, AppSpec) else None  # None: script mode
        label = f"script:{options.script.name}" if options.script is not None else self.spec
        self.folder = results.OutputFolder.claim(options.out_dir or default_out_dir(label),
                                                 explicit=options.out_dir is not None)
        self.out_dir = self.folder.path
        self.result_path = self.out_dir / "result.json"
        config = {
            **options.protocol.as_dict(),
            "repeats": options.repeats,
            "timeout_s": options.timeout_s,
            "phase_timeout_s": options.phase_timeout_s,
        }
        if options.script is not None:
            config["script"] = {"args": list(options.script_args), "redirect_cuda": options.redirect_cuda}
            commit, dirty = git_state(options.script.resolve())
            record = AppRecord(spec=f"script:{options.script}", file=str(options.script.resolve()), kind="script",
                               git_commit=commit, git_dirty=dirty)
        else:
            record = app_record(self.spec)
        self.document = new_document(options.command, record, config)
        self.document.put(prices=options.prices.to_dict())
        self.backends: dict[str, BackendEntry] = {}
        self.budget: BudgetPlan | None = None  # made once the runnable backends are known

    def write_report(self) -> Path | None:
        """report.md from the last result.json written (what is on disk is
        what the report shows); None when there is none or it cannot be written."""
        from torchport.report.markdown import render

        if not self.result_path.exists():
            return None
        from torchport.report.html import render as render_html

        saved = summary.refresh(result_record(read_document(self.result_path)))
        path = self.out_dir / "report.md"
        results.write_text_atomic(path, render(saved))
        results.write_text_atomic(self.out_dir / "report.html", render_html(saved))
        return path

    def close(self) -> None:
        self.folder.release()

    def save(self) -> None:
        summary.refresh_backends(self.backends, self.document)
        self.document.put(backends=dict(self.backends))
        if self.budget is not None:
            self.document.put(budget=self.budget.record(self.backends))
        results.write_atomic(self.result_path, self.document)

    def run(self) -> ResultDocument:
        document = self.document
        runnable = []
        for name in self.names:
            cls = backend_registry.get(name)
            available = backend_registry.availability(name)
            self.backends[name] = BackendEntry.from_dict({
                **{k: v for k, v in cls.describe().to_dict().items() if k not in ("name",)},
                "name": name,
                "available": available.available,
                "reason": available.reason,
                "status": (BackendStatus.PENDING if available.available else BackendStatus.UNAVAILABLE).value,
                "error": None,
                "runs": [],
                "summary": None,
            })
            if available.available:
                runnable.append(name)
        reference = self.options.reference if self.options.reference in runnable else (runnable[0] if runnable else None)
        document.put(reference=reference)
        if reference != self.options.reference:
            document.put(reference_note=f"requested reference {self.options.reference!r} did not run here; "
                                        f"comparing with {reference!r} instead")
        if self.options.budget_s is not None and runnable:
            from torchport import stages as stage_registry
            from torchport.budget import BudgetPlan

            self.budget = BudgetPlan(self.options.budget_s, sorted(runnable, key=lambda name: name != reference),
                                     self.options.repeats, bool(self.options.stages), self.options.precision,
                                     self.options.budget_explicit,
                                     stage_costs={stage_registry.name_of(stage): cost for stage in self.options.stages
                                                  if (cost := stage_registry.cost_of(stage)) is not None})
        self.save()
        self.on_event(EvaluationEvent("plan", backends=runnable, repeats=self.options.repeats, path=str(self.result_path)))
        try:
            self._run_rounds(runnable)
            if self.options.script is not None:
                from torchport.script.crossref import cross_reference

                document.put(script=cross_reference(self.options.script.resolve(), self.backends, document.reference))
                self.save()
            stage_options = self.options
            if self.budget is not None and self.options.stages:
                stage_options = planned(self.options, self.budget.plan_stages(document.reference, document.backends,
                                                                              self.options.timeout_s))
                self._eta([])
            self._run_stages(stage_options)
            if self.options.script is not None and stage_options.stages:
                from torchport.script.crossref import cross_reference

                # The stages add run-time evidence: the torchrun ranks' redirects (a DDP branch runs only
                # there) and the untimed pass's line coverage ("not executed" is decided by it).
                distributed = document.script_distributed
                document.put(script=cross_reference(
                    self.options.script.resolve(), self.backends, document.reference,
                    distributed.ranks if distributed else None, document.script_coverage))
        except UserError as exc:
            document.put(status=DocumentStatus.FAILED, status_reason=exc.one_line())
            self.save()
            raise
        except KeyboardInterrupt:
            document.put(status=DocumentStatus.INTERRUPTED, status_reason=f"interrupted ({interrupted_by()})")
            self.save()
            raise
        document.put(status=DocumentStatus.COMPLETE)
        self.save()
        return document

    def _run_stages(self, options: EvaluationOptions) -> None:
        """The stages after timing (trace, checks) run side by side: each mostly
        waits on worker processes of its own, and the timing they could disturb
        is over.  Each stage sets its own key of the document; it is saved once
        all are done.  A stage that cannot finish is recorded in
        ``stage_errors``: the timing results stand."""
        stages = options.stages
        if not stages:
            return
        names = [stage_registry.name_of(stage) for stage in stages]
        self.on_event(EvaluationEvent("stage", stage=", ".join(names)))
        with ThreadPoolExecutor(max_workers=len(stages)) as pool:
            futures = [pool.submit(stage_registry.run_function(stage), self.document, options, self.out_dir)
                       for stage in stages]
            try:
                errors = [future.exception() for future in futures]
            except BaseException:
                # Interrupted while the stages run: end their workers now, so
                # that leaving this block (which waits for the threads) is quick.
                cancel_all()
                raise
        if cancelled():
            raise KeyboardInterrupt
        for name, error in zip(names, errors):
            if error is not None:
                line, _ = failures.first_line(getattr(error, "message", None) or f"{type(error).__name__}: {error}")
                self.document.put(stage_errors=[*self.document.stage_errors, StageError(
                    stage=name, message=line, location=getattr(error, "location", None))])
        self.save()

    def _run_rounds(self, runnable: list[str]) -> None:
        """Round by round, every backend once.  The reference goes first, so
        that a failure of the app itself (the reference fails too) is known
        after one run; any other backend's failure is that backend's result,
        and the others keep all their repeats."""
        backends = self.backends
        reference = self.document.reference
        order = sorted(runnable, key=lambda name: name != reference)
        for round_index in range(self.options.repeats):
            for position, name in enumerate(order):
                entry = backends[name]
                if entry.status not in STILL_RUNNING:
                    continue  # a backend that failed is not retried in later rounds
                config = self.options.protocol.as_dict()
                timeout = self.options.timeout_s
                run_budget = None
                if self.budget is not None:
                    still = [later for later in order[position:] if backends[later].status in STILL_RUNNING]
                    if not self.budget.wants_run(name, round_index, entry.summary, len(still)):
                        continue
                    run_budget = self.budget.job_entry(name, round_index, len(still))
                    timeout = self.budget.run_timeout(run_budget, timeout)
                self.on_event(EvaluationEvent("start", backend=name, round=round_index))
                self._eta(order, running=name)
                script = self.options.script
                run = run_worker(
                    name,
                    SCRIPT_JOB if script is not None else EVALUATE_JOB,
                    app=self.spec,
                    extra=None if script is None else {
                        "script": str(script.resolve()), "script_args": self.options.script_args,
                        "redirect_cuda": self.options.redirect_cuda, "cwd": str(Path.cwd())},
                    config=config,
                    budget=run_budget,
                    timeout=timeout,
                    phase_timeout=self.options.phase_timeout_s,
                    on_progress=lambda event, name=name, round_index=round_index: self.on_event(  # type: ignore[misc]  # mypy cannot type a lambda with a default
                        EvaluationEvent("progress", backend=name, round=round_index, phase=event.get("phase"))),
                )
                run.put(round=round_index)
                if self.budget is not None and run_budget is not None:
                    self.budget.explain_overrun(name, run, run_budget, self.options.timeout_s)
                entry.runs.append(run)
                if self.budget is None or not self.budget.cut_short(name, entry, run):
                    # launch ends every run with a status both vocabularies share (never "running")
                    entry.put(status=BackendStatus(run.status), error=run.error)
                if self.budget is not None:
                    self.budget.record_run(name, run)
                self.save()
                self._eta([n for n in order if backends[n].status in STILL_RUNNING])
                self.on_event(EvaluationEvent("done", backend=name, round=round_index, run=run))
                if run.status == RunStatus.INTERRUPTED:
                    raise KeyboardInterrupt
                if name == reference and round_index == 0 and run.error is not None \
                        and failures.is_app_failure(run.error) and self.options.script is None:
                    self._stop_for_app_failure(name, run.error, order)
        if self.options.script is not None:
            self._script_reference(order)

    def _script_reference(self, order: list[str]) -> None:
        """Script mode: each backend runs the script in an environment of its
        own, with its own device string, so a failure on the reference may be
        its device's alone (a script that cannot parse ``xla:0``): the other
        backends were measured all the same, and the first of them that ran
        becomes the reference, which the result says.  When none ran and the
        reference's failure is the script's own, it is the script's bug."""
        backends = self.backends
        reference = self.document.reference
        if reference is None or any(run.status == RunStatus.OK for run in backends[reference].runs):
            return
        error = backends[reference].error
        ran = [name for name in order if any(run.status == RunStatus.OK for run in backends[name].runs)]
        if not ran:
            if error is not None and failures.is_app_failure(error):
                raise AppFailed(error.message or "the script failed", location=error.location, kind=error.kind)
            return
        self.document.put(reference=ran[0])
        what = f"{error.kind}: {error.message}" if error is not None else "no result: "
        note = f"the reference {reference} did not run the script ({what}); comparing with {ran[0]} instead"
        previous = self.document.reference_note
        self.document.put(reference_note=f"{previous}; {note}" if previous else note)

    def _eta(self, active: list[str], running: str | None = None) -> None:
        """Tell the display how long the plan still expects (overall and per backend)."""
        if self.budget is not None:
            overall, per_backend = self.budget.eta(active)
            if overall is not None:
                self.on_event(EvaluationEvent("eta", seconds=overall, per_backend=per_backend, running=running))

    def _stop_for_app_failure(self, reference: str, error: ErrorRecord, order: list[str]) -> None:
        """The reference failed in the app's own code: every backend would say
        the same, so the evaluation stops here and the user fixes the app."""
        for other in order:
            entry = self.backends[other]
            if entry.status == BackendStatus.PENDING:
                entry.put(status=BackendStatus.SKIPPED, reason=f"the app failed on the reference backend {reference}")
        raise AppFailed(error.message, location=error.location, kind=error.kind)


class AppFailed(UserError):
    """The app failed on the reference backend: its own bug, exit status 2."""
