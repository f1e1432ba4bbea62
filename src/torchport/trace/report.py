"""Rendering of the ``trace`` section: ``markdown(section)`` for report.md (the
evaluate report calls it), ``terminal_lines(section)`` for ``torchport trace``."""
from __future__ import annotations

import os
from typing import Any

from torchport import formatting as fmt
from torchport.records import (Finding, TargetOpSupport, TorchCompileComparison, TraceSection, TraceSeverity, TraceStatus,
                               XlaComparison)
from torchport.trace.support import TARGETS, SupportKind

SEVERITY_MARK = {TraceSeverity.BLOCKER: "BLOCKER", TraceSeverity.SLOW: "slow", TraceSeverity.MINOR: "minor"}


def short_location(location: str | None) -> str:
    """A path relative to the working directory when that is shorter."""
    if not location:
        return "(no user location)"
    path, _, line = location.rpartition(":")
    try:
        relative = os.path.relpath(path)
    except ValueError:
        relative = path
    return f"{relative if len(relative) < len(path) else path}:{line}"


def where_text(finding: Finding, code: Any = str) -> str:
    """Where a finding is caused: the user's line, or the library's line and the
    user's (or the hf: spec's) line that reached it; ``code`` renders a path
    (``fmt.md_code`` in markdown)."""
    entry = code(short_location(finding.location))
    if finding.library_location:
        entry = f"{code(finding.library_location)} (inside {finding.library}), reached from {entry}"
    seen = finding.seen_at or []
    if seen:
        # The location is the construction line that caused it; the step lines follow.
        entry += f" (caused here; seen at {', '.join(code(short_location(s)) for s in seen[:3])}" \
                 f"{', ...' if len(seen) > 3 else ''})"
    return entry


def contract_lines(section: TraceSection, code: Any = str, text: Any = str) -> list[str]:
    """Departures from the app contract, each at its line (``text`` escapes
    the note in markdown)."""
    return [text(note.text) + (f" ({code(short_location(note.location))})" if note.location else "")
            for note in section.contract]


def evaluation_text(section: TraceSection, code: Any = str) -> str | None:
    """The evaluation and sampling kept out of the step, in one sentence."""
    evaluation = section.evaluation
    if not evaluation:
        return None
    places = ", ".join(f"{code(short_location(e.location))} ({e.op_calls} ops"
                       + (f", {e.host_syncs} host reads" if e.host_syncs else "") + ")"
                       for e in evaluation.locations[:5])
    more = evaluation.locations_total - min(5, len(evaluation.locations))
    steps = ", ".join(map(str, evaluation.steps))
    calls = ", ".join(f"{code(short_location(c.location))} ({c.count}x)" for c in evaluation.model_calls)
    return (f"evaluation/sampling in the first iterations: {evaluation.op_calls} ops"
            + (f" and {evaluation.host_syncs} host reads" if evaluation.host_syncs else "")
            + (f" in step {steps}" if steps else "") + (f", the model called at {calls}" if calls else "")
            + f"; at {places}" + (f" and {more} more lines" if more > 0 else "") + ", not counted in the step")


def device_api_lines(section: TraceSection, code: Any = str, text: Any = str) -> list[str]:
    """Device-typed API calls seen at run time, under scan's rule ids, each at its line."""
    return [f"{call.id} {text(call.title)} at {code(short_location(call.location))}: "
            f"{code(call.call)} ran {call.count}x" for call in section.device_apis]


def _targets_text(finding: Finding) -> str:
    return ", ".join(f"{t}" + (f" ({s})" if s != finding.severity else "") for t, s in finding.targets.items())


def verdict_lines(section: TraceSection) -> list[str]:
    return [f"{TARGETS[name].title}: {v.text}" for name, v in section.verdicts.items()]


