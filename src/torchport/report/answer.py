"""One answer per target family, each cell with the kind of evidence it rests on.

The verdict model is built once from the result document; the terminal,
report.md and report.html only draw it, so the three cannot disagree.  Each
cell says what it rests on:

* measured on the target: a backend of that family ran here;
* measured on a proxy: a stand-in ran (XLA's CPU client for a TPU), named;
* predicted: from an op-support table or an estimate (named, with its date);
* unknown: nothing here measured or predicted it.

A measurement always outranks a prediction; where they disagree the cell says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from torchport import formatting as fmt
from torchport.records import (
    BackendEntry,
    BackendStatus,
    Check,
    CheckStatus,
    ErrorKind,
    ErrorRecord,
    ResultDocument,
    Summary,
    TraceSection,
    TraceVerdictStatus,
)


class Evidence(StrEnum):
    MEASURED = "measured"
    PROXY = "proxy"
    PREDICTED = "predicted"
    UNKNOWN = "unknown"


EVIDENCE_TEXT = {Evidence.MEASURED: "measured on the target", Evidence.PROXY: "measured on a proxy",
                 Evidence.PREDICTED: "predicted", Evidence.UNKNOWN: "unknown"}
# One letter per level, so a cell in an 80-column table still says what it rests on.
EVIDENCE_MARK = {Evidence.MEASURED: "M", Evidence.PROXY: "P", Evidence.PREDICTED: "T", Evidence.UNKNOWN: "?"}


@dataclass(frozen=True)
class Cell:
    text: str  # a few words: the answer itself, the same in every rendering
    evidence: Evidence
    source: str = ""  # what it was measured on, or which table/estimate predicted it
    detail: str = ""  # the figures and reasons behind it (report.md and report.html)

    def marked(self) -> str:
        return f"[{EVIDENCE_MARK[self.evidence]}] {self.text}"


@dataclass(frozen=True)
class TargetFamily:
    title: str
    backend_family: str  # the first part of its backends' names
    trace_target: str | None
    compiled_only: bool = False  # the row is about the compiling backends only (compiled CPU)


TARGETS: tuple[TargetFamily, ...] = (
    TargetFamily("TorchTPU", "tpu", "tpu"),
    TargetFamily("PyTorch/XLA", "xla", "xla"),
    TargetFamily("Trainium", "neuron", "neuron"),
    TargetFamily("CUDA", "cuda", "cuda"),
    TargetFamily("ROCm", "rocm", "rocm"),
    TargetFamily("MPS", "mps", "mps"),
    TargetFamily("compiled CPU", "cpu", None, compiled_only=True),
)

COLUMNS = ("runs", "speed", "numbers", "workflow", "memory", "cost", "change")


@dataclass(frozen=True)
class TargetAnswer:
    target: str
    backends: tuple[str, ...]
    runs: Cell
    speed: Cell
    numbers: Cell
    workflow: Cell
    memory: Cell
    cost: Cell
    change: Cell

    def cells(self) -> list[Cell]:
        return [getattr(self, column) for column in COLUMNS]


@dataclass(frozen=True)
class Answer:
    reference: str | None
    rows: list[TargetAnswer] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)  # one line per reason
    # Targets about which this document holds nothing at all (neither run nor traced): one line, not a row of "?".
    no_evidence: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The lines under the table, the same in every rendering."""
        found = list(self.unavailable)
        if self.no_evidence:
            found.append(f"nothing measured or predicted for {', '.join(self.no_evidence)}: "
                         "not run here, and no trace (the trace predicts op support, graph breaks and memory fit)")
        return found


def _family_backends(document: ResultDocument, target: TargetFamily) -> dict[str, BackendEntry]:
    environment, backends = document.environment, document.backends
    found = {}
    for name, entry in backends.items():
        family = name.split("-", 1)[0]
        if target.compiled_only:
            if family == target.backend_family and "compile" in name:
                found[name] = entry
            continue
        # A ROCm build of torch presents its GPUs as "cuda": the cuda backends then measure ROCm.
        if family == "cuda" and target.backend_family in ("cuda", "rocm"):
            on_rocm = bool(environment.torch_hip)
            if (target.backend_family == "rocm") == on_rocm:
                found[name] = entry
        elif family == target.backend_family:
            found[name] = entry
    return found


