"""One verdict per target, and the check of the prediction against a real xla run.

A verdict is one of:

* ``runs``: "runs as is": every traced op was looked up and is supported, and
  no finding slows or blocks the target;
* ``slow``: "runs with N fallbacks / M recompilations (slow)";
* ``blocked``: "blocked by ..." (a blocker finding, or a step larger than every
  chip of the target);
* ``unknown``: nothing blocks in the trace, but op support could not be looked
  up (the backend is not installed and publishes no op list).
"""
from __future__ import annotations


from torchport import glossary
from torchport.records import (BackendEntry, CounterRun, Finding, OpStatus, RecompilingRun, TargetOpSupport, TargetVerdict, TraceSection,
                               TraceSeverity, TraceVerdictStatus, XlaComparison, XlaMeasured, XlaPrediction)
from torchport.trace.findings import LAZY_TARGETS, SEVERITY_RANK, RuleId

# Python asking for a device value (.item(), float(), if tensor:): counted by
# torch_xla like a CPU fallback.  torchport's own loss reads happen outside
# every phase window and are recorded apart (training.loss_reads), so every one
# counted inside a phase is the app's.
HOST_SYNC_OP = "aten::_local_scalar_dense"


def step_graph_variants(section: TraceSection) -> int:
    """Distinct step graphs in steady training: one per batch signature, more
    when the graph changes with the same shapes.  More than one means an
    XLA-style backend keeps recompiling."""
    graphs = max(1, (section.shapes.signatures if section.shapes else None) or 1)
    changes = [f for f in section.findings if f.id == RuleId.GRAPH_VARIES]
    return graphs + sum(f.count for f in changes)


def graph_cuts_per_step(section: TraceSection) -> int:
    """Places in one step where a lazy backend must run what is pending: each
    host read (TR101) and each data-dependent-shape op (TR102) the trace found
    cuts the step graph, and the piece before it is a graph of its own."""
    return round(sum(f.per_step or 0 for f in section.findings
                     if f.id in (RuleId.HOST_SYNC, RuleId.DYNAMIC_OUTPUT_SHAPE) and "xla" in f.targets))


def predicted_compilations(section: TraceSection) -> int:
    """Graphs an XLA-style backend compiles in a run: the step graph variants,
    plus one when the optimizer's first step differs from the next (it
    creates its state then; on a lazy backend the optimizer is part of the
    step graph), which is compiled once and is no recompilation, plus one
    per graph cut in a step (:func:`graph_cuts_per_step`)."""
    optimizer_variants = max(1, (section.shapes.distinct_optimizer_graphs if section.shapes else None) or 1)
    return step_graph_variants(section) + optimizer_variants - 1 + graph_cuts_per_step(section)


def verdicts(section: TraceSection, targets: list[str]) -> dict[str, TargetVerdict]:
    """The verdict on each target."""
    return {name: target_verdict(name, section) for name in targets}


