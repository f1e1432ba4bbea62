"""The trace's graph predictions against what torch.compile measured.

The trace predicts, from one CPU process, what a compiler will meet: a
data-dependent branch (TR104) or a host read (TR101) or a data-dependent
shape (TR102) at a line, input shapes that change (TR103).  A ``*-compile``
backend's run measured what Dynamo did (``torchport.dynamo_counters``): graph
breaks with the user's line, recompilations with the failed guard.  Each such
finding is set against those counts, per backend:

* ``confirmed``: Dynamo broke the graph at the finding's line (TR101, TR102),
  or recompiled on a failed size guard (TR103); for TR104 (which names the
  first op that differs, inside the branch) a data-dependent-branch graph break
  in the same file, or a recompilation on another guard (a branch on a Python
  value);
* ``refuted``: the run compiled with no graph break and no recompilation at
  all, over the steps it ran (for TR103 only when the run met more than one
  batch shape);
* ``not exercised``: TR103 when the measured run met one batch shape only;
* ``unconfirmed``: Dynamo broke or recompiled, but not at this line.

Graph breaks Dynamo reported at lines no finding names are listed too
(``unpredicted_breaks``): what the trace missed.  Needs no torch.
"""
from __future__ import annotations


from torchport.records import (BackendEntry, CompileJudgement, CompileMeasured, CompileVerdict, DynamoCounts, Finding, GraphBreak, RecompileCause, RunRecord,
                               RunStatus, TorchCompileComparison, TraceSection)
from torchport.trace.findings import RuleId

PHASES = ("first_step", "warmup", "sustained")
GRAPH_RULES = (RuleId.HOST_SYNC, RuleId.DYNAMIC_OUTPUT_SHAPE, RuleId.INPUT_SHAPES_VARY, RuleId.GRAPH_VARIES)
SIZE_GUARD = "size mismatch"


def _phases(run: RunRecord) -> dict[str, DynamoCounts]:
    """The Dynamo counts of each phase of a run that has them (the run's raw samples, read as written)."""
    counters = run.training.counters if run.training else {}
    found = {}
    for phase in PHASES:
        dynamo = (counters.get(phase) or {}).get("torch_compile") or {}
        if "frames_compiled" in dynamo:
            found[phase] = DynamoCounts.from_dict(dynamo)
    return found


def _steps(run: RunRecord) -> int:
    training = run.training
    if training is None:
        return 1
    return 1 + training.warmup.steps + (training.sustained.steps() if training.sustained else 0)


def _judge(finding: Finding, breaks: list[GraphBreak], recompiles: list[RecompileCause],
           shapes_met: int | None) -> tuple[CompileVerdict, str]:
    lines = {line for line in (finding.location, *(finding.seen_at or [])) if line}
    if finding.id == RuleId.INPUT_SHAPES_VARY:
        sized = [r for r in recompiles if SIZE_GUARD in (r.guard or "")]
        if sized:
            return CompileVerdict.CONFIRMED, f"recompiled on a failed size guard: {sized[0].guard}"
        if shapes_met is not None and shapes_met <= 1:
            return CompileVerdict.NOT_EXERCISED, "the measured run met one batch shape only"
        if not recompiles:
            return CompileVerdict.REFUTED, f"no recompilation although the run met {shapes_met} batch shapes"
        return CompileVerdict.UNCONFIRMED, f"{len(recompiles)} recompilation(s), none on a size guard"
    at_line = [b for b in breaks if b.location in lines]
    if at_line:
        return CompileVerdict.CONFIRMED, f"graph break at this line: {at_line[0].reason}"
    if finding.id == RuleId.GRAPH_VARIES:
        # The trace names the first op that differs (inside the branch); Dynamo
        # names the branch itself: a data-dependent branch in the same file.
        files = {line.rsplit(":", 1)[0] for line in lines}
        branches = [b for b in breaks if (b.location or "").rsplit(":", 1)[0] in files
                    and (b.reason or "").lower().startswith("data-dependent")]
        if branches:
            return CompileVerdict.CONFIRMED, f"graph break at {branches[0].location}: {branches[0].reason}"
        other_guards = [r for r in recompiles if SIZE_GUARD not in (r.guard or "")]
        if other_guards:
            return CompileVerdict.CONFIRMED, f"recompiled: {other_guards[0].guard}"
    if not breaks and not recompiles:
        return CompileVerdict.REFUTED, "no graph break and no recompilation"
    return CompileVerdict.UNCONFIRMED, "Dynamo broke or recompiled elsewhere, not at this line"


def compare_with_torch_compile(section: TraceSection,
                               measured: dict[str, BackendEntry]) -> TorchCompileComparison | None:
    """Per ``*-compile`` backend of ``measured`` that ran: its measured Dynamo
    totals and a judgement for each graph finding of the trace; None when no
    backend recorded torch.compile counters."""
    findings = [f for f in section.findings if f.id in GRAPH_RULES]
    backends: dict[str, CompileMeasured] = {}
    for name, backend in measured.items():
        run = next((r for r in backend.runs if r.status == RunStatus.OK and _phases(r)), None)
        if run is None:
            continue
        phases = _phases(run)
        breaks = [site for dynamo in phases.values() for site in dynamo.graph_break_sites]
        recompiles = [item for dynamo in phases.values() for item in dynamo.recompilation_causes]
        logged = all(dynamo.graph_breaks is not None for dynamo in phases.values())
        shapes_met = run.training.distinct_batch_shapes if run.training else None
        judged = []
        for finding in findings:
            verdict, evidence = _judge(finding, breaks, recompiles, shapes_met) if logged else (
                CompileVerdict.UNCONFIRMED, "Dynamo's graph-break and recompile logs were not captured")
            judged.append(CompileJudgement(id=finding.id, location=finding.location, verdict=verdict, evidence=evidence))
        predicted_lines = {line for f in findings for line in (f.location, *(f.seen_at or []))}
        backends[name] = CompileMeasured(
            steps=_steps(run),
            frames_compiled=sum(d.frames_compiled for d in phases.values()),
            graph_breaks=sum(d.graph_breaks or 0 for d in phases.values()) if logged else None,
            recompilations=sum(d.recompilations or 0 for d in phases.values()) if logged else None,
            sustained_frames_compiled=phases["sustained"].frames_compiled if "sustained" in phases else None,
            findings=judged,
            unpredicted_breaks=[GraphBreak(location=b.location, reason=b.reason) for b in breaks
                                if b.location not in predicted_lines][:20],
        )
    return TorchCompileComparison(backends=backends) if backends else None
