"""Inline SVG charts for the HTML report: a few chart shapes, no JavaScript.

Every function returns SVG markup as a string.  Every text that reaches the
markup (labels, titles, legends) goes through ``esc``; numbers are formatted
here.  A chart with nothing to draw returns ``""`` so the caller can say why.
"""
from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence

from torchport.stats import median
from torchport.text import one_line

# Colour-blind-safe palette (Okabe-Ito), cycled per series.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
WIDTH = 720
LABEL_WIDTH = 190
ROW_HEIGHT = 22
FONT = 12
MAX_LABEL = 40


def esc(text: object) -> str:
    """Text from a result as one line of HTML: control characters as \\xNN, markup escaped."""
    return html.escape(one_line(text), quote=True)


def clip(text: object, limit: int = MAX_LABEL) -> str:
    """Labels are capped so a long name cannot push a chart off the page; the
    full text stays in the tooltip (<title>) and the tables."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _svg(height: float, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {WIDTH} {height:.0f}" '
            f'width="{WIDTH}" height="{height:.0f}" aria-label="{esc(title)}"><title>{esc(title)}</title>'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, text: object, anchor: str = "start", size: int = FONT, cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{klass}>'
            f"{esc(text)}</text>")


def nice_ticks(low: float, high: float, integer: bool = False, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]: steps of 1, 2,
    2.5 or 5 times a power of ten, whole numbers only for counts.  The first
    tick is at or below ``low``, the last at or above ``high``."""
    if not (math.isfinite(low) and math.isfinite(high)):
        low, high = 0.0, 1.0
    if high <= low:
        high = low + (1.0 if integer or low == 0 else abs(low) * 0.1)
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = 10 * power
    for multiple in (1, 2, 2.5, 5, 10):
        candidate = multiple * power
        if integer and (candidate < 1 or candidate != int(candidate)):
            continue
        if candidate * count >= (high - low) * 0.999:
            step = candidate
            break
    if integer:
        step = max(1.0, float(round(step)))
    first = math.floor(low / step + 1e-9) * step
    ticks = [first]
    while ticks[-1] < high - 1e-9 * step:
        ticks.append(first + len(ticks) * step)
    # 0.1 + 0.2 is not 0.3: round away the binary noise so a tick reads as the round number it is.
    return [round(tick, 12) for tick in ticks]


def _tick_text(value: float, unit: Callable[[float], str]) -> str:
    return unit(value) if value else "0"


def _axis(x0: float, x1: float, y: float, ticks: Sequence[float], unit: Callable[[float], str]) -> list[str]:
    parts = [f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="#888"/>']
    low, high = ticks[0], ticks[-1]
    for value in ticks:
        x = x0 + (x1 - x0) * (value - low) / ((high - low) or 1)
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" stroke="#888"/>')
        parts.append(_text(x, y + 16, _tick_text(value, unit), "middle", 10, "tick"))
    return parts


def legend(names: Sequence[str], y: float, x: float = LABEL_WIDTH,
           colours: Sequence[str] | None = None) -> tuple[list[str], float]:
    """Legend entries laid out left to right, wrapping; returns markup and the height used."""
    parts, cursor, row = [], x, 0
    for index, name in enumerate(names):
        label = clip(name, 28)
        width = 18 + 7 * len(label) + 14
        if cursor + width > WIDTH and cursor > x:
            cursor, row = x, row + 1
        top = y + row * 18
        fill = colours[index] if colours and index < len(colours) else colour(index)
        parts.append(f'<rect x="{cursor:.1f}" y="{top:.1f}" width="12" height="12" fill="{fill}"/>')
        parts.append(_text(cursor + 16, top + 10, label, size=11))
        cursor += width
    return parts, (row + 1) * 18 if names else 0


def stacked_bars(rows: Sequence[tuple[str, Sequence[float]]], parts: Sequence[str], unit: Callable[[float], str],
                 title: str, integer: bool = False, colours: Sequence[str] | None = None) -> str:
    """One horizontal bar per row, split into ``parts`` (same order in every row).
    ``integer``: the values are counts (whole-number ticks); ``colours``: one
    per part where a colour means something (never green for "unsupported")."""
    rows = [(label, [max(0.0, v or 0.0) for v in values]) for label, values in rows]
    if not rows or not any(sum(values) for _, values in rows):
        return ""
    ticks = nice_ticks(0.0, max(sum(values) for _, values in rows), integer)
    maximum = ticks[-1]
    # Room on the right for the total written after the longest bar.
    plot = WIDTH - LABEL_WIDTH - 80

    def fill(index: int) -> str:
        return colours[index] if colours and index < len(colours) else colour(index)
    body: list[str] = []
    for r, (label, values) in enumerate(rows):
        y = 10 + r * ROW_HEIGHT
        body.append(_text(LABEL_WIDTH - 6, y + 13, clip(label), "end"))
        x = float(LABEL_WIDTH)
        for p, value in enumerate(values):
            width = plot * value / maximum
            if width > 0:
                body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{ROW_HEIGHT - 6}" '
                            f'fill="{fill(p)}"><title>{esc(label)}: {esc(parts[p])} {esc(unit(value))}</title></rect>')
            x += width
        body.append(_text(x + 4, y + 13, unit(sum(values)), size=10))
    axis_y = 10 + len(rows) * ROW_HEIGHT + 4
    body += _axis(LABEL_WIDTH, LABEL_WIDTH + plot, axis_y, ticks, unit)
    keys, used = legend(parts, axis_y + 26, colours=[fill(i) for i in range(len(parts))])
    return _svg(axis_y + 30 + used, body + keys, title)