def target_verdict(name: str, section: TraceSection) -> TargetVerdict:
    findings = [f for f in section.findings if name in f.targets]
    support = section.op_support.get(name) or TargetOpSupport()
    rows = support.ops
    fallbacks = sorted(op for op, row in rows.items() if row.status == OpStatus.FALLBACK)
    unknown = sorted(op for op, row in rows.items() if row.status == OpStatus.UNKNOWN)
    recompilations = step_graph_variants(section) - 1 if name in LAZY_TARGETS else 0
    blockers = [f for f in findings if f.targets[name] == TraceSeverity.BLOCKER]
    slow = [f for f in findings if f.targets[name] == TraceSeverity.SLOW]
    chips = [c for c in (section.memory.chips if section.memory else []) if name in c.targets]
    too_big = bool(chips) and not any(c.fits for c in chips)

    scan_target = glossary.trace_to_scan(name)
    scanned = [f for f in (section.app_scan.findings if section.app_scan else [])
               if scan_target and f.severity.get(scan_target) in ("error", "silent")]
    verdict = TargetVerdict(fallbacks=len(fallbacks), fallback_ops=fallbacks, recompilations=recompilations,
                            blockers=len(blockers) + int(too_big), slow_findings=len(slow), unknown_ops=len(unknown),
                            op_support=support.kind)
    # Said with every verdict whose table names its own source (TorchTPU's).
    source = f" [{support.summary}]" if support.summary else ""
    if blockers or too_big:
        causes = [f"{f.title} ({_where(f)})" for f in blockers]
        if too_big:
            largest = max(chips, key=lambda c: c.hbm_bytes)
            peak = section.memory.peak_bytes if section.memory else 0
            causes.append(f"memory: the step needs about {_gib(peak)}, more than the largest chip "
                          f"({largest.chip}, {largest.hbm})")
        verdict.status = TraceVerdictStatus.BLOCKED
        verdict.text = "blocked by " + causes[0] + (f" and {len(causes) - 1} more" if len(causes) > 1 else "") + source
    elif fallbacks or recompilations or slow:
        parts = []
        if fallbacks:
            parts.append(f"{len(fallbacks)} fallback{'s' if len(fallbacks) != 1 else ''}")
        if recompilations:
            parts.append(f"{recompilations} recompilation{'s' if recompilations != 1 else ''}")
        counted = (RuleId.INPUT_SHAPES_VARY, RuleId.GRAPH_VARIES, RuleId.OP_FALLBACK)  # in the counts already
        others = sorted({f.title for f in slow if f.id not in counted})
        text = "runs with " + " / ".join(parts) if parts else "runs"
        if others:
            text += ("; " if parts else ", with ") + "; ".join(others)
        text += " (slow)"
        if unknown:
            text += f"; op support unknown for {len(unknown)} op(s) ({support.note or 'not looked up'})"
        verdict.status, verdict.text = TraceVerdictStatus.SLOW, text + source
    elif unknown:
        verdict.status = TraceVerdictStatus.UNKNOWN
        verdict.text = (f"no blocker found in the trace; op support unknown for {len(unknown)} "
                        f"op(s) ({support.note or support.source or 'not looked up'})")
    else:
        minor = [f for f in findings if f.targets[name] == TraceSeverity.MINOR]
        head = "no blocker in the trace" if scanned else "runs as is"
        verdict.status = TraceVerdictStatus.RUNS
        verdict.text = head + (f" ({len(minor)} minor finding{'s' if len(minor) != 1 else ''})" if minor else "") + source
    if scanned and scan_target:  # scanned: found for scan_target
        first = scanned[0]
        verdict.scan_findings = [f"{f.id} at {f.location}" for f in scanned]
        ran = sum(1 for f in scanned if f.seen_at_run_time)
        source = ("scan of the app's files" if section.app_scan and section.app_scan.files
                  else "device-typed APIs seen at run time")
        verdict.text += (f"; {source}: {len(scanned)} finding{'s' if len(scanned) != 1 else ''} "
                         f"{first.severity[scan_target]} here"
                         + (f" ({ran} seen at run time)" if ran and source.startswith("scan") else "")
                         + f", first {first.id} {first.title} at {first.location}")
    return verdict


def _where(finding: Finding) -> str:
    return finding.location or "no user location"


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


# ---- prediction vs. a measured xla run ------------------------------------------------------------


def measured_xla(backend: BackendEntry | None) -> XlaMeasured | None:
    """The xla backend's counters over all phases of each successful run, and
    torchport's own loss reads (outside the phase windows) apart: computed
    into the backend's summary (torchport.summary.counter_totals)."""
    per_run = (backend.summary.counter_runs if backend and backend.summary else None) or []
    if not per_run:
        return None
    return XlaMeasured(runs=len(per_run), per_run=list(per_run))


def _per_step(findings: list[Finding], rule: RuleId) -> float:
    return sum(f.per_step or 0 for f in findings if f.id == rule and "xla" in f.targets)


