"""The checks section of report.md (``torchport evaluate``) and of ``torchport check``."""
from __future__ import annotations

from typing import Any

from torchport.check import WORKER_CHECKS, worker_check
from torchport import formatting as fmt
from torchport.records import CheckStatus

STATUS_TEXT = {CheckStatus.PASS: "pass", CheckStatus.BORDERLINE: "*borderline*", CheckStatus.FAIL: "**FAIL**",
               CheckStatus.ERROR: "**ERROR**", CheckStatus.SKIPPED: "skipped",
               CheckStatus.NOT_APPLICABLE: "not applicable"}


def subject(check: dict[str, Any]) -> str:
    return check.get("backend") or check.get("pair") or ""


def headline(check: dict[str, Any]) -> str:
    """The figure that matters most for each check, in a few words."""
    figures = check.get("figures") or {}
    name = check["name"]
    if name == "parity" and "worst_ratio" in figures:
        return f"worst error ratio {figures['worst_ratio']:.3g} ({figures['worst_quantity']})"
    if name == "determinism" and "bit_exact" in figures:
        return "bit-exact" if figures["bit_exact"] else "runs differ"
    if name == "checkpoint" and "parameter_error" in figures:
        return "bit-exact" if figures["bit_exact"] else f"parameter error {figures['parameter_error']:.1e} (bound {figures['bound']:.1e})"
    if name in WORKER_CHECKS:
        return worker_check(name).headline(figures) or "–"
    if name == "pipeline" and "data_batches_per_s" in figures:
        interval = figures.get("load_share_interval")
        return (f"{figures.get('verdict', '')}: data {figures['data_batches_per_s']:.0f} batches/s, waiting "
                f"{figures['load_share']:.0%} of a step"
                + (f" ({interval[0]:.0%}-{interval[1]:.0%} over {figures['rounds']} rounds)" if interval else "")
                + ("; uncertain under load" if figures.get("uncertain") else ""))
    return "–"


def _cell(text: str) -> str:
    return fmt.md(text, 1000)


def budget_line(budget: dict[str, Any] | None) -> str:
    """What ``check --budget`` did, in one line ("" without a budget)."""
    if not budget:
        return ""
    from torchport.sampling import format_duration

    parts = [f"Time budget {format_duration(budget['budget_s'])}, spent {format_duration(budget['spent_s'])}"]
    parts += [f"sized: {item}" for item in budget.get("sized") or []]
    parts += [f"skipped: {item}" for item in budget.get("skipped") or []]
    return "; ".join(parts)


def markdown(section: dict[str, Any]) -> str:
    config = section.get("config", {})
    checks = section.get("checks", [])
    counts = {status: sum(1 for check in checks if check["status"] == status) for status in STATUS_TEXT}
    lines = [
        "## Checks: parity, checkpoints, recovery, distributed, input pipeline",
        "",
        f"{counts[CheckStatus.PASS]} passed"
        + (f", {counts[CheckStatus.BORDERLINE]} borderline" if counts[CheckStatus.BORDERLINE] else "")
        + f", {counts[CheckStatus.FAIL]} failed, {counts[CheckStatus.ERROR]} could not run, "
          f"{counts[CheckStatus.SKIPPED]} skipped"
        + (f", {counts[CheckStatus.NOT_APPLICABLE]} not applicable" if counts[CheckStatus.NOT_APPLICABLE] else "")
        + f" · reference `{config.get('reference', 'cpu')}` in {config.get('dtype', 'float32')}, ground truth "
        f"{config.get('ground_truth', 'cpu, float64')} · {config.get('steps', '?')} steps, seed {config.get('seed', 0)}"
        f" · error-ratio limit {config.get('ratio_limit', '?')}, floor {config.get('floor', 0):.1e}"
        + (f" · {section['duration_s']:.0f} s" if section.get("duration_s") is not None else ""),
        "",
    ]
    if section.get("app_error"):
        error = section["app_error"]
        lines += [f"**The app failed:** {fmt.md(error.get('message'))}" + (f" at {fmt.md_code(error['location'])}" if error.get("location") else ""), ""]
    if section.get("note"):
        lines += [section["note"], ""]
    if budget_line(config.get("budget")):
        lines += [fmt.md(budget_line(config.get("budget"))), ""]
    lines += ["| check | backend / pair | status | figures | reason |", "|---|---|---|---|---|"]
    for check in checks:
        lines.append(f"| {check['name']} | {_cell(subject(check))} | {STATUS_TEXT.get(check['status'], check['status'])} "
                     f"| {_cell(headline(check))} | {_cell(check.get('reason', ''))} |")
    lines += ["", "Methods and thresholds: docs/check.md. Error ratio = (backend vs float64) / (reference vs float64)."]
    return "\n".join(lines)
