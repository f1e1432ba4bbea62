"""From a traced worker run to the ``trace`` section of the result document.

``trace_app`` starts the tracing worker (``torchport.trace.job``) on the ``cpu``
backend and turns whatever it saved (all steps, or the steps done before a
timeout) into the section: findings, op support per target, memory fit and a
verdict per target.  ``torchport trace --format json`` writes the same object (``trace_app(...).to_dict()``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from torchport.errors import UserError
from torchport.limits import TRACE_TIMEOUT_S
from torchport.records import (ErrorRecord, EvaluationLine, EvaluationSummary, Finding, OpStatus, RunRecord, RunStatus,
                               TargetOpSupport, TracedEvaluation, TracedOp, TraceConstruction, TraceSection,
                               TraceSeverity, TraceShapes, TraceStatus, TraceTotals, WorkerTrace)
from torchport.trace import findings as finding_rules
from torchport.trace import memory, support, verdict
from torchport.trace.findings import RuleId
from torchport.trace.device_apis import merge_with_scan

if TYPE_CHECKING:
    from torchport.app import AppSpec

TRACE_JOB = "torchport.trace.job:trace_job"
SECTION_VERSION = "1"


def trace_app(app: AppSpec | str | None, *, steps: int = 3, targets: list[str] | None = None,
              timeout: float = TRACE_TIMEOUT_S, allow_live: bool = True, seed: int = 0,
              on_progress: Callable[[dict[str, Any]], None] | None = None) -> TraceSection:
    """Trace the app in a worker and build the section.  A UserError only when
    the app is at fault and nothing was traced."""
    from torchport.app import as_spec, preflight
    from torchport.launch import run_worker

    targets = validate_targets(targets)
    if steps < 1:
        raise UserError(f"--steps must be at least 1, got {steps}")
    if timeout <= 0:
        raise UserError(f"--timeout must be positive, got {timeout}")
    spec = preflight(as_spec(app))
    run = run_worker("cpu", TRACE_JOB, app=spec, config={"steps": steps, "seed": seed}, timeout=timeout,
                     on_progress=on_progress)
    return trace_section(run, spec.text, targets, allow_live=allow_live)


def validate_targets(targets: list[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(targets or finding_rules.TARGETS))
    unknown = [t for t in chosen if t not in support.TARGETS]
    if unknown:
        raise UserError(f"unknown target {unknown[0]!r} (known: {', '.join(support.TARGETS)})")
    return chosen


# The keys of a section, in the order written: of a trace that saw ops, and of one that saw none.
TRACED_KEYS = ("version", "status", "reason", "error", "app", "steps_requested", "steps_traced", "steps_rule", "torch",
               "targets", "phase_locations", "findings", "shapes", "memory", "op_support", "device_apis", "app_scan",
               "verdicts", "totals", "host_syncs", "ops", "xla_comparison", "construction", "evaluation", "contract")
UNTRACED_KEYS = (*TRACED_KEYS[:TRACED_KEYS.index("findings")], "findings", "verdicts", "op_support", "memory", "shapes",
                 "ops", "totals", "xla_comparison", "construction", "contract", "evaluation", "device_apis")


def trace_section(run: RunRecord, app: str, targets: list[str], allow_live: bool = True) -> TraceSection:
    """The section of a tracing worker's run: the worker's JSON answer is read into its record here, once."""
    trace = WorkerTrace.from_dict(run.extra.get("trace") or {})
    error = run.error
    steps_done = trace.steps_done
    traced_anything = bool(trace.ops)
    if run.status == RunStatus.OK:
        status, reason = TraceStatus.COMPLETE, None
    elif traced_anything:
        status = TraceStatus.PARTIAL
        reason = (f"{_error_text(error)}; kept what was traced: {steps_done} complete step(s) of "
                  f"{trace.steps_requested}" + ("" if steps_done == trace.steps_requested else
                                                       ", and the ops of the step in progress"))
    else:
        status, reason = TraceStatus.FAILED, _error_text(error)
    section = TraceSection(version=SECTION_VERSION, status=status, reason=reason, error=error, app=app,
                           steps_requested=trace.steps_requested, steps_traced=steps_done,
                           steps_rule=trace.stopped, torch=trace.torch, targets=targets,
                           phase_locations=trace.phase_locations, device_apis=trace.device_apis)
    if not traced_anything:
        section.key_order = UNTRACED_KEYS
        return section
    section.key_order = TRACED_KEYS
    ops = trace.ops
    steps_done = max(1, steps_done)
    section.op_support = support.op_support([r.op for r in ops if runs_on_device(r)], targets, allow_live=allow_live)
    section.findings = finding_rules.rank(finding_rules.detect(trace, targets)
                                          + support_findings(ops, section.op_support, steps_done))
    section.shapes = _shapes(trace)
    section.memory = memory.memory_section(trace.memory, targets)
    # Device-typed API calls seen at run time, under scan's rules (evaluate adds scan's own findings).
    section.app_scan = merge_with_scan(None, section.device_apis)
    section.verdicts = verdict.verdicts(section, targets)
    section.totals = _totals(ops, steps_done)
    section.host_syncs = trace.host_syncs
    section.ops = sorted(ops, key=lambda r: (-(r.flops or 0), -r.count, r.op))
    section.construction = construction_summary(trace.construction)
    section.evaluation = evaluation_summary(trace.evaluation)
    section.contract = finding_rules.contract_notes(trace.construction)
    return section


EVALUATION_CRITERION = (
    "a stretch of ops run with autograd off (torch.no_grad, torch.inference_mode) or with the trained model in "
    "eval mode, outside backward and the optimizer step, in which the trained model's forward ran, and later calls "
    "on the tensors it produced; a stretch without the model's forward (gradient clipping, an EMA update) is the "
    "step's")
MAX_EVALUATION_LOCATIONS = 20


def evaluation_summary(evaluation: TracedEvaluation | None) -> EvaluationSummary | None:
    """Evaluation and sampling the traced iterations ran outside the training
    step, per user line: reported apart, counted in no finding, table or prediction."""
    ops = evaluation.ops if evaluation else []
    syncs = evaluation.host_syncs if evaluation else []
    if not evaluation or (not ops and not syncs):
        return None
    lines: dict[str | None, EvaluationLine] = {}
    names: dict[str | None, set[str]] = {}
    for record in ops:
        lines.setdefault(record.location, EvaluationLine(location=record.location)).op_calls += record.count
        names.setdefault(record.location, set()).add(record.op)
    for sync in syncs:
        lines.setdefault(sync.location, EvaluationLine(location=sync.location)).host_syncs += sync.count
    for location, line in lines.items():
        line.ops = len(names.get(location, ()))
    ranked = sorted(lines.values(), key=lambda e: (-e.op_calls, -e.host_syncs, str(e.location)))
    return EvaluationSummary(op_calls=sum(r.count for r in ops), distinct_ops=len({r.op for r in ops}),
                             host_syncs=sum(r.count for r in syncs),
                             steps=sorted({step for r in ops for step in r.steps}),
                             model_calls=evaluation.model_calls[:MAX_EVALUATION_LOCATIONS],
                             locations=ranked[:MAX_EVALUATION_LOCATIONS], locations_total=len(ranked),
                             criterion=EVALUATION_CRITERION)


def construction_summary(construction: TraceConstruction | None) -> TraceConstruction | None:
    """What the section keeps of construction (``torchport.trace.construction``):
    dtypes, dtype changes and DataLoaders with their lines; the per-module
    sites are read by the findings and counted here (a library model has thousands)."""
    if not construction:
        return None
    kept = TraceConstruction.from_dict(construction.to_dict())
    kept.modules = {}
    kept.key_order = tuple(key for key in kept.key_order or () if key != "modules")  # not written: counted instead
    return kept.put(modules_recorded=len(construction.modules))


def runs_on_device(record: TracedOp) -> bool:
    """Whether an op of the trace would run on the target device.  Not the data
    pipeline (host side), and not a value read that torch's own code did with no
    user frame on the stack: torch.optim keeps its step counters on the CPU and
    reads them with .item() on every device."""
    if record.phase == "data":
        return False
    return not (record.in_host_sync_call and record.attributed == "phase")


@dataclass
class _UnsupportedAt:
    """The fallback or missing ops one user line issued, gathered into one finding."""

    ops: set[str] = field(default_factory=set)
    targets: dict[str, TraceSeverity] = field(default_factory=dict)
    why: set[str] = field(default_factory=set)
    count: int = 0
    seen: set[int] = field(default_factory=set)  # the op records counted, by id


def support_findings(ops: list[TracedOp], op_support: dict[str, TargetOpSupport], steps: int) -> list[Finding]:
    """Fallback / missing ops as findings at the user lines that issued them."""
    grouped: dict[tuple[RuleId, str | None], _UnsupportedAt] = {}
    for record in ops:
        # Host syncs and data-dependent shapes have findings of their own
        # (TR101, TR102); their CPU fallbacks still count in the verdicts.
        if not runs_on_device(record) or record.in_host_sync_call or record.tags:
            continue
        for target, answer in op_support.items():
            row = answer.ops.get(record.op)
            if not row or row.status not in (OpStatus.FALLBACK, OpStatus.MISSING):
                continue
            rule = RuleId.OP_FALLBACK if row.status == OpStatus.FALLBACK else RuleId.OP_MISSING
            item = grouped.setdefault((rule, record.location), _UnsupportedAt())
            item.ops.add(record.op)
            item.targets[target] = finding_rules.RULES[rule].severity[target]
            item.why.add(f"{target}: {row.why}")
            if id(record) not in item.seen:
                item.seen.add(id(record))
                item.count += record.count
    found: list[Finding] = []
    for (rule, location), item in grouped.items():
        names = sorted(item.ops)
        found.append(finding_rules.make_finding(finding_rules.RULES[rule], location, item.count, steps,
                                                f"{', '.join(names)} on {', '.join(sorted(item.targets))} "
                                                f"({'; '.join(sorted(item.why))})", item.targets, ops=names))
    return found


def _shapes(trace: WorkerTrace) -> TraceShapes:
    signatures = trace.data_scan.signatures if trace.data_scan else []
    return TraceShapes(signatures=len(signatures) or len(set(trace.step_batches)),
                       batches_scanned=trace.data_scan.batches if trace.data_scan else None,
                       complete_epoch=trace.data_scan.complete_epoch if trace.data_scan else None,
                       varying=finding_rules.varying_dims(signatures) if len(signatures) > 1 else [],
                       step_batches=trace.step_batches,
                       distinct_step_graphs=len({g.graph for g in trace.step_graphs}),
                       distinct_optimizer_graphs=len(set(trace.optimizer_graphs)) or None)


def _totals(ops: list[TracedOp], steps: int) -> TraceTotals:
    known = [r.flops for r in ops if r.flops is not None]
    return TraceTotals(
        op_calls_per_step=round(sum(r.count for r in ops) / steps, 1),
        distinct_ops=len({r.op for r in ops}),
        flops_per_step=sum(known) / steps,
        flops_note="PyTorch's FLOP counter (torch.utils.flop_counter): matmuls, convolutions, attention; "
                   "elementwise ops count 0",
        bytes_per_step=sum(r.bytes_read + r.bytes_written for r in ops) / steps,
    )


def _error_text(error: ErrorRecord | None) -> str:
    if error is None:
        return "the tracing worker stopped without a result"
    where = f"{error.location}: " if error.location else ""
    return f"{where}{error.message}"


def raise_if_app_failed(section: TraceSection) -> None:
    """Nothing traced because of the app's own code: one line, naming the
    user's line (exit 2).  A tracing worker that crashed or timed out is not
    the app's fault: the caller reports it and exits 1."""
    from torchport.failures import is_app_failure

    error = section.error
    if section.status == TraceStatus.FAILED and (error is None or is_app_failure(error)):
        raise UserError((error.message if error else "") or section.reason or "tracing failed",
                        location=error.location if error else None)
