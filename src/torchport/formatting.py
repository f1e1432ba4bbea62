"""Number formatting shared by the renderers (the report package and each stage's own report)."""
from __future__ import annotations

from typing import Any

from torchport.records import BackendComparison, BackendEntry, Stat, StepTimeInterval
from torchport.text import one_line


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.2f} s"


def rate(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M{unit}/s"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k{unit}/s"
    return f"{value:.1f} {unit}/s"


def size(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(value)


def usd(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def step_time_with_ci(stat: Stat | StepTimeInterval | None) -> str:
    """A median step time and its 95% interval: a summary's statistic, or the comparison's copy of it."""
    if not stat:
        return "n/a"
    low, high = stat.ci95
    return f"{seconds(stat.median)} [{seconds(low)}, {seconds(high)}]"


def speedup(comparison: BackendComparison | None) -> str:
    if not comparison:
        return "reference"
    low, high = comparison.ci95
    return f"{comparison.speedup:.2f}x [{low:.2f}, {high:.2f}] {comparison.verdict}"


# --- text from apps and results, in markdown -----------------------------------------------------
# Names, messages, reasons and output tails are data: they must render as the
# characters they are, never as markdown, HTML or a broken table.

MARKDOWN_TEXT_CHARS = 500
# Enough to keep text inline and literal: emphasis, code, links and images
# (a "[" cannot open one), table cells, strikethrough, HTML and entities.
_MARKDOWN_SPECIAL = str.maketrans({ch: f"\\{ch}" for ch in "\\`*_[]|~"} | {
    "<": "&lt;", "&": "&amp;", "\n": " ", "\r": " "})


def md(value: Any, limit: int = MARKDOWN_TEXT_CHARS) -> str:
    """``value`` as literal markdown text on one line (safe in table cells)."""
    return one_line(value, limit + 1).translate(_MARKDOWN_SPECIAL)


def md_code(value: Any, limit: int = MARKDOWN_TEXT_CHARS) -> str:
    """``value`` as an inline code span, whatever backticks it holds."""
    text = one_line(value, limit + 1).replace("|", "¦")
    longest = max((len(run) for run in _backtick_runs(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_block(lines: list[str]) -> list[str]:
    """Lines as a fenced code block whose fence no line can close."""
    lines = [one_line(line) for line in lines]
    longest = max((len(run) for line in lines for run in _backtick_runs(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *lines, fence]


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for ch in text:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    if current:
        runs.append(current)
    return runs


def worker_environment(backend: BackendEntry) -> str:
    """The environment a backend's workers ran in, with the thread counts torch
    reported there ("main, 2 intra-op / 1 inter-op threads"); runs that
    disagree are all listed."""
    threads = sorted({(t.intra_op, t.inter_op) for run in backend.runs
                      for t in [run.worker.threads if run.worker else None] if t})
    where = backend.environment or "main"
    if not threads:
        return where
    return f"{where}, " + " or ".join(f"{intra} intra-op / {inter} inter-op threads" for intra, inter in threads)
