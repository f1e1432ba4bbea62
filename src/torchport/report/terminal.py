"""The summary printed at the end of ``torchport evaluate``: a compact table,
then one line per note, so it reads in an 80-column terminal."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from torchport import formatting as fmt
from torchport.records import BackendStatus, ResultDocument
from torchport.report import model
from torchport.text import one_line


def summary_table(document: ResultDocument) -> tuple[Table, list[str]]:
    reference = document.reference
    # Names, messages and reasons come from apps and results: data, never rich markup.
    table = Table(title=escape(one_line(f"torchport evaluate {document.app_spec}")), title_justify="left")
    for header in ("backend", "status", "step time [95% CI]", "samples/s", escape(f"vs {one_line(reference)}"), "first step", "memory"):
        table.add_column(header, overflow="fold")
    notes: list[str] = []
    parts = model.sections(document)
    for name, backend in parts.backends.items():
        if backend.status == BackendStatus.UNAVAILABLE:
            continue  # the answer per target lists them, one line per reason
        label = f"{name} (proxy)" if backend.proxy_for else name
        summary = backend.summary
        if summary is None:
            error = backend.error
            status = str(backend.status)
            if error is not None and error.kind:
                status += f" ({error.kind})"
                prefix = "does not run here: " if name in parts.does_not_run_here else ""
                reason = f"{prefix}{error.message}"
                if error.location:
                    reason += f" at {error.location}"
                if error.more:
                    reason += " (more lines: run with --debug)"
            else:
                reason = backend.reason or ""
            table.add_row(escape(one_line(label)), escape(one_line(status)), "", "", "", "", "")
            if reason:
                notes.append(f"{name}: {reason}")
            continue
        if summary.input_bound:
            notes.append(f"{name}: input-bound ({summary.data_wait_share or 0.0:.0%} of step time waiting for data)")
        if summary.sustained_compilations:
            notes.append(f"{name}: recompiled {summary.sustained_compilations}x during sustained steps")
        notes += [f"{name}: {warning}" for warning in (summary.step_time_s.warnings if summary.step_time_s else [])]
        if backend.proxy_for:
            notes.append(f"{name}: a proxy for {backend.proxy_for}")
        if backend.cost:
            notes.append(f"{name}: {fmt.usd(backend.cost.usd_per_million_samples)} per 1M samples")
        memory = summary.peak_device_memory_bytes
        table.add_row(
            escape(one_line(label)),
            escape(one_line(str(backend.status))),
            fmt.step_time_with_ci(summary.step_time_s),
            fmt.rate(summary.samples_per_s, ""),
            "reference" if name == reference else fmt.speedup(backend.comparison),
            fmt.seconds(summary.first_step_s),
            fmt.size(memory) if memory is not None else f"RSS {fmt.size(summary.peak_host_rss_bytes)}",
        )
    from torchport.report.budget import budget_notes

    notes += budget_notes(document)
    notes += [f"stage {error.stage}: {error.message}" + (f" at {error.location}" if error.location else "")
              for error in parts.stage_errors]
    if document.script:
        from torchport.script.report import terminal_lines

        notes += terminal_lines(document)
    consistency = document.config_consistency
    if consistency is not None and consistency.differing:
        notes.insert(0, f"configuration differs on {', '.join(consistency.differing)}: not comparable")
    return table, notes


def answer_table(document: ResultDocument) -> tuple[Table, list[str]]:
    """The answer per target family (``report.answer``), and its legend and the
    backends that could not run here, one line per reason."""
    from torchport.report import answer

    model = answer.build(document)
    table = Table(title="Answer per target", title_justify="left")
    for header in answer.HEADERS:
        table.add_column(header, overflow="fold")
    for row in model.rows:
        table.add_row(escape(row.target), *[escape(one_line(cell.marked())) for cell in row.cells()])
    return table, [answer.LEGEND, *model.lines()]


def print_summary(document: ResultDocument, console: Console | None = None) -> None:
    from torchport import output

    if console is None:
        console = output.console()
    table, notes = summary_table(document)
    # Narrow: the figures derived from the step time go first; the step time, the ratio and memory stay.
    console.print(output.fit_table(table, console.width, {"samples/s": 100, "first step": 100}))
    output.print_lines(console, [f"  - {one_line(note)}" for note in notes])
    # The answer comes last, where the eye lands when the run ends.
    answer, lines = answer_table(document)
    console.print(output.fit_table(answer, console.width, {"cost": 100, "workflow": 100}))
    output.print_lines(console, [f"  {one_line(line)}" for line in lines])

