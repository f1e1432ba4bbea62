"""The checks section of report.md (``torchport evaluate``) and of ``torchport check``, drawn from the
records (``records.ChecksSection``): the section is read from the document once, in ``markdown``."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchport.check import WORKER_CHECKS, worker_check
from torchport import formatting as fmt
from torchport.records import (Check, CheckBudgetRecord, CheckpointFigures, ChecksSection, CheckStatus,
                               DeterminismFigures, ParityFigures, PipelineFigures)

STATUS_TEXT: dict[str, str] = {CheckStatus.PASS: "pass", CheckStatus.BORDERLINE: "*borderline*", CheckStatus.FAIL: "**FAIL**",
               CheckStatus.ERROR: "**ERROR**", CheckStatus.SKIPPED: "skipped",
               CheckStatus.NOT_APPLICABLE: "not applicable"}


def _record(check: Check | Mapping[str, Any]) -> Check:
    # Other renderers (report/html.py) pass a check as the document has it.
    return check if isinstance(check, Check) else Check.from_dict(dict(check))


def subject(check: Check | Mapping[str, Any]) -> str:
    check = _record(check)
    return check.backend or check.pair or ""


def headline(check: Check | Mapping[str, Any]) -> str:
    """The figure that matters most for each check, in a few words."""
    check = _record(check)
    name = check.name
    if name == "parity":
        parity = check.figures_as(ParityFigures)
        if parity.worst_ratio is not None:
            return f"worst error ratio {parity.worst_ratio:.3g} ({parity.worst_quantity})"
    if name == "determinism":
        determinism = check.figures_as(DeterminismFigures)
        if determinism.bit_exact is not None:
            return "bit-exact" if determinism.bit_exact else "runs differ"
    if name == "checkpoint":
        pair = check.figures_as(CheckpointFigures)
        if pair.parameter_error is not None:
            return ("bit-exact" if pair.bit_exact
                    else f"parameter error {pair.parameter_error:.1e} (bound {pair.bound or 0.0:.1e})")
    if name in WORKER_CHECKS:
        return worker_check(name).headline(check) or "–"
    if name == "pipeline":
        pipeline = check.figures_as(PipelineFigures)
        if pipeline.data_batches_per_s is not None:
            interval = pipeline.load_share_interval
            return (f"{pipeline.verdict or ''}: data {pipeline.data_batches_per_s:.0f} batches/s, waiting "
                    f"{pipeline.load_share or 0.0:.0%} of a step"
                    + (f" ({interval[0]:.0%}-{interval[1]:.0%} over {pipeline.rounds} rounds)" if interval else "")
                    + ("; uncertain under load" if pipeline.uncertain else ""))
    return "–"


def _cell(text: str) -> str:
    return fmt.md(text, 1000)


def budget_line(budget: CheckBudgetRecord | None) -> str:
    """What ``check --budget`` did, in one line ("" without a budget)."""
    if not budget:
        return ""
    from torchport.sampling import format_duration

    parts = [f"Time budget {format_duration(budget.budget_s)}, spent {format_duration(budget.spent_s)}"]
    parts += [f"sized: {item}" for item in budget.sized]
    parts += [f"skipped: {item}" for item in budget.skipped]
    return "; ".join(parts)


def markdown(checks_section: ChecksSection) -> str:
    config = checks_section.config
    checks = checks_section.checks
    counts = {status: sum(1 for check in checks if check.status == status) for status in STATUS_TEXT}
    lines = [
        "## Checks: parity, checkpoints, recovery, distributed, input pipeline",
        "",
        f"{counts[CheckStatus.PASS]} passed"
        + (f", {counts[CheckStatus.BORDERLINE]} borderline" if counts[CheckStatus.BORDERLINE] else "")
        + f", {counts[CheckStatus.FAIL]} failed, {counts[CheckStatus.ERROR]} could not run, "
          f"{counts[CheckStatus.SKIPPED]} skipped"
        + (f", {counts[CheckStatus.NOT_APPLICABLE]} not applicable" if counts[CheckStatus.NOT_APPLICABLE] else "")
        + f" · reference `{config.reference}` in {config.dtype}, ground truth "
        f"{config.ground_truth} · {config.steps if config.steps is not None else '?'} steps, seed {config.seed}"
        f" · error-ratio limit {config.ratio_limit if config.ratio_limit is not None else '?'}, floor {config.floor:.1e}"
        + (f" · {checks_section.duration_s:.0f} s" if checks_section.duration_s is not None else ""),
        "",
    ]
    if checks_section.app_error:
        error = checks_section.app_error
        lines += [f"**The app failed:** {fmt.md(error.message)}" + (f" at {fmt.md_code(error.location)}" if error.location else ""), ""]
    if checks_section.note:
        lines += [checks_section.note, ""]
    if budget_line(config.budget):
        lines += [fmt.md(budget_line(config.budget)), ""]
    lines += ["| check | backend / pair | status | figures | reason |", "|---|---|---|---|---|"]
    for check in checks:
        lines.append(f"| {check.name} | {_cell(subject(check))} | {STATUS_TEXT.get(check.status, check.status)} "
                     f"| {_cell(headline(check))} | {_cell(check.reason)} |")
    lines += ["", "Methods and thresholds: docs/check.md. Error ratio = (backend vs float64) / (reference vs float64)."]
    return "\n".join(lines)