def interval_bars(rows: Sequence[tuple[str, float, float | None, float | None]], unit: Callable[[float], str],
                  title: str, reference_line: float | None = None, scale_max: float | None = None) -> str:
    """One bar per row (value) with its interval as a whisker [low, high].
    ``scale_max``: the axis reaches at least this (a capacity: 100% of a chip's
    memory), so a small share looks small."""
    rows = [row for row in rows if row[1] is not None and math.isfinite(row[1])]
    if not rows:
        return ""
    ticks = nice_ticks(0.0, max(scale_max or 0.0, *(max(v, h or 0.0) for _, v, _, h in rows)))
    maximum = ticks[-1]
    plot = WIDTH - LABEL_WIDTH - 90
    body: list[str] = []
    for r, (label, value, low, high) in enumerate(rows):
        y = 10 + r * ROW_HEIGHT
        mid = y + (ROW_HEIGHT - 6) / 2
        body.append(_text(LABEL_WIDTH - 6, y + 13, clip(label), "end"))
        body.append(f'<rect x="{LABEL_WIDTH}" y="{y:.1f}" width="{plot * value / maximum:.1f}" height="{ROW_HEIGHT - 6}" '
                    f'fill="{colour(r)}" fill-opacity="0.75"><title>{esc(label)}: {esc(unit(value))}</title></rect>')
        if low is not None and high is not None:
            x_low, x_high = LABEL_WIDTH + plot * low / maximum, LABEL_WIDTH + plot * high / maximum
            body.append(f'<path d="M{x_low:.1f} {mid:.1f}H{x_high:.1f}M{x_low:.1f} {mid - 5:.1f}V{mid + 5:.1f}'
                        f'M{x_high:.1f} {mid - 5:.1f}V{mid + 5:.1f}" stroke="#222" stroke-width="1.5" fill="none" '
                        f'class="interval"><title>95% CI {esc(unit(low))} to {esc(unit(high))}</title></path>')
        body.append(_text(LABEL_WIDTH + plot + 6, y + 13, unit(value), size=10))
    axis_y = 10 + len(rows) * ROW_HEIGHT + 4
    if reference_line is not None:
        x = LABEL_WIDTH + plot * reference_line / maximum
        body.append(f'<line x1="{x:.1f}" y1="6" x2="{x:.1f}" y2="{axis_y:.1f}" stroke="#c00" stroke-dasharray="4 3"/>')
    body += _axis(LABEL_WIDTH, LABEL_WIDTH + plot, axis_y, ticks, unit)
    return _svg(axis_y + 24, body, title)