def _finished(entries: dict[str, BackendEntry]) -> dict[str, BackendEntry]:
    return {name: entry for name, entry in entries.items() if entry.summary is not None}


def _ran(entries: dict[str, BackendEntry]) -> dict[str, BackendEntry]:
    """The backends whose runs finished and show that they used the device: only
    their figures are the target's."""
    return {name: entry for name, entry in _finished(entries).items() if device_evidence(entry)}


def _failed(entries: dict[str, BackendEntry]) -> dict[str, BackendEntry]:
    return {name: entry for name, entry in entries.items()
            if entry.summary is None and entry.error is not None and entry.error.kind != ErrorKind.BUDGET_TOO_SMALL}


def device_evidence(entry: BackendEntry) -> str | None:
    """What shows that a backend's runs really used its device: XLA executions,
    torch.compile frames, device memory.  None when nothing does (a script
    that ignored the device it was given ran on the CPU)."""
    summary = entry.summary or Summary()
    counters = [row.counters for row in summary.counters or []]
    executions = sum(c.get("executions") or 0 for c in counters)
    frames = sum((c.get("torch_compile") or {}).get("frames_compiled") or 0 for c in counters)
    device_type = entry.device_type
    if device_type == "xla":
        return f"{executions} XLA executions" if executions else None
    if entry.compiles and device_type == "cpu":
        return f"{frames} frame(s) compiled by torch.compile" if frames else None
    if device_type == "cpu":
        return "the CPU"
    if summary.peak_device_memory_bytes:
        return f"{fmt.size(summary.peak_device_memory_bytes)} of device memory used"
    if frames or executions:
        return f"{frames or executions} compiled frame(s) or execution(s)"
    return None


def _evidence_of(name: str, entry: BackendEntry) -> tuple[Evidence, str]:
    if entry.proxy_for:
        return Evidence.PROXY, f"{name}, a proxy for {entry.proxy_for}"
    return Evidence.MEASURED, name


def _trace_source(trace: TraceSection, trace_target: str) -> str:
    support = trace.op_support.get(trace_target)
    text = (support.summary or support.title if support else "") or "the trace"
    if support and support.retrieved and str(support.retrieved) not in text:
        text += f", {support.retrieved}"
    return f"trace on this machine; op support: {text}"


def _runs(trace: TraceSection | None, target: TargetFamily, entries: dict[str, BackendEntry]) -> Cell:
    finished, ran, failed = _finished(entries), _ran(entries), _failed(entries)
    verdict = trace.verdicts.get(target.trace_target or "") if trace else None
    if finished and not ran:
        # Runs finished, but nothing shows they used the device: not "runs on" it.
        return Cell("no device evidence", Evidence.UNKNOWN, "", f"{', '.join(finished)} finished, but with no sign of "
                    "the device (no XLA executions, compiled frames or device memory): the work may have run on the CPU")
    if ran:
        name, entry = next(iter(ran.items()))
        evidence, source = _evidence_of(name, entry)
        details = [f"ran on {name}: {device_evidence(entry)}"] + [
            f"{other}: {device_evidence(e) or 'no device evidence'}" for other, e in finished.items() if other != name]
        if failed:
            details.append(f"does not run on {', '.join(failed)}")
        if verdict and verdict.status not in (TraceVerdictStatus.RUNS, TraceVerdictStatus.UNKNOWN):
            details.append(f"the trace predicted {verdict.status}; the measurement outranks it")
        return Cell("runs" if not failed else "runs, in part", evidence, source, "; ".join(details))
    if failed:
        name, entry = next(iter(failed.items()))
        error = entry.error or ErrorRecord()
        evidence, source = _evidence_of(name, entry)
        where = f" at {error.location}" if error.location else ""
        # The script ran, but on the CPU: measured, and not a failure of the target.
        text = "did not use the device" if error.kind == ErrorKind.NOT_ON_DEVICE else f"does not run ({error.kind})"
        return Cell(text, evidence, source, f"{error.message}{where}")
    if trace and verdict:
        known = verdict.op_support in ("table", "live") and verdict.status != TraceVerdictStatus.UNKNOWN
        status = str(verdict.status)
        short: dict[str, str] = {TraceVerdictStatus.RUNS: "no blocker predicted",
                                 TraceVerdictStatus.BLOCKED: "blocked (predicted)",
                                 TraceVerdictStatus.SLOW: "slow (predicted)"}
        return Cell(short.get(status, status) if known else "not known", Evidence.PREDICTED if known else Evidence.UNKNOWN,
                    _trace_source(trace, target.trace_target or ""), verdict.text or "")
    return Cell("not measured", Evidence.UNKNOWN, "", "not run here and not traced")


