"""What script mode found, in the shapes every output renders: report.md,
report.html and the terminal summary read the same rows from here, so they
never disagree (verdicts with their device evidence, redirects with what they
became, the cross-reference with scan, parity, configuration differences,
torchrun, the machine's load during each run, and bfloat16 the CPU emulates)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchport.limits import HEAVY_LOAD_PER_CPU
from torchport.records import CpuBfloat16, ResultDocument, RunRecord, RunStatus


@dataclass
class RedirectRow:
    """A redirect that fired at one line: on which backends, how often, and what the call became on each."""

    location: str
    call: str
    count: int = 0
    backends: list[str] = field(default_factory=list)
    becomes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AutocastRow:
    """One autocast region the script opened, on one backend: what it asked for and what ran."""

    backend: str
    location: str
    requested_device_type: str | None
    device_type: str | None
    dtype: str
    enabled: bool

    def ran_as(self) -> str:
        return f"{self.device_type}, {self.dtype}" if self.enabled else "disabled: float32"


def heavy_load(run: RunRecord) -> str | None:
    """'1-minute load 10.2 on 2 CPUs' when the run was measured under heavy load (the 1-minute load average
    per CPU, at the run's start or end, above HEAVY_LOAD_PER_CPU: its speed is not the backend's alone),
    else None."""
    load = (run.script or {}).get("machine_load") or {}
    cpus = load.get("cpus") or 1
    values = [value for value in (load.get("start"), load.get("end")) if value is not None]
    if not values or max(values) / cpus <= HEAVY_LOAD_PER_CPU:
        return None
    return f"1-minute load {max(values):.1f} on {cpus} CPU(s)"


def load_notes(document: ResultDocument) -> list[str]:
    """One note per backend whose speed was measured (in part) under heavy load."""
    notes = []
    for name, backend in document.backends.items():
        loaded = [text for run in backend.runs if run.status == RunStatus.OK for text in [heavy_load(run)] if text]
        if loaded:
            notes.append(f"{name}: speed measured under heavy load ({len(loaded)} of {len(backend.runs)} run(s); "
                         f"highest {max(loaded)}): the ratio to the reference may be the machine's, not the backend's")
    return notes


def bfloat16_notes(document: ResultDocument) -> list[str]:
    """One warning for the backends whose redirected autocast ran bfloat16 on a CPU that emulates it, and one
    for those where the lookup could not tell (the record is torchport.script.bfloat16's, from the run)."""
    said: dict[tuple[bool | None, str], list[str]] = {}
    for name, backend in document.backends.items():
        for run in backend.runs:
            recorded = (run.script or {}).get("cpu_bfloat16")
            found = CpuBfloat16.from_dict(recorded) if recorded else None
            if found is not None and found.native is not True:
                backends = said.setdefault((found.native, found.evidence), [])
                if name not in backends:
                    backends.append(name)
    notes = []
    for (native, evidence), backends in said.items():
        if native is False:
            notes.append(f"{', '.join(backends)}: bfloat16 autocast on this CPU is emulated ({evidence}): step times "
                         "are not representative of the target; rerun with the script's own AMP off to time float32")
        else:
            notes.append(f"{', '.join(backends)}: bfloat16 autocast ran on a CPU not known to run bfloat16 natively "
                         f"({evidence}): if it emulates it, step times are not representative of the target; rerun "
                         "with the script's own AMP off to time float32")
    return notes


def redirects(document: ResultDocument) -> list[RedirectRow]:
    """Every redirect that fired, per line and call: backends, count, what it became."""
    rows: dict[tuple[str, str], RedirectRow] = {}
    for name, backend in document.backends.items():
        for run in backend.runs:
            for fired in (run.script or {}).get("redirects") or []:
                location = fired["location"] or "?"
                row = rows.setdefault((location, fired["call"]), RedirectRow(location, fired["call"]))
                row.count += fired["count"]
                if name not in row.backends:
                    row.backends = sorted([*row.backends, name])
                if fired.get("becomes"):
                    row.becomes[name] = fired["becomes"]
    return [row for _, row in sorted(rows.items())]


def autocasts(document: ResultDocument) -> list[AutocastRow]:
    """Each autocast region the script opened, per backend: asked for, ran as (dtype or disabled)."""
    rows = []
    for name, backend in document.backends.items():
        seen: dict[str, AutocastRow] = {}
        for run in backend.runs:
            for item in (run.script or {}).get("autocast") or []:
                seen.setdefault(item["location"], AutocastRow(
                    backend=name, location=item["location"], requested_device_type=item.get("requested_device_type"),
                    device_type=item.get("device_type"), dtype=item["dtype"], enabled=item["enabled"]))
        rows += list(seen.values())
    return rows


def parity_rows(document: ResultDocument) -> list[tuple[str, str, str]]:
    """(backend, worst relative difference, status) for every backend but the reference."""
    script = document.script
    if script is None:
        return []
    compared = (script.parity.backends if script.parity else None) or {}
    rows = []
    for name, verdict in script.verdicts.items():
        if name == document.reference:
            continue
        if name in compared:
            rows.append((name, f"{compared[name].worst_relative_difference:.2e}", str(compared[name].status)))
        else:
            rows.append((name, "–", f"not compared: {verdict.text or 'no finished run'}"))
    return rows


def torchrun_line(document: ResultDocument) -> str | None:
    ddp = document.script_distributed
    if not ddp:
        return None
    return f"under torchrun ({ddp.nproc_per_node} processes on {ddp.backend}): {ddp.status}, {ddp.reason}"


def terminal_lines(document: ResultDocument) -> list[str]:
    """The script section of the terminal summary: one line each."""
    script = document.script
    if not script:
        return []
    lines = [f"script {name}: {verdict.text}" for name, verdict in script.verdicts.items()]
    lines += [f"script parity {name}: {status}" + (f" (worst relative difference {diff})" if diff != "–" else "")
              for name, diff, status in parity_rows(document)]
    lines += [f"script {item.backend}: {item.message} at {item.location or '?'}" for item in script.configuration]
    lines += [f"script {row.backend}: autocast at {row.location} asked for {row.requested_device_type}, "
              + (f"ran as {row.ran_as()}" if row.enabled else "ran disabled: float32")
              for row in autocasts(document)
              if row.requested_device_type != row.device_type or not row.enabled]
    counts: dict[str, int] = {}
    for item in script.lines:
        counts[item.status] = counts.get(item.status, 0) + 1
    if counts:
        lines.append("script lines tied to CUDA: " + ", ".join(f"{count} {status}" for status, count in counts.items())
                     + " (report.md lists them)")
    ddp = torchrun_line(document)
    if ddp:
        lines.append(f"script {ddp}")
    return lines + bfloat16_notes(document) + load_notes(document)


def html_section(document: ResultDocument, esc: Any, cap: Any, table: Any) -> list[str]:
    """The Script mode section of report.html (``esc``, ``cap`` and ``table`` are the page's own helpers)."""
    script = document.script
    if script is None:
        return []
    body = ["<h2>Script mode</h2>",
            f"<p>The script <code>{esc(cap(script.path, 300))}</code> ran unmodified in each backend's worker. "
            "A backend counts as run only with evidence from its device.</p>",
            table(["backend", "verdict"], [[name, v.text] for name, v in script.verdicts.items()])]
    fired = redirects(document)
    if fired:
        body += ["<h3>Redirects (--redirect-cuda)</h3>", table(
            ["line", "call", "became", "backends", "count"],
            [[row.location, row.call, "; ".join(f"{n}: {b}" for n, b in row.becomes.items()) or "–",
              ", ".join(row.backends), row.count] for row in fired], numeric={4})]
    regions = autocasts(document)
    if regions:
        body += ["<h3>Mixed precision (autocast) as it ran</h3>", table(
            ["backend", "line", "asked for", "ran as"],
            [[row.backend, row.location, row.requested_device_type, row.ran_as()] for row in regions])]
    if script.configuration:
        body += ["<h3>The model differs between backends</h3>", table(
            ["backend", "rule", "line", "finding"],
            [[item.backend, item.rule, item.location or "?", item.message] for item in script.configuration])]
    if script.lines:
        body += ["<h3>Lines tied to CUDA: run time and torchport scan</h3>", table(
            ["line", "status", "redirected at run time", "scan rules"],
            [[item.location, item.status, ", ".join(item.redirects) or "–", ", ".join(item.rules) or "–"]
             for item in script.lines])]
    rows = parity_rows(document)
    if rows:
        body += ["<h3>Loss parity</h3>", f"<p>{esc(cap((script.parity.rule if script.parity else None) or ''))}</p>",
                 table(["backend", "worst relative difference", "parity"], [list(row) for row in rows])]
    ddp = torchrun_line(document)
    if ddp:
        body.append(f"<p>{esc(cap(ddp.capitalize()))}</p>")
    notes = bfloat16_notes(document) + load_notes(document)
    if notes:
        body += ['<ul class="warn">', *[f"<li>{esc(cap(note))}</li>" for note in notes], "</ul>"]
    return body