def terminal_lines(section: TraceSection, top: int = 10) -> list[str]:
    """``torchport trace``'s text: of the section as built, or as written."""
    lines = [f"torchport trace {section.app}: {section.steps_traced} step(s) traced on the CPU "
             f"(torch {section.torch}), status {section.status}"]
    if section.reason:
        lines.append(f"  note: {section.reason}")
    if section.status == TraceStatus.FAILED:
        return lines
    lines.append("")
    lines.append("Verdicts:")
    lines += [f"  {line}" for line in verdict_lines(section)]
    found = section.findings
    lines += [f"  contract: {line}" for line in contract_lines(section)]
    evaluation = evaluation_text(section)
    if evaluation:
        lines += ["", f"Kept apart: {evaluation}."]
    devices = device_api_lines(section)
    if devices:
        lines += ["", "Device-typed APIs seen at run time (scan's rules; `torchport scan` explains them):"]
        lines += [f"  {line}" for line in devices]
    lines.append("")
    if not found:
        lines.append("Findings: none.")
    else:
        lines.append(f"Findings ({len(found)}; top {min(top, len(found))}):")
        for f in found[:top]:
            lines.append(f"  {f.id} {SEVERITY_MARK[TraceSeverity(f.severity)]:7} {where_text(f)}: {f.title}")
            lines.append(f"      {f.detail}")
            lines.append(f"      targets: {_targets_text(f)}; fix: {f.fix}")
    mem = section.memory
    if mem:
        fits = [c.chip for c in mem.chips if c.fits]
        lines += ["", f"Memory (estimate): {fmt.size(mem.peak_bytes)} per step; fits on "
                      f"{', '.join(fits) if fits else 'none of the catalogued chips'}"]
    lines += ["", "Op support sources: " + "; ".join(
        f"{name}: {_source_text(answer)}" for name, answer in section.op_support.items())]
    return lines


def _source_text(answer: TargetOpSupport) -> str:
    if answer.kind == SupportKind.NONE:
        return f"unknown ({answer.note})"
    versions = ", ".join(f"{k} {v}" for k, v in (answer.version or {}).items())
    when = f", {answer.retrieved}" if answer.retrieved else ""
    return f"{answer.kind} ({versions}{when})"


def markdown(section: TraceSection) -> str:
    """The section in report.md: of the section as built, or as written (the evaluate report's stage renderer)."""
    lines = ["## Op trace: readiness per target", ""]
    lines.append(f"{section.steps_traced} training step(s) of {fmt.md_code(section.app)} traced op by op on the CPU "
                 f"(torch {fmt.md(section.torch)}); status **{fmt.md(section.status)}**"
                 + (f": {fmt.md(section.reason)}" if section.reason else "") + "."
                 + (f" Tracing stopped there: {fmt.md(section.steps_rule)}." if section.steps_rule else ""))
    if section.status == TraceStatus.FAILED:
        return "\n".join(lines) + "\n"
    lines += ["", "| target | verdict | op support from |", "|---|---|---|"]
    for name, v in section.verdicts.items():
        answer = section.op_support.get(name)
        lines.append(f"| {TARGETS[name].title} | {fmt.md(v.text, 2000)} | {fmt.md(_source_text(answer)) if answer else 'n/a'} |")
    found = section.findings
    contract = contract_lines(section, fmt.md_code, lambda note: fmt.md(note, 1000))
    if contract:
        lines += ["", "**The app contract**: " + "; ".join(contract) + "."]
    evaluation = evaluation_text(section, fmt.md_code)
    if evaluation:
        lines += ["", f"**Kept apart**: {evaluation}."]  # locations are code spans; the rest is torchport's text
    devices = device_api_lines(section, fmt.md_code, fmt.md)
    if devices:
        lines += ["", "**Device-typed APIs seen at run time** (scan's rules): " + "; ".join(devices) + "."]
    lines += ["", f"### Findings ({len(found)})", ""]
    if not found:
        lines.append("None: no host syncs, data-dependent shapes, shape changes, float64, tile waste, sparse "
                     "tensors, custom ops, or unsupported ops were seen in the traced steps.")
    else:
        lines += ["| rule | severity | where | what | count | targets | fix |", "|---|---|---|---|---|---|---|"]
        for f in found:
            lines.append(f"| {f.id} {fmt.md(f.rule)} | {f.severity} | {where_text(f, fmt.md_code)} "
                         f"| {fmt.md(f.detail, 1000)} | {f.count} | {fmt.md(_targets_text(f))} | {fmt.md(f.fix, 1000)} |")
    lines += _xla_comparison_lines(section.xla_comparison)
    lines += _torch_compile_comparison_lines(section.torch_compile_comparison)
    mem = section.memory
    if mem:
        parts = ", ".join(f"{k.replace('_', ' ')} {fmt.size(v)}" for k, v in mem.parts.items())
        lines += ["", "### Memory fit (estimate)", "",
                  f"About **{fmt.size(mem.peak_bytes)}** per training step ({parts}); {mem.method}.", "",
                  "| chip | HBM | fits | headroom | source |", "|---|---|---|---|---|"]
        for chip in mem.chips:
            fits = "yes" + (" (tight)" if chip.tight else "") if chip.fits else "**no**"
            lines.append(f"| {chip.chip} | {chip.hbm} | {fits} | {fmt.size(chip.headroom_bytes)} "
                         f"({chip.headroom_share:.0%}) | {chip.source} |")
        lines.append(f"\nChip catalogue retrieved {mem.catalogue['retrieved']}.")
    totals = section.totals
    if totals:
        lines += ["", f"Per step: {totals.op_calls_per_step:.0f} op calls ({totals.distinct_ops} distinct ops), "
                      f"{totals.flops_per_step / 1e9:.2f} GFLOP ({totals.flops_note}), "
                      f"{fmt.size(int(totals.bytes_per_step))} read and written."]
    return "\n".join(lines) + "\n"


