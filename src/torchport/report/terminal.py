"""The summary table printed at the end of ``torchport evaluate``."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from torchport.report import format as fmt


def summary_table(document: dict[str, Any]) -> Table:
    reference = document.get("reference")
    table = Table(title=f"torchport evaluate {document['app']['spec']}", title_justify="left")
    for header in ("backend", "status", "step time [95% CI]", "samples/s", f"vs {reference}", "first step", "memory", "notes"):
        table.add_column(header, overflow="fold")
    for name, backend in document["backends"].items():
        label = f"{name} (proxy)" if backend.get("proxy_for") else name
        summary = backend.get("summary")
        if summary is None:
            error = backend.get("error") or {}
            reason = backend.get("reason") if backend["status"] in ("unavailable", "skipped") else error.get("message", "")
            table.add_row(label, backend["status"], "", "", "", "", "", reason or "")
            continue
        notes = []
        if summary.get("input_bound"):
            notes.append("input-bound")
        if summary.get("sustained_compilations"):
            notes.append(f"recompiling x{summary['sustained_compilations']}")
        if not summary.get("steady"):
            notes.append("not steady")
        notes += [w for w in summary["step_time_s"].get("warnings", []) if "noisy" in w]
        if backend.get("cost"):
            notes.append(f"{fmt.usd(backend['cost']['usd_per_million_samples'])}/1M samples")
        memory = summary.get("peak_device_memory_bytes")
        table.add_row(
            label,
            backend["status"],
            fmt.step_time_with_ci(summary["step_time_s"]),
            fmt.rate(summary.get("samples_per_s"), ""),
            "reference" if name == reference else fmt.speedup(backend.get("comparison")),
            fmt.seconds(summary["first_step_s"]),
            fmt.size(memory) if memory is not None else f"RSS {fmt.size(summary.get('peak_host_rss_bytes'))}",
            "; ".join(notes),
        )
    return table


def print_summary(document: dict[str, Any], console: Console | None = None) -> None:
    (console or Console()).print(summary_table(document))