def _speed(reference: str | None, entries: dict[str, BackendEntry]) -> Cell:
    for name, entry in _ran(entries).items():
        evidence, source = _evidence_of(name, entry)
        if name == reference:
            return Cell("the reference", evidence, source)
        comparison = entry.comparison
        if not comparison:
            continue
        short = comparison.verdict.split(" (")[0].split(":")[0]
        text = f"{comparison.speedup:.2f}x, {short}"
        detail = f"{fmt.speedup(comparison)}, against {reference}"
        if evidence is Evidence.PROXY:
            detail += "; a proxy's speed, not the target's"
        return Cell(text, evidence, source, detail)
    return Cell("not measured", Evidence.UNKNOWN)


def _checks_for(checks: list[Check], backend_names: set[str]) -> dict[str, list[Check]]:
    """The checks about these backends (as the backend or either side of a pair)."""
    found: dict[str, list[Check]] = {}
    for check in checks:
        subject = str(check.backend or check.pair or "")
        sides = {part.strip() for part in subject.replace("->", " ").replace("→", " ").split()}
        if sides & backend_names:
            found.setdefault(check.name, []).append(check)
    return found


# Worst first: the status a row of several checks shows.
_CHECK_ORDER: list[str] = [CheckStatus.FAIL, CheckStatus.ERROR, CheckStatus.BORDERLINE, CheckStatus.PASS, CheckStatus.SKIPPED,
                           CheckStatus.NOT_APPLICABLE]


def _worst_status(checks: list[Check]) -> str:
    statuses = [str(check.status) for check in checks]
    return min(statuses, key=lambda status: _CHECK_ORDER.index(status) if status in _CHECK_ORDER else len(_CHECK_ORDER))


def _measured(entries: dict[str, BackendEntry]) -> tuple[dict[str, BackendEntry], BackendEntry, Evidence, str] | None:
    """The backends of a family that ran, and the first one's entry with the
    evidence and source every cell measured from it carries; None if none ran."""
    ran = _ran(entries)
    if not ran:
        return None
    name, entry = next(iter(ran.items()))
    return (ran, entry, *_evidence_of(name, entry))


def _numbers(checks: list[Check], entries: dict[str, BackendEntry]) -> Cell:
    measured = _measured(entries)
    if measured is None:
        return Cell("not measured", Evidence.UNKNOWN)
    ran, entry, evidence, source = measured
    parity = _checks_for(checks, set(ran)).get("parity")
    if parity:
        return Cell(f"parity {_worst_status(parity)}", evidence, source + " (parity check)")
    common = entry.comparison.loss_at_common_step if entry.comparison else None
    if common is not None and common.relative_difference is not None:
        return Cell(f"loss {common.relative_difference:.1%} apart", evidence, source,
                    f"losses {common.relative_difference:.1%} apart at step {common.step}, the last step both "
                    "reached; no parity check ran")
    return Cell("not compared", Evidence.UNKNOWN)


