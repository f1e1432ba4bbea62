"""The HTML report's charts tell the truth: round ticks (whole numbers for
counts), no negative axis for quantities that cannot be negative, labels that
fit, unique column labels, memory drawn against the chip's capacity, and
colours that keep their meaning (never green for "unsupported")."""
from __future__ import annotations

import re

from torchport.records import TraceSection
from torchport.report import html, svg


def tick_labels(markup: str) -> list[str]:
    return re.findall(r'<text [^>]*class="tick[^"]*">([^<]*)</text>', markup)


def x_positions(markup: str) -> list[float]:
    return [float(x) for x in re.findall(r'<text x="([-\d.]+)"', markup)]


def test_count_axes_have_whole_number_ticks():
    chart = svg.stacked_bars([("cpu-compile: Dynamo frames", [1.0, 0.0, 0.0]), ("xla: graphs", [1.0, 1.0, 0.0])],
                             ["first step", "warm-up", "sustained"], lambda v: f"{v:.0f}", "compiled", integer=True)
    ticks = [t for t in tick_labels(chart) if t.isdigit()]
    assert ticks == sorted(set(ticks), key=int), ticks  # no "0 0 1 1": every tick is a different whole number
    assert svg.nice_ticks(0, 1.3, integer=True) == [0, 1, 2]


def test_step_axis_of_a_line_chart_has_whole_steps():
    chart = svg.lines([("cpu", [(1, 0.5), (2, 0.4), (3, 0.3), (4, 0.2), (5, 0.1), (6, 0.05)])], "training step",
                      lambda v: f"{v:.3g}", "loss", zero_based=False)
    steps = re.findall(r'class="tick x-tick">([^<]*)</text>', chart)
    assert steps and all(float(s).is_integer() for s in steps)
    assert len(steps) == len(set(steps))


def test_non_negative_quantities_never_get_a_negative_axis():
    loss = svg.lines([("cpu", [(1, 0.02), (2, 0.01), (3, 0.0)])], "step", lambda v: f"{v:.3g}", "mse", zero_based=False)
    assert not any(label.startswith("-") for label in tick_labels(loss)), tick_labels(loss)
    times = svg.strips([("cpu run 1", [0.0001, 0.0002, 0.00011])], lambda v: f"{v * 1e6:.0f} µs", "blocks")
    assert not any(label.startswith("-") for label in tick_labels(times)), tick_labels(times)
    for low, high in [(0, 0.00047), (4.6, 5.1), (1, 240)]:
        ticks = svg.nice_ticks(low, high)
        assert ticks[0] <= low and ticks[-1] >= high and ticks[0] >= 0


def test_value_labels_stay_inside_the_chart():
    chart = svg.stacked_bars([("a long backend name", [2000.0, 842.37])], ["compile", "run"],
                             lambda v: f"{v / 60:.2f} m", "phases")
    assert max(x_positions(chart)) + 7 * len("47.37 m") <= svg.WIDTH


def test_matrix_column_labels_are_not_cut_to_the_same_text():
    columns = ["cpu-compile->xla", "cpu-compile->cpu", "cpu", "cpu-compile", "xla", "xla->cpu-compile"]
    chart = svg.matrix(["checkpoint"], columns, {(0, i): ("pass", "pass") for i in range(len(columns))}, "checks")
    headers = re.findall(r'<text x="([\d.]+)"[^>]*class="column-label">([^<]*)</text>', chart)
    by_column: dict[str, str] = {}
    for x, part in headers:
        by_column[x] = by_column.get(x, "") + part
    assert sorted(by_column.values()) == sorted(c.replace("&gt;", ">") for c in columns) or \
        len(set(by_column.values())) == len(columns), by_column


def test_memory_fit_is_drawn_against_the_chip_capacity():
    trace = {"memory": {"peak_bytes": 20 * 2**20, "chips": [{"chip": "TPU v5e", "hbm_bytes": 16 * 2**30, "fits": True}]}}
    chart = html.memory_fit_chart(TraceSection.from_dict(trace))
    bar = float(re.search(r'<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)"', chart).group(1))
    plot = svg.WIDTH - svg.LABEL_WIDTH - 90
    assert bar < 0.01 * plot  # 20 MiB of 16 GiB is 0.1% of the bar's length, not most of it
    assert "100%" in tick_labels(chart)


def test_unsupported_ops_are_never_green():
    trace = {"op_support": {"xla": {"counts": {"supported": 10, "fallback": 2, "unsupported": 3, "unknown": 1}}}}
    chart = html.op_support_chart(TraceSection.from_dict(trace))
    fills = dict(re.findall(r'fill="(#[0-9A-Fa-f]{6})"><title>xla: (\w+)', chart))
    colours = {status: fill for fill, status in fills.items()}
    assert colours["unsupported"] == "#D55E00" and colours["fallback"] == "#E69F00"
    assert "#009E73" not in colours.values()  # the palette's green
