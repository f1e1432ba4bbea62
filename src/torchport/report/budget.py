"""What the time budget bought and where host memory went, for the reports.

Renders ``document["budget"]`` (``torchport.budget``) and each run's
``host_memory`` (``torchport.host_memory``).  Text from results is escaped for
markdown by ``format.md``; the terminal prints it literally.
"""
from __future__ import annotations

from torchport import formatting as fmt
from torchport.records import BackendEntry, BudgetSection, ResultDocument, StageSize
from torchport.report import model
from torchport.sampling import format_duration


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"±{value:.1%}"


def budget_notes(document: ResultDocument) -> list[str]:
    """Lines under the terminal summary: the budget used, the precision per backend, what it could not buy."""
    budget = document.budget
    if not budget:
        return []
    target = budget.precision_target
    reached = []
    for name, entry in budget.backends.items():
        if entry.precision_reached is None:
            continue
        met = entry.target_met
        verdict = "" if met is None else (" (target met)" if met else " (target not met)")
        reached.append(f"{name} {_pct(entry.precision_reached)}{verdict}")
    kind = "adaptive sampling" if budget.adaptive else "a cap on the fixed protocol"
    asked = f", target {_pct(target)}" if target is not None else ""
    notes = [f"budget {format_duration(budget.budget_s)} ({kind}), {format_duration(budget.elapsed_s or 0.0)} used; "
             f"precision reached (95% interval of the median step time{asked}): "
             + (", ".join(reached) or "none measured")]
    notes += [f"budget could not: {line}" for line in budget.could_not]
    for stage, size in budget.stages.sized().items():
        how = "sized by the budget" if size.bounds else "fits the budget"
        notes.append(f"{stage}: {_steps(size)} steps, {how} ({size.why})")
    return notes


def budget_rows(budget: BudgetSection) -> list[list[str]]:
    """Per backend: runs, precision reached, target met, each run's share, why sampling stopped."""
    rows = []
    for name, entry in budget.backends.items():
        met = entry.target_met
        shares = ", ".join(fmt.seconds(share) for share in entry.shares_s or []) or "–"
        stopped = ", ".join(str(reason) for reason in entry.stopped_by or [] if reason) or "–"
        rows.append([name, str(entry.runs), _pct(entry.precision_reached),
                     "–" if met is None else ("yes" if met else "NO"), shares, stopped])
    return rows


def could_not_buy(budget: BudgetSection, too_small: dict[str, BackendEntry]) -> list[str]:
    """The backends the budget stopped before a run finished, then what else it could not pay for."""
    return [f"{name}: {backend.error.message if backend.error else ''}" for name, backend in too_small.items()] + list(
        budget.could_not)


def budget_markdown(document: ResultDocument) -> list[str]:
    budget = document.budget
    if not budget:
        return []
    lines = ["", "## Time budget and precision", "",
             f"Budget {format_duration(budget.budget_s)} "
             f"({'given: adaptive sampling until the precision target' if budget.adaptive else 'the default: a cap on the fixed protocol'}), "
             f"{format_duration(budget.elapsed_s or 0.0)} used before the report. Precision: half the width of the 95% "
             f"interval of the median step time, relative to the median; "
             + (f"target {_pct(budget.precision_target)}." if budget.precision_target is not None
                else "no target was asked for (--precision or --budget sets one)."),
             "", "| backend | runs | precision reached | target met | each run's share | why each run's sampling stopped |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(fmt.md(cell) for cell in row) + " |" for row in budget_rows(budget)]
    could_not = could_not_buy(budget, model.sections(document).budget_too_small)
    if could_not:
        lines += ["", "What the budget could not buy:", ""] + [f"- {fmt.md(line)}" for line in could_not]
    stages = budget.stages.sized()
    if stages:
        lines += ["", "Stages sized by (or checked against) the budget:", ""]
        lines += [f"- {fmt.md(name)}: {_steps(size)} steps ("
                  + (f"bounds {size.bounds[0]}-{size.bounds[1]}; " if size.bounds else "")
                  + f"{fmt.md(size.why)})" for name, size in stages.items()]
    return lines


def _steps(size: StageSize) -> str:
    return "?" if size.steps is None else str(size.steps)


def memory_markdown(document: ResultDocument) -> list[str]:
    """Peak host memory per worker phase: the largest over each backend's runs."""
    rows = {}
    for name, backend in document.backends.items():
        peaks: dict[str, int] = {}
        for run in backend.runs:
            for phase, value in ((run.host_memory.phases if run.host_memory else None) or {}).items():
                peaks[phase] = max(peaks.get(phase, 0), int(value))
        if peaks:
            rows[name] = peaks
    if not rows:
        return []
    phases = list(dict.fromkeys(phase for peaks in rows.values() for phase in peaks))
    lines = ["", "## Host memory per phase (peak resident size, largest over runs)", "",
             "| backend | " + " | ".join(fmt.md(phase) for phase in phases) + " |",
             "|---|" + "---|" * len(phases)]
    for name, peaks in rows.items():
        lines.append(f"| {fmt.md(name)} | " + " | ".join(fmt.size(peaks.get(phase)) if phase in peaks else "–"
                                                         for phase in phases) + " |")
    return lines