def _workflow(checks_run: list[Check], entries: dict[str, BackendEntry]) -> Cell:
    measured = _measured(entries)
    if measured is None:
        return Cell("not measured", Evidence.UNKNOWN)
    ran, _, evidence, source = measured
    checks = _checks_for(checks_run, set(ran))
    parts = [f"{check} {_worst_status(checks[check])}" for check in ("checkpoint", "recovery", "distributed", "pipeline")
             if check in checks]
    missing = [check for check in ("checkpoint", "recovery", "distributed", "pipeline") if check not in checks]
    if not parts:
        return Cell("not checked", Evidence.UNKNOWN, "", "torchport check runs checkpoint, recovery, distributed and pipeline checks")
    return Cell(", ".join(parts), evidence, source, f"not checked: {', '.join(missing)} (torchport check)" if missing else "")


def _memory(trace: TraceSection | None, target: TargetFamily) -> Cell:
    memory = trace.memory if trace else None
    chips = [chip for chip in memory.chips if target.trace_target in chip.targets] if memory else []
    if not memory or not chips:
        return Cell("–" if target.compiled_only else "no chip listed", Evidence.UNKNOWN)
    fitting = [chip for chip in chips if chip.fits]
    tight = [chip.chip for chip in fitting if chip.tight]
    text = f"fits {len(fitting)} of {len(chips)} chips"
    details = [f"peak {fmt.size(memory.peak_bytes)}"]
    if tight:
        details.append(f"tight on {', '.join(tight)}")
    if len(fitting) < len(chips):
        details.append(f"does not fit {', '.join(str(c.chip) for c in chips if not c.fits)}")
    return Cell(text, Evidence.PREDICTED,
                "estimate from the trace (parameters, gradients, optimizer state, activations, one batch)", "; ".join(details))


def _cost(entries: dict[str, BackendEntry]) -> Cell:
    for name, entry in _ran(entries).items():
        cost = entry.cost
        if cost:
            evidence, source = _evidence_of(name, entry)
            return Cell(f"{fmt.usd(cost.usd_per_million_samples)}/1M samples", evidence, source,
                        f"at {fmt.usd(cost.usd_per_hour)} an hour")
    return Cell("no price" if _ran(entries) else "not measured", Evidence.UNKNOWN, "",
                "give one with --price BACKEND=USD_PER_HOUR" if _ran(entries) else "")


def _change(trace: TraceSection | None, target: TargetFamily) -> Cell:
    """The lines to change for this target: the trace's findings (run time) and
    scan's findings in the app's own files (static) that matter there."""
    from torchport import glossary

    judged = trace is not None and (bool(trace.app_scan) or (target.trace_target is not None and bool(trace.verdicts)))
    if trace is None or not judged:
        return Cell("–", Evidence.UNKNOWN)
    traced = [f for f in trace.findings if target.trace_target and target.trace_target in f.targets]
    scan_target = "cpu" if target.compiled_only else (glossary.trace_to_scan(target.trace_target)
                                                      if target.trace_target else None)
    scanned = [f for f in (trace.app_scan.findings if trace.app_scan else [])
               if scan_target and f.severity.get(scan_target) in ("error", "silent", "perf")]
    if not traced and not scanned:
        return Cell("nothing found", Evidence.PREDICTED, "trace and scan on this machine")
    locations = [f.location for f in traced] + [f.location for f in scanned]
    lines = {str(location) for location in locations if location}
    if scanned:
        first = scanned[0]
        where = f" at {first.location}" if first.location else ""
        detail = f"first: {first.title or first.id}{where}"
    else:
        where = f" at {traced[0].location}" if traced[0].location else ""
        detail = f"first: {traced[0].title or traced[0].rule or traced[0].id}{where}"
    if scanned:
        detail += f"; {len(scanned)} found by scan in the app's files (`torchport fix` rewrites the mechanical ones)"
    return Cell(f"{len(lines) or len(traced) + len(scanned)} line(s)", Evidence.PREDICTED,
                "trace and scan on this machine", detail)