def lines(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], x_label: str, y_unit: Callable[[float], str],
          title: str, markers: Sequence[tuple[int, float, float, str]] = (), log_y: bool = False,
          dashed: Sequence[int] = (), zero_based: bool = True) -> str:
    """Line chart, one polyline per series of (x, y) points.  ``markers`` are
    (series index, x, y, label) points drawn as rings (e.g. steady state)."""
    series = [(name, [(x, y) for x, y in points if y is not None and math.isfinite(y)]) for name, points in series]
    series = [(name, points) for name, points in series if points]
    if not series:
        return ""
    if log_y:
        series = [(n, [(x, y) for x, y in pts if y > 0]) for n, pts in series]
        series = [(n, pts) for n, pts in series if pts]
        if not series:
            return ""
    left, top, height = 70.0, 10.0, 200.0
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    # x is a step count: whole-number ticks, and the axis spans them.
    x_ticks = nice_ticks(min(xs), max(xs), integer=all(float(x).is_integer() for x in xs))
    x_min, x_max = x_ticks[0], x_ticks[-1]
    non_negative = min(ys) >= 0
    if log_y:
        y_min, y_max = math.log10(min(ys)), math.log10(max(ys))
        if y_max - y_min < 1e-9:
            y_min, y_max = y_min - 0.5, y_max + 0.5

        def to_y(v: float) -> float:
            return top + height * (1 - (math.log10(v) - y_min) / (y_max - y_min))
    else:
        if zero_based:
            y_ticks = nice_ticks(min(0.0, min(ys)), max(ys))
        else:  # the data's own range: a loss curve near 4.8 is not drawn against 0, nor below 0 if it cannot go there
            pad = (max(ys) - min(ys)) * 0.08 or abs(max(ys)) * 0.05 or 1.0
            y_ticks = nice_ticks(max(0.0, min(ys) - pad) if non_negative else min(ys) - pad, max(ys) + pad)
        y_min, y_max = y_ticks[0], y_ticks[-1]

        def to_y(v: float) -> float:
            return top + height * (1 - (v - y_min) / ((y_max - y_min) or 1))
    plot = WIDTH - left - 20

    def to_x(v: float) -> float:
        return left + plot * (v - x_min) / (x_max - x_min)

    body = [f'<rect x="{left}" y="{top}" width="{plot}" height="{height}" fill="none" stroke="#ccc"/>']
    if log_y:
        grid = [10 ** (y_min + (y_max - y_min) * i / 4) for i in range(5)]
    else:
        grid = y_ticks
    for value in grid:
        y = to_y(value)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot}" y2="{y:.1f}" stroke="#eee"/>')
        body.append(_text(left - 4, y + 4, y_unit(value), "end", 10, "tick"))
    for x_value in x_ticks:
        body.append(_text(to_x(x_value), top + height + 14, f"{x_value:g}", "middle", 10, "tick x-tick"))
    body.append(_text(left + plot / 2, top + height + 30, x_label, "middle", 11))
    for s, (name, points) in enumerate(series):
        path = " ".join(f"{'M' if i == 0 else 'L'}{to_x(x):.1f} {to_y(y):.1f}" for i, (x, y) in enumerate(points))
        dash = ' stroke-dasharray="6 4"' if s in dashed else ""
        body.append(f'<path d="{path}" fill="none" stroke="{colour(s)}" stroke-width="1.8"{dash} class="series">'
                    f"<title>{esc(name)}</title></path>")
        if len(points) == 1:
            x, y = points[0]
            body.append(f'<circle cx="{to_x(x):.1f}" cy="{to_y(y):.1f}" r="3" fill="{colour(s)}"/>')
    for s, x, y, label in markers:
        if log_y and y <= 0:
            continue
        body.append(f'<circle cx="{to_x(x):.1f}" cy="{to_y(y):.1f}" r="5" fill="none" stroke="{colour(s)}" '
                    f'stroke-width="2" class="marker"><title>{esc(label)}</title></circle>')
    keys, used = legend([name for name, _ in series], top + height + 40, left)
    return _svg(top + height + 44 + used, body + keys, title)


