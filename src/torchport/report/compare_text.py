"""A comparison (``torchport.compare``) as a terminal table and as markdown."""
from __future__ import annotations

import html
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchport import formatting as fmt
from torchport.records import ComparisonDocument, ComparisonEntry
from torchport.text import one_line

CELL_LIMIT = 200


def ratio_text(entry: ComparisonEntry) -> str:
    if entry.reference:
        return "reference"
    if not entry.comparable:
        return "not comparable"
    return fmt.speedup(entry.ratio)


def checks_text(entry: ComparisonEntry) -> str:
    counts = entry.checks.counts
    if not counts:
        return "–"
    text = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    failed = entry.checks.failed
    return text + (f" ({'; '.join(failed)})" if failed else "")


def cost_text(entry: ComparisonEntry) -> str:
    cost = entry.cost
    if not cost:
        return "no price" if entry.price_usd_per_hour is None else "n/a"
    low, high = cost.usd_per_million_samples_ci95
    text = f"{fmt.usd(cost.usd_per_million_samples)} [{fmt.usd(low)}, {fmt.usd(high)}]"
    if cost.usd_per_million_tokens is not None:
        text += f"; {fmt.usd(cost.usd_per_million_tokens)}/1M tokens"
    return text + f" at ${entry.price_usd_per_hour:g}/h ({entry.price_source})"


def memory_text(entry: ComparisonEntry) -> str:
    value = entry.peak_memory_bytes
    return "n/a" if value is None else f"{fmt.size(value)} ({entry.peak_memory_kind})"


def rows(comparison: ComparisonDocument) -> list[list[str]]:
    table = []
    for e in comparison.entries:
        throughput = fmt.rate(e.samples_per_s, "samples")
        if e.samples_per_s_ci95:
            low, high = e.samples_per_s_ci95
            throughput += f" [{fmt.rate(low, '')}, {fmt.rate(high, '')}]"
        table.append([
            e.machine, e.backend + (" (proxy)" if e.proxy_for else ""), fmt.step_time_with_ci(e.step_time_s),
            throughput, ratio_text(e), fmt.seconds(e.time_per_step_compile_included_s),
            fmt.seconds(e.first_step_s), fmt.seconds(e.time_to_first_step_s), memory_text(e),
            checks_text(e), cost_text(e),
        ])
    return table


HEADERS = ["machine", "backend", "step time [95% CI]", "samples/s [95% CI]", "vs reference [95% CI]",
           "per step, compile included", "first step", "time to first step", "peak memory", "checks",
           "cost / 1M samples [95% CI]"]


def reference_text(comparison: ComparisonDocument) -> str:
    ref = comparison.reference
    return f"{ref.machine}:{ref.backend} ({ref.app})"


def print_comparison(comparison: ComparisonDocument, console: Console | None = None) -> None:
    from torchport import output

    if console is None:
        console = output.console()
    # Text from result files goes in as Text, never as rich markup.
    table = Table(title=Text(one_line(f"torchport compare: reference {reference_text(comparison)}")), title_justify="left")
    for header in HEADERS:
        table.add_column(header, overflow="fold")
    for row in rows(comparison):
        table.add_row(*(Text(one_line(cell, CELL_LIMIT)) for cell in row))
    # Narrow: the figures derived from the step time go first; the step time and the ratio stay.
    console.print(output.fit_table(table, console.width, {
        "per step, compile included": 140, "samples/s [95% CI]": 120, "first step": 120, "time to first step": 100,
        "peak memory": 100, "cost / 1M samples [95% CI]": 100}))
    lines = []
    for item in comparison.not_comparable:
        where = f"{item.machine}:{item.backend}" if item.backend else f"{item.machine} ({item.file})"
        lines.append(one_line(f"  - not comparable: {where}: {item.reason}", CELL_LIMIT * 2))
    for difference in comparison.environment_differences:
        values = "; ".join(f"{machine}: {value}" for machine, value in difference.values.items())
        lines.append(one_line(f"  - environment differs: {difference.field}: {values}", CELL_LIMIT * 3))
    output.print_lines(console, lines)


def md(text: Any) -> str:
    """A markdown table cell: capped, one line, pipes and HTML escaped."""
    value = one_line(text, CELL_LIMIT)
    return html.escape(value, quote=False).replace("|", "\\|").replace("`", "\\`").replace("*", "\\*").replace("_", "\\_")


def markdown(comparison: ComparisonDocument) -> str:
    lines = [f"# torchport comparison: reference {md(reference_text(comparison))}", "",
             f"{comparison.created} · torchport {md(comparison.tool['version'])}. Ratios are reference time / "
             "time (> 1: faster), with a 95% interval from an unpaired bootstrap of the raw block samples; a difference "
             "is called only when the interval excludes 1 and it is at least 5%. Cost from the sustained throughput "
             "and each result's own price per hour (or --price).", "",
             "## Machines", "", "| machine | file | app | status | updated |", "|---|---|---|---|---|"]
    for m in comparison.machines:
        lines.append(f"| {md(m.name)} | {md(m.file)} | {md(m.app)} | {md(m.status)} | {md(m.updated)} |")
    lines += ["", "## Figures", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(md(cell) for cell in row) + " |" for row in rows(comparison)]
    if comparison.not_comparable:
        lines += ["", "## Not comparable (left out of the ratios)", "", "| machine | backend | reason |", "|---|---|---|"]
        for item in comparison.not_comparable:
            lines.append(f"| {md(item.machine)} | {md(item.backend or '(whole file)')} | {md(item.reason)} |")
    if comparison.environment_differences:
        machines = [m.name for m in comparison.machines]
        lines += ["", "## Environment differences", "", "| field | " + " | ".join(md(m) for m in machines) + " |",
                  "|---|" + "---|" * len(machines)]
        for row in comparison.environment_differences:
            lines.append(f"| {md(row.field)} | " + " | ".join(md(row.values.get(m, 'n/a')) for m in machines) + " |")
    if comparison.regressions is not None:
        lines += ["", f"## Regressions (over {comparison.fail_on_regression_pct:g}%, significant)", ""]
        lines += [f"- {md(r.machine)}:{md(r.backend)}: {r.slower_by:.1%} slower" for r in comparison.regressions] \
            or ["None."]
        lines += [f"- not gated: {md(r.machine)}:{md(r.backend)} looks {r.slower_by:.1%} slower, but {md(r.why)}"
                  for r in comparison.regressions_not_gated or []]
    return "\n".join(lines) + "\n"
