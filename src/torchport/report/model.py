"""Which backends each part of an evaluation report speaks of, decided once
from the result document: the terminal summary, report.md and report.html
draw these sections and never decide them again, so that they cannot list
different backends under the same heading.

This is where the report layer reads the document's backends into records
(``entries``); the renderers below read those, not the JSON."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchport.records import BackendEntry, BackendStatus, ErrorKind


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
    stage_errors: list[dict[str, Any]] = field(default_factory=list)


def entries(document: dict[str, Any]) -> dict[str, BackendEntry]:
    """The document's backends as records, in the document's order."""
    return {name: BackendEntry.from_dict(backend) for name, backend in (document.get("backends") or {}).items()}


def sections(document: dict[str, Any]) -> Sections:
    parts = Sections(entries(document), stage_errors=list(document.get("stage_errors") or []))
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