def _xla_comparison_lines(comparison: XlaComparison | None) -> list[str]:
    """The prediction beside the measured xla run, all phases together."""
    if not comparison:
        return []
    predicted, runs = comparison.predicted, comparison.measured.per_run

    def per_run(values: list[Any]) -> str:
        return ", ".join(str(value) for value in values) + (" (per run)" if len(runs) > 1 else "")

    steps = per_run([r.steps for r in runs])
    lines = ["", "### Prediction vs. the measured xla run", "",
             f"All phases of each run (first step, warm-up, sustained; {steps} steps).", "",
             "| | predicted by the trace | measured on xla |", "|---|---|---|"]
    lines.append(f"| CPU fallback ops | {fmt.md(', '.join(predicted.fallback_ops) or 'none')} | "
                 f"{fmt.md(', '.join(sorted({f'{op} x{n}' for r in runs for op, n in r.fallback_ops.items()})) or 'none')} |")
    lines.append(f"| graphs compiled | {predicted.step_graphs} | {per_run([r.compilations for r in runs])} |")
    lines.append(f"| graph executions | {predicted.executions_per_step:g} per step | {per_run([r.executions for r in runs])} |")
    lines.append(f"| the app's host syncs | {predicted.host_syncs_per_step:g} per step | "
                 f"{per_run([r.app_host_syncs for r in runs])} |")
    transfers = ", ".join(f"{r.transfers_to_device} / {r.transfers_from_device}" for r in runs)
    lines.append(f"| transfers to / from the device | not predicted | {transfers} |")
    reads = [r.torchport_loss_reads for r in runs if r.torchport_loss_reads]
    if reads:
        lines += ["", "torchport's own loss reads, outside every phase window and not in the figures above: "
                  + ", ".join(f"{r['values']} values ({r['aten::_local_scalar_dense']} `aten::_local_scalar_dense`)"
                              for r in reads) + "."]
    for item in comparison.recompiling:
        lines += ["", f"**Recompiling** (run {item.run}): {item.warmup_compilations} graphs compiled during "
                      f"warm-up, in {item.warmup_blocks_compiling} of {item.warmup_blocks} blocks, "
                      f"{fmt.seconds(item.warmup_compile_time_s)} of compiling"
                  + (f", and {item.sustained_compilations} in the sustained steps" if item.sustained_compilations
                     else "; the sustained phase compiled nothing, so its figures alone hide this cost") + "."]
    lines.append("")
    lines += ([f"- **disagreement**: {fmt.md(d, 1000)}" for d in comparison.disagreements]
              or ["The prediction agrees with the measured run."])
    return lines


def _torch_compile_comparison_lines(comparison: TorchCompileComparison | None) -> list[str]:
    """The trace's graph findings judged by the Dynamo counts of each *-compile run."""
    if not comparison:
        return []
    lines = ["", "### Prediction vs. the measured torch.compile runs", "",
             "The trace's findings about graphs (host syncs, data-dependent shapes and branches, changing input shapes) "
             "set against what Dynamo did in the first successful run, all phases.", "",
             "| backend | steps | frames compiled | graph breaks | recompilations | finding | verdict | evidence |",
             "|---|---|---|---|---|---|---|---|"]
    missed: list[str] = []
    for name, measured in comparison.backends.items():
        head = (f"| {fmt.md(name)} | {measured.steps} | {measured.frames_compiled} "
                f"| {'n/a' if measured.graph_breaks is None else measured.graph_breaks} "
                f"| {'n/a' if measured.recompilations is None else measured.recompilations} ")
        if not measured.findings:
            lines.append(head + "| none predicted | – | – |")
        for item in measured.findings:
            lines.append(head + f"| {item.id} at {fmt.md_code(short_location(item.location))} "
                                f"| {item.verdict} | {fmt.md(item.evidence, 500)} |")
        missed += [f"- **not predicted** on {fmt.md(name)}: graph break at "
                   f"{fmt.md_code(short_location(extra.location))}: {fmt.md(extra.reason or '', 300)}"
                   for extra in measured.unpredicted_breaks]
    return lines + ([""] + missed if missed else [])