def compare_with_xla(section: TraceSection, backends: dict[str, BackendEntry]) -> XlaComparison | None:
    """Side by side: what the trace predicts for torch_xla and what the xla
    backend of ``backends`` measured, over all phases.  Any measured count
    above the prediction is a disagreement, listed with its likely cause."""
    measured = measured_xla(backends.get("xla"))
    if measured is None:
        return None
    findings = section.findings
    rows = (section.op_support.get("xla") or TargetOpSupport()).ops
    predicted_ops = sorted({name for row in rows.values() for name in row.falls_back_as or []
                            if row.status == OpStatus.FALLBACK})
    compilations = predicted_compilations(section)
    syncs_per_step = _per_step(findings, RuleId.HOST_SYNC)
    dynamic_per_step = _per_step(findings, RuleId.DYNAMIC_OUTPUT_SHAPE)
    dynamic_lines = sorted({f.location for f in findings if f.id == RuleId.DYNAMIC_OUTPUT_SHAPE and f.location})
    sync_lines = sorted({f.location for f in findings if f.id == RuleId.HOST_SYNC and f.location})
    # Each host sync and each data-dependent-shape op runs what is pending: one more execution.
    executions_per_step = 1 + syncs_per_step + dynamic_per_step
    disagreements: list[str] = []
    measured_ops = sorted({op for run in measured.per_run for op in run.fallback_ops})
    for op in measured_ops:
        if op not in predicted_ops and op != HOST_SYNC_OP:
            disagreements.append(f"{op} fell back to the CPU on xla but the trace did not predict it")
    for op in predicted_ops:
        if op not in measured_ops:
            disagreements.append(f"the trace predicted a CPU fallback of {op} but the xla run executed none")
    recompiling: list[RecompilingRun] = []
    for index, run in enumerate(measured.per_run, 1):
        steps = run.steps or 0
        cause = _likely_cause(run, section, dynamic_lines, sync_lines)
        if run.compilations > compilations:
            disagreements.append(f"run {index}: compiled {run.compilations} graphs "
                                 f"({_phase_counts(run.compilations_per_phase)}; {run.compile_time_s:.2f} s of "
                                 f"compiling), the trace predicted {compilations}: {cause}")
        elif compilations > 1 and run.compilations < compilations:
            disagreements.append(f"run {index}: predicted {compilations} step graphs, measured {run.compilations} "
                                 "compilations")
        predicted_syncs = round(syncs_per_step * steps)
        if run.app_host_syncs > predicted_syncs:
            disagreements.append(f"run {index}: the app's own host syncs ({HOST_SYNC_OP}) ran {run.app_host_syncs} "
                                 f"times in {steps} steps, the trace predicted {predicted_syncs} "
                                 "(torchport's own loss reads are outside these counts)")
        predicted_executions = round(executions_per_step * steps)
        if run.executions > predicted_executions:
            disagreements.append(f"run {index}: {run.executions} graph executions in {steps} steps, the trace "
                                 f"predicted {predicted_executions} ({executions_per_step:g} per step): {cause}")
        if run.warmup_blocks_compiling > 1 or run.sustained_compilations:
            recompiling.append(RecompilingRun(run=index, warmup_compilations=run.compilations_per_phase["warmup"],
                                              warmup_blocks_compiling=run.warmup_blocks_compiling,
                                              warmup_blocks=run.warmup_blocks,
                                              warmup_compile_time_s=run.warmup_compile_time_s,
                                              sustained_compilations=run.sustained_compilations))
    return XlaComparison(
        predicted=XlaPrediction(fallback_ops=predicted_ops, step_graphs=compilations,
                                host_syncs_per_step=syncs_per_step, data_dependent_ops_per_step=dynamic_per_step,
                                executions_per_step=executions_per_step),
        measured=measured,
        recompiling=recompiling,
        disagreements=disagreements,
        agrees=not disagreements,
        rules="over all phases (first step, warm-up, sustained): fallback ops must match as sets; compilations, "
              "executions and the app's host syncs must not exceed the prediction (torchport's own loss reads are "
              "read outside the phase windows and counted apart); a warm-up that compiles in more than one block "
              "is recompiling",
    )


def _phase_counts(per_phase: dict[str, int]) -> str:
    return ", ".join(f"{count} in {phase.replace('_', ' ')}" for phase, count in per_phase.items())


def _likely_cause(run: CounterRun, section: TraceSection, dynamic_lines: list[str], sync_lines: list[str]) -> str:
    """Why a run compiled or executed more than predicted, from what was measured and traced."""
    causes = []
    if "aten::nonzero" in run.fallback_ops or dynamic_lines:
        where = f" at {', '.join(dynamic_lines)}" if dynamic_lines else ""
        causes.append(f"data-dependent shapes{where} (aten::nonzero x{run.fallback_ops.get('aten::nonzero', 0)}: "
                      "one graph per distinct size of the selection)")
    predicted_shapes = max(1, (section.shapes.signatures if section.shapes else None) or 1)
    if (run.distinct_batch_shapes or 1) > predicted_shapes:
        causes.append(f"changing input shapes ({run.distinct_batch_shapes} distinct batch shapes measured, "
                      f"{predicted_shapes} traced)")
    if run.app_host_syncs:
        where = f" at {', '.join(sync_lines)}" if sync_lines else ""
        causes.append(f"host syncs{where} ({HOST_SYNC_OP} x{run.app_host_syncs}: each cuts the graph)")
    return "; ".join(causes) or "cause not identified from the counters"


def worst(verdicts: dict[str, TargetVerdict]) -> str:
    order = list(TraceVerdictStatus)
    return min((v.status for v in verdicts.values()), key=lambda status: order.index(TraceVerdictStatus(status)),
               default=TraceVerdictStatus.RUNS)


__all__ = ["target_verdict", "verdicts", "compare_with_xla", "predicted_compilations", "SEVERITY_RANK", "worst"]
