"""Number formatting shared by the renderers."""
from __future__ import annotations

from typing import Any


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


def size(value: int | None) -> str:
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


def step_time_with_ci(stat: dict[str, Any] | None) -> str:
    if not stat:
        return "n/a"
    low, high = stat["ci95"]
    return f"{seconds(stat['median'])} [{seconds(low)}, {seconds(high)}]"


def speedup(comparison: dict[str, Any] | None) -> str:
    if not comparison:
        return "reference"
    low, high = comparison["ci95"]
    return f"{comparison['speedup']:.2f}x [{low:.2f}, {high:.2f}] {comparison['verdict']}"
