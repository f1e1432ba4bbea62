"""Which backends each part of an evaluation report speaks of, decided once
from the result document: the terminal summary, report.md and report.html
draw these sections and never decide them again, so that they cannot list
different backends under the same heading.

The report layer reads the document as one record (``ResultDocument``, read by
``torchport.document.result_record`` or ``torchport.summary.refresh``); the
renderers read its records and these sections, never the JSON."""
from __future__ import annotations

from dataclasses import dataclass, field

from torchport.records import BackendEntry, BackendStatus, ErrorKind, ResultDocument, StageError


@dataclass(frozen=True)
class Sections:
    # Every backend, in the document's order.
    backends: dict[str, BackendEntry] = field(default_factory=dict)
    # Backends with a summary: the figures, phases, memory and charts.
    measured: dict[str, BackendEntry] = field(default_factory=dict)
    # Backends whose runs failed for a reason about the backend or the app
    # there (not-on-device included: the script did not use that device).
    does_not_run_here: dict[str, BackendEntry] = field(default_factory=dict)
    # Stopped by the time budget before a run finished: says nothing about
    # whether the app runs there, so never under "does not run here".
    budget_too_small: dict[str, BackendEntry] = field(default_factory=dict)
    # Not on this machine: one line per reason in the answer per target.
    unavailable: dict[str, BackendEntry] = field(default_factory=dict)
    # Stages (trace, checks, ...) that raised: the timing results stand.
    stage_errors: list[StageError] = field(default_factory=list)


def sections(document: ResultDocument) -> Sections:
    parts = Sections(dict(document.backends), stage_errors=list(document.stage_errors))
    for name, backend in parts.backends.items():
        if backend.status == BackendStatus.UNAVAILABLE:
            parts.unavailable[name] = backend
            continue
        if backend.summary is not None:
            parts.measured[name] = backend
        if backend.error is not None and backend.error.kind == ErrorKind.BUDGET_TOO_SMALL:
            parts.budget_too_small[name] = backend
        elif backend.error is not None:
            parts.does_not_run_here[name] = backend
    return parts