def strips(rows: Sequence[tuple[str, Sequence[float]]], unit: Callable[[float], str], title: str) -> str:
    """Each row's values as dots on a shared axis, with the row's median as a tick."""
    rows = [(label, [v for v in values if v is not None and math.isfinite(v)]) for label, values in rows]
    rows = [(label, values) for label, values in rows if values]
    if not rows:
        return ""
    low = min(min(values) for _, values in rows)
    high = max(max(values) for _, values in rows)
    span = (high - low) or abs(high) or 1.0
    ticks = nice_ticks(max(0.0, low - span * 0.05) if low >= 0 else low - span * 0.05, high + span * 0.05)
    low, high = ticks[0], ticks[-1]
    # Room on the right for half of the last tick's label, centred on the axis's end ("100.00 ms").
    plot = WIDTH - LABEL_WIDTH - 40
    body: list[str] = []

    def to_x(v: float) -> float:
        return LABEL_WIDTH + plot * (v - low) / (high - low)

    for r, (label, values) in enumerate(rows):
        y = 10 + r * ROW_HEIGHT + (ROW_HEIGHT - 6) / 2
        body.append(_text(LABEL_WIDTH - 6, y + 4, clip(label), "end"))
        body.append(f'<line x1="{LABEL_WIDTH}" y1="{y:.1f}" x2="{LABEL_WIDTH + plot}" y2="{y:.1f}" stroke="#eee"/>')
        for value in values:
            body.append(f'<circle cx="{to_x(value):.1f}" cy="{y:.1f}" r="3.5" fill="{colour(r)}" fill-opacity="0.6">'
                        f"<title>{esc(unit(value))}</title></circle>")
        middle = median(values)
        body.append(f'<line x1="{to_x(middle):.1f}" y1="{y - 8:.1f}" x2="{to_x(middle):.1f}" y2="{y + 8:.1f}" '
                    f'stroke="#222" stroke-width="2"><title>median {esc(unit(middle))}</title></line>')
    axis_y = 10 + len(rows) * ROW_HEIGHT + 4
    body.append(f'<line x1="{LABEL_WIDTH}" y1="{axis_y:.1f}" x2="{LABEL_WIDTH + plot}" y2="{axis_y:.1f}" stroke="#888"/>')
    for value in ticks:
        body.append(_text(to_x(value), axis_y + 16, _tick_text(value, unit), "middle", 10, "tick"))
    return _svg(axis_y + 24, body, title)


STATUS_FILL = {"pass": "#cdebd3", "fail": "#f6c5c0", "error": "#f6c5c0", "skipped": "#e6e6e6",
               "borderline": "#fbe3b4", "not_applicable": "#e6e6e6"}


def wrap(text: object, width: int, max_lines: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, breaking after - / _ . or spaces
    where it can; the last line is capped with an ellipsis when it does not fit."""
    words = [w for w in re.split(r"(?<=[-/_. ])", str(text)) if w]
    out = [""]
    for word in words:
        while len(word) > width:  # a long piece with no break in it
            if out[-1]:
                out.append("")
            out[-1], word = word[:width], word[width:]
            out.append("")
        if len(out[-1]) + len(word) > width and out[-1]:
            out.append("")
        out[-1] += word
    out = [line.strip() for line in out if line.strip()]
    if len(out) > max_lines:
        out = out[:max_lines]
        out[-1] = out[-1][: max(1, width - 1)] + "…"
    return out


def matrix(row_labels: Sequence[str], column_labels: Sequence[str], cells: dict[tuple[int, int], tuple[str, str]],
           title: str) -> str:
    """A grid of (text, status) cells; status picks the fill (pass/fail/...)."""
    if not row_labels or not column_labels or not cells:
        return ""
    column_width = min(140.0, (WIDTH - LABEL_WIDTH - 10) / len(column_labels))
    per_line = max(4, int(column_width / 6.5))
    # Column labels wrap onto up to three lines rather than being cut to the same prefix.
    wrapped = [wrap(label, per_line, 3) for label in column_labels]
    header = 14 * max(len(w) for w in wrapped) + 12
    body: list[str] = []
    for c, label_lines in enumerate(wrapped):
        x = LABEL_WIDTH + c * column_width + column_width / 2
        for i, part in enumerate(label_lines):
            body.append(_text(x, 14 + 14 * i, part, "middle", 11, "column-label"))
    for r, label in enumerate(row_labels):
        y = header + r * ROW_HEIGHT
        body.append(_text(LABEL_WIDTH - 6, y + 14, clip(label), "end"))
        for c in range(len(column_labels)):
            text, status = cells.get((r, c), ("", ""))
            x = LABEL_WIDTH + c * column_width
            if text:
                body.append(f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{column_width - 2:.1f}" height="{ROW_HEIGHT - 2}" '
                            f'fill="{STATUS_FILL.get(status, "#ffffff")}" stroke="#bbb" class="cell cell-{esc(status)}">'
                            f"<title>{esc(label)} / {esc(column_labels[c])}: {esc(text)}</title></rect>")
                body.append(_text(x + column_width / 2, y + 14, clip(text, int(column_width / 6.5)), "middle", 11))
    return _svg(header + len(row_labels) * ROW_HEIGHT + 6, body, title)
