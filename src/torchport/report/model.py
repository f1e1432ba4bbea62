"""Which backends each part of an evaluation report speaks of, decided once
from the result document: the terminal summary, report.md and report.html
draw these sections and never decide them again, so that they cannot list
different backends under the same heading."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchport.records import ErrorKind


@dataclass(frozen=True)
class Sections:
    # Backends with a summary: the figures, phases, memory and charts.
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Backends whose runs failed for a reason about the backend or the app
    # there (not-on-device included: the script did not use that device).
    does_not_run_here: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Stopped by the time budget before a run finished: says nothing about
    # whether the app runs there, so never under "does not run here".
    budget_too_small: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Not on this machine: one line per reason in the answer per target.
    unavailable: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Stages (trace, checks, ...) that raised: the timing results stand.
    stage_errors: list[dict[str, Any]] = field(default_factory=list)


def sections(document: dict[str, Any]) -> Sections:
    measured: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    budget: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, dict[str, Any]] = {}
    for name, backend in (document.get("backends") or {}).items():
        error = backend.get("error") or {}
        if backend.get("status") == "unavailable":
            unavailable[name] = backend
            continue
        if backend.get("summary"):
            measured[name] = backend
        if error.get("kind") == ErrorKind.BUDGET_TOO_SMALL:
            budget[name] = backend
        elif error:
            failed[name] = backend
    return Sections(measured, failed, budget, unavailable, list(document.get("stage_errors") or []))