def reason_without_details(text: str) -> str:
    """The reason without its parenthesised details (probe timings, paths), which
    differ between backends of one family and stay in report.md's table below."""
    kept, depth = [], 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif not depth:
            kept.append(char)
    return " ".join("".join(kept).split()).replace(" ;", ";").strip(" ;")


def _unavailable_lines(backends: dict[str, BackendEntry]) -> list[str]:
    """One line per reason for the backends that could not run on this machine,
    and the one thing that would measure them."""
    by_reason: dict[str, list[str]] = {}
    for name, entry in backends.items():
        if entry.status == BackendStatus.UNAVAILABLE:
            reason = reason_without_details(entry.reason or "") or "not available"
            by_reason.setdefault(reason, []).append(name)
    if not by_reason:
        return []
    lines = [f"not on this machine: {', '.join(names)} ({reason})" for reason, names in by_reason.items()]
    lines.append("to measure those, run the same evaluation on a machine that has the device "
                 "and put the results side by side with `torchport compare`")
    return lines


def build(document: ResultDocument) -> Answer:
    rows, no_evidence = [], []
    checks, trace = document.check_records(), document.trace
    for target in TARGETS:
        entries = _family_backends(document, target)
        row = TargetAnswer(
            target=target.title, backends=tuple(entries),
            runs=_runs(trace, target, entries), speed=_speed(document.reference, entries),
            numbers=_numbers(checks, entries), workflow=_workflow(checks, entries),
            memory=_memory(trace, target), cost=_cost(entries), change=_change(trace, target))
        tried = [entry for entry in entries.values() if entry.runs]
        if all(cell.evidence is Evidence.UNKNOWN and not cell.source for cell in row.cells()) and not tried:
            no_evidence.append(target.title)
        else:
            rows.append(row)
    return Answer(document.reference, rows, _unavailable_lines(document.backends), no_evidence)


LEGEND = ("Evidence: [M] measured on the target, [P] measured on a proxy (named), "
          "[T] predicted from a table or estimate (named), [?] unknown.")


# --- the three renderings: each only draws the model ---------------------------------------------

HEADERS = ("target", "runs", "speed", "numbers", "workflow", "memory fit", "cost", "what to change")


def markdown(answer: Answer) -> list[str]:
    lines = ["## Answer per target", "", LEGEND, "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in answer.rows:
        lines.append(f"| {fmt.md(row.target)} | " + " | ".join(fmt.md(cell.marked(), 1000) for cell in row.cells()) + " |")
    details = [f"{row.target}, {column}: {cell.detail}" + (f" [{cell.source}]" if cell.source else "")
               for row in answer.rows for column, cell in zip(COLUMNS, row.cells()) if cell.detail]
    if details:
        lines += ["", "Behind each cell (figures, reasons, and where proxies and predictions come from):", ""]
        lines += [f"- {fmt.md(line, 1000)}" for line in details]
    if answer.lines():
        lines += [""] + [f"- {fmt.md(line, 1000)}" for line in answer.lines()]
    return lines


def html(answer: Answer) -> list[str]:
    from torchport.report.svg import esc as escape  # control characters shown as \xNN, then HTML-escaped

    rows = []
    for row in answer.rows:
        cells = "".join(f'<td class="evidence-{cell.evidence.value}" title="{escape(EVIDENCE_TEXT[cell.evidence])}'
                        f'{": " + escape(cell.source) if cell.source else ""}">{escape(cell.marked())}'
                        + (f'<br><small>{escape(cell.detail)}</small>' if cell.detail else "") + "</td>"
                        for cell in row.cells())
        rows.append(f"<tr><th>{escape(row.target)}</th>{cells}</tr>")
    head = "".join(f"<th>{escape(header)}</th>" for header in HEADERS)
    body = ["<h2>Answer per target</h2>", f"<p>{escape(LEGEND)}</p>",
            f'<table class="answer"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>']
    if answer.lines():
        body.append('<ul class="answer-notes">' + "".join(f"<li>{escape(line)}</li>" for line in answer.lines()) + "</ul>")
    return body
