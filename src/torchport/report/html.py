"""``report.html``: one self-contained page per result or comparison.

No network, no CDN, no JavaScript: charts are inline SVG (``report/svg.py``)
and styles are inline CSS, so the file reads offline, prints, and can be
attached to a ticket.  The document it was made from is embedded in a
``<script type="application/json">`` block for reuse (``<`` written as
``\\u003c`` so no text in it can close the block).  Every string from a
result passes through ``esc``.
"""
from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from torchport.limits import REPORT_TAIL_LINES
from torchport.records import (
    Record,
    Check,
    ComparisonDocument,
    ComparisonEntry,
    ErrorRecord,
    ParityFigures,
    ResultDocument,
    Summary,
    TraceSection,
)
from torchport.report import compare_text, model
from torchport import formatting as fmt
from torchport.report import svg
from torchport.report.svg import esc
from torchport.report.verdict import verdict_line

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1a1a1a;margin:24px auto;max-width:1100px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:13px}.warn{background:#fff4e5;border-left:4px solid #e69f00;padding:6px 10px;margin:8px 0}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:grid;grid-template-columns:1fr;gap:12px}
figure.chart{margin:0;border:1px solid #e3e3e3;border-radius:6px;padding:10px;break-inside:avoid;page-break-inside:avoid}
figure.chart figcaption{font-weight:600;margin-bottom:6px}figure.chart .note{color:#555;font-size:12px;margin:4px 0 0}
figure.chart svg{max-width:100%;height:auto}p.empty{color:#777;font-style:italic}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-word;font-size:12px}
.pass{color:#1b7a36}.fail{color:#b3261e;font-weight:600}
@media print{body{margin:0;max-width:none}figure.chart{border:none}a{color:inherit}}
"""

TEXT_LIMIT = 2000  # cap on any one text from a result (error messages, reasons)


def cap(text: Any, limit: int = TEXT_LIMIT) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def embedded_json(document: Record) -> str:
    """The record's JSON, safe inside <script type="application/json">: no '<' at all, so
    no '</script>' and no '<!--' can appear, and it parses back to the same value."""
    return json.dumps(document.to_dict(), separators=(",", ":"), default=str).replace("<", "\\u003c")


def page(title: str, body: list[str], document: Record, data_id: str) -> str:
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # No script may run and nothing may load from anywhere, even if an escape were missed.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(cap(title, 200))}</title>",
        f"<style>{CSS}</style></head><body>",
        *body,
        f'<script type="application/json" id="{data_id}">{embedded_json(document)}</script>',
        "</body></html>",
    ]) + "\n"


def figure(key: str, title: str, chart: str, empty_reason: str, note: str = "") -> str:
    inner = chart or f'<p class="empty">{esc(empty_reason)}</p>'
    note_html = f'<p class="note">{esc(note)}</p>' if note else ""
    state = "drawn" if chart else "empty"
    return (f'<figure class="chart" id="chart-{key}" data-chart="{key}" data-state="{state}">'
            f"<figcaption>{esc(title)}</figcaption>{inner}{note_html}</figure>")


def table(headers: list[str], rows: list[list[Any]], numeric: Collection[int] = frozenset()) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{esc(cap(cell))}</td>' for i, cell in enumerate(row))
        + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ms(value: float) -> str:
    return fmt.seconds(value)


def _label(name: str, proxy_for: str | None) -> str:
    """A backend's name as charts show it: proxies say so (the tables say for what)."""
    return f"{name} (proxy)" if proxy_for else name


# --- charts of one result ----------------------------------------------------------------------

def phases_chart(measured: dict[str, Summary]) -> str:
    parts = ["process start", "imports", "init", "first step", "warm-up", "sustained"]
    rows = []
    for name, s in measured.items():
        phase_seconds = s.phase_seconds or {}
        rows.append((name, [s.process_start_s or 0, s.import_s or 0, s.init_s or 0,
                            s.first_step_s or 0, phase_seconds["warmup_s"], phase_seconds["sustained_s"]]))
    return svg.stacked_bars(rows, parts, fmt.seconds, "Phases per backend (median over runs)")


def step_time_chart(measured: dict[str, Summary]) -> str:
    rows = [(name, s.step_time_s.median, s.step_time_s.ci95[0], s.step_time_s.ci95[1])
            for name, s in measured.items() if s.step_time_s]
    return svg.interval_bars(rows, _ms, "Sustained time per step, median with 95% interval")


def warmup_charts(measured: dict[str, Summary]) -> list[str]:
    charts: list[str] = []
    for name, s in measured.items():
        series, markers = [], []
        for index, run in enumerate(s.runs_series or []):
            points, start = [(x, y) for x, y in run.points], run.sustained_start
            series.append((f"run {run.round + 1}", points))
            steady = run.steady
            at = next(((x, y) for x, y in points if x >= start), points[-1])
            markers.append((index, at[0], at[1], ("steady state reached" if steady else "warm-up bound hit, NOT steady")
                            + f" at step {start}"))
        chart = svg.lines(series, "step", _ms, f"Warm-up: time per step, {name}", markers=markers, log_y=True)
        charts.append(figure(f"warmup-{len(charts)}", f"Warm-up curve per run: {name}", chart, "no timed steps",
                             "Each point is one timed block (per-step mean), log scale; the ring marks where the sustained "
                             "steps begin (steady state, or the warm-up bound when it was not reached)."))
    return charts


def spread_chart(measured: dict[str, Summary]) -> str:
    rows = []
    for name, s in measured.items():
        for run in s.runs_series or []:
            rows.append((f"{name} run {run.round + 1}", run.sustained_step_s))
    return svg.strips(rows, _ms, "Sustained block times per run")


def loss_chart(measured: dict[str, Summary]) -> str:
    series = []
    for name, s in measured.items():
        losses = (s.runs_series or [])[0].losses or []
        series.append((name, list(enumerate(losses, start=1))))
    return svg.lines(series, "training step", lambda v: f"{v:.3g}", "Loss per step, first run of each backend",
                     zero_based=False)


def parity_loss_chart(checks: list[Check], check_reference: str) -> str:
    series, dashed = [], []
    truth = None
    for check in checks:
        if check.name != "parity":
            continue
        figures = check.figures_as(ParityFigures)
        if figures.losses:
            series.append((f"{check.backend}", list(enumerate(figures.losses, start=1))))
            truth = truth or figures.float64_losses
            if not any(label.startswith("reference") for label, _ in series) and figures.reference_losses:
                series.append((f"reference ({check_reference})", list(enumerate(figures.reference_losses, start=1))))
    if truth:
        dashed.append(len(series))
        series.append(("float64 (cpu)", list(enumerate(truth, start=1))))
    return svg.lines(series, "training step", lambda v: f"{v:.4g}", "Parity check: loss per step against float64",
                     dashed=dashed, zero_based=False)


COUNTER_PHASES = ("first_step", "warmup", "sustained")


def compile_chart(measured: dict[str, Summary]) -> str:
    """Per backend and phase, what its compiler compiled: XLA's graphs, and
    torch.compile's frames (Dynamo's compiles that produced code, recompiles
    included), one bar each, labelled with what it counts."""
    rows = []
    for name, s in measured.items():
        counters = {row.phase: row.counters for row in s.counters or []}
        values = [(counters.get(phase) or {}).get("compilations") for phase in COUNTER_PHASES]
        if any(v is not None for v in values):
            rows.append((f"{name}: graphs", [float(v or 0) for v in values]))
        frames = [((counters.get(phase) or {}).get("torch_compile") or {}).get("frames_compiled") for phase in COUNTER_PHASES]
        if any(v is not None for v in frames):
            rows.append((f"{name}: Dynamo frames", [float(v or 0) for v in frames]))
    return svg.stacked_bars(rows, ["first step", "warm-up", "sustained"], lambda v: f"{v:.0f}",
                            "Compiled per phase: XLA graphs, torch.compile (Dynamo) frames (first successful run)",
                            integer=True)


def check_matrix(checks: list[Check]) -> str:
    names = list(dict.fromkeys(c.name for c in checks))
    subjects = list(dict.fromkeys(c.backend or c.pair or "(all)" for c in checks))
    cells = {(names.index(c.name), subjects.index(c.backend or c.pair or "(all)")): (str(c.status), str(c.status))
             for c in checks}
    return svg.matrix(names, subjects, cells, "Checks: outcome per check and backend or pair")


SUPPORT_ORDER = ("supported", "fallback", "unsupported", "unknown")
# What each support status means, in the colour-blind-safe palette: blues run on
# the device, orange falls back to the CPU, vermillion does not run, grey is unknown.
SUPPORT_COLOURS = {"supported": "#0072B2", "native": "#0072B2", "decomposed": "#56B4E9", "fallback": "#E69F00",
                   "unsupported": "#D55E00", "blocked": "#D55E00", "unknown": "#999999"}


def op_support_chart(trace: TraceSection | None) -> str:
    """Per target, the traced ops by support status (from the trace's op-support tables)."""
    support = trace.op_support if trace else {}
    statuses = list(SUPPORT_ORDER) + sorted({k for a in support.values() for k in a.counts} - set(SUPPORT_ORDER))
    rows = [(target, [float(answer.counts.get(status, 0)) for status in statuses]) for target, answer in support.items()]
    return svg.stacked_bars(rows, statuses, lambda v: f"{v:.0f}", "Traced ops per target by support status",
                            integer=True, colours=[SUPPORT_COLOURS.get(status, "#666666") for status in statuses])


def memory_fit_chart(trace: TraceSection | None) -> str:
    memory = trace.memory if trace else None
    if not memory or not memory.chips:
        return ""
    rows = [(f"{chip.chip}" + ("" if chip.fits else " (does not fit)"), 100.0 * memory.peak_bytes / chip.hbm_bytes, None, None)
            for chip in memory.chips if chip.hbm_bytes]
    return svg.interval_bars(rows, lambda v: f"{v:.3g}%", "Estimated memory per step as a share of each chip's HBM",
                             reference_line=100.0, scale_max=100.0)


# --- one result --------------------------------------------------------------------------------

def _budget_section(document: ResultDocument, parts: model.Sections) -> list[str]:
    """The time budget: the precision each backend reached, and what it could not buy."""
    from torchport.report.budget import budget_rows, could_not_buy

    budget = document.budget
    if not budget:
        return []
    body = ["<h2>Time budget and precision</h2>",
            table(["backend", "runs", "precision reached", "target met", "each run's share", "why each run's sampling stopped"],
                  budget_rows(budget))]
    could_not = could_not_buy(budget, parts.budget_too_small)
    if could_not:
        body += ["<p>What the budget could not buy:</p>", "<ul>", *[f"<li>{esc(cap(line))}</li>" for line in could_not],
                 "</ul>"]
    return body


def render(document: ResultDocument) -> str:
    """The HTML report of one result document (statistics already refreshed)."""
    env, config = document.environment, document.config
    reference = document.reference
    parts = model.sections(document)
    measured = parts.measured
    charted = {_label(name, b.proxy_for): b.measured() for name, b in measured.items()}
    body = [
        f"<h1>torchport evaluation: {esc(cap(document.app_spec, 300))}</h1>",
        f'<p class="meta">Status <b>{esc(document.status)}</b>'
        + (f" ({esc(cap(document.status_reason))})" if document.status_reason else "")
        + f" · {esc(document.updated)} · torchport {esc(document.tool.version)} · torch {esc(env.torch)}"
        f" · Python {esc(env.python)} · {esc(env.cpu)} ({esc(env.cpu_count)} cores)"
        f" · host {esc(env.hostname)}</p>",
        f'<p class="meta">dtype {esc(config["dtype"])}, seed {esc(config["seed"])}, {esc(config["steps"])} sustained steps '
        f'in {esc(config["blocks"])} blocks, warm-up bound {esc(config["max_warmup_steps"])}, {esc(config.get("repeats", 1))} '
        f"fresh process(es) per backend. Reference: {esc(reference)}. A difference is called only when the 95% "
        "interval of the speed ratio excludes 1 and it is at least 5%.</p>",
    ]
    if document.reference_note:
        body.append(f'<p class="warn">{esc(cap(document.reference_note))}</p>')
    consistency = document.config_consistency
    if consistency and consistency.differing:
        body.append(f'<p class="warn">Configuration differs on {esc(", ".join(consistency.differing))}: '
                    "their figures are not comparable with the others.</p>")
    from torchport.report import answer

    body += answer.html(answer.build(document))
    body += ["<h2>Verdict per backend</h2>", "<ul>"]
    body += [f"<li>{esc(cap(verdict_line(name, b, reference)))}</li>" for name, b in parts.backends.items()]
    body.append("</ul>")
    if measured:
        body += ["<h2>Figures</h2>", table(
            ["backend", "step time [95% CI]", "samples/s", "vs reference", "per step, compile included", "first step",
             "peak memory", "cost / 1M samples"],
            [[f"{name} (proxy for {b.proxy_for})" if b.proxy_for else name, fmt.step_time_with_ci(s.step_time_s), fmt.rate(s.samples_per_s, "samples"),
              "reference" if name == reference else fmt.speedup(b.comparison),
              fmt.seconds(s.time_per_step_compile_included_s), fmt.seconds(s.first_step_s),
              fmt.size(s.peak_device_memory_bytes) if s.peak_device_memory_bytes is not None
              else f"host RSS {fmt.size(s.peak_host_rss_bytes)}",
              fmt.usd(b.cost.usd_per_million_samples) if b.cost else "no price"]
             for name, b in measured.items() for s in [b.measured()]])]
    notes = [f"{name}: {note}" for name, b in measured.items() for note in b.measured().notes]
    if notes:
        body += ["<h2>Warnings</h2>", "<ul>", *[f"<li>{esc(cap(n))}</li>" for n in notes], "</ul>"]
    failed = parts.does_not_run_here
    if failed:
        body.append("<h2>Does not run here</h2>")
        for name, b in failed.items():
            error = b.error or ErrorRecord()
            body.append(f"<h3>{esc(name)}: {esc(str(b.status))}</h3><p>{esc(str(error.kind))}: "
                        f"{esc(cap(error.message))}"
                        + (f" at <code>{esc(cap(error.location, 300))}</code>" if error.location else "")
                        + (f"; inside <code>{esc(cap(error.library_frame, 300))}</code>" if error.library_frame else "")
                        + "</p>")
            tail = b.failures.last_stderr_tail if b.failures else None
            if tail:
                body.append(f"<pre>{chr(10).join(esc(cap(line)) for line in tail[-REPORT_TAIL_LINES:])}</pre>")
    if parts.stage_errors:
        body += ["<h2>Stages that could not finish</h2>", "<ul>",
                 *[f"<li>{esc(e.stage)}: {esc(cap(e.message))}"
                   + (f" at <code>{esc(cap(e.location, 300))}</code>" if e.location else "") + "</li>"
                   for e in parts.stage_errors], "</ul>"]
    body += _budget_section(document, parts)
    if document.script:
        from torchport.script.report import html_section

        body += html_section(document, esc, cap, table)
    body += ["<h2>Charts</h2>", '<div class="charts">']
    body.append(figure("phases", "Phases per backend", phases_chart(charted) if measured else "", "no backend ran"))
    body.append(figure("step-time", "Sustained step time per backend",
                       step_time_chart(charted) if measured else "", "no backend ran"))
    body += warmup_charts(charted) if measured else [figure("warmup-0", "Warm-up curve", "", "no backend ran")]
    body.append(figure("spread", "Block-time spread per run", spread_chart(charted) if measured else "",
                       "no backend ran", "Each dot is one sustained block's time per step; the bar is the run's median."))
    body.append(figure("loss", "Loss trajectories per backend", loss_chart(charted) if measured else "",
                       "no backend ran"))
    checks, trace = document.check_records(), document.trace
    check_reference = document.checks.config.reference if document.checks else "cpu"
    body.append(figure("parity-loss", "Loss in the parity check, with the float64 reference",
                       parity_loss_chart(checks, check_reference),
                       "script mode's parity is the loss table in the Script mode section above" if document.script
                       else "no parity check with loss trajectories in this result (run with the checks stage)"))
    body.append(figure("compile", "Compile counts per phase", compile_chart(charted) if measured else "",
                       "no compiler counters in this result: only compiling backends (xla, *-compile) record "
                       "them; the first-step time in the phases chart carries compilation"))
    body.append(figure("checks", "Check matrix", check_matrix(checks),
                       "no checks in this result (run without --no-checks)"))
    body.append(figure("op-support", "Op support per target", op_support_chart(trace),
                       "no op trace in this result (run without --no-trace)"))
    body.append(figure("memory-fit", "Memory fit per chip (estimate)", memory_fit_chart(trace),
                       "no memory estimate in this result (it comes from the op trace)",
                       "An estimate from the traced step (parameters, gradients, optimizer state, activations)."))
    body.append("</div>")
    if checks:
        from torchport.check.report import headline, subject

        body += ["<h2>Checks</h2>", table(["check", "backend / pair", "status", "figures", "reason"],
                                          [[c.name, subject(c), str(c.status), headline(c), c.reason] for c in checks])]
    if trace and trace.findings:
        body += ["<h2>Op trace findings</h2>", table(
            ["rule", "severity", "where", "what", "count", "fix"],
            [[f"{f.id} {f.rule}", str(f.severity), f.location or "", f.detail, f.count, f.fix] for f in trace.findings])]
    if trace and trace.verdicts:
        body += ["<h2>Readiness per target</h2>",
                 table(["target", "verdict"], [[name, v.text] for name, v in trace.verdicts.items()])]
    if trace and (trace.evaluation or trace.device_apis):
        from torchport.trace.report import device_api_lines, evaluation_text

        kept_apart = evaluation_text(trace)
        body += [f"<p>Kept apart: {esc(cap(kept_apart, 2000))}.</p>" if kept_apart else "",
                 *(["<h3>Device-typed APIs seen at run time (scan's rules)</h3>",
                    table(["call"], [[line] for line in device_api_lines(trace)])] if trace.device_apis else [])]
    body += ["<h2>What was verified</h2>", table(
        ["backend", "kind", "verification", "environment"],
        [[name, f"proxy for {b.proxy_for}" if b.proxy_for else b.title or "", b.verification,
          fmt.worker_environment(b)] for name, b in parts.backends.items()])]
    body.append('<p class="meta">The result document is embedded in this file '
                '(<code>script#torchport-result</code>, JSON).</p>')
    return page(f"torchport evaluation: {document.app_spec}", body, document, "torchport-result")


# --- a comparison ------------------------------------------------------------------------------

def _entry_label(entry: ComparisonEntry) -> str:
    return f"{entry.machine} · {_label(entry.backend, entry.proxy_for)}"


def render_comparison(comparison: ComparisonDocument) -> str:
    entries = comparison.entries
    body = [
        f"<h1>torchport comparison: reference {esc(cap(compare_text.reference_text(comparison), 400))}</h1>",
        f'<p class="meta">{esc(comparison.created)} · torchport {esc(comparison.tool["version"])}. Ratio = reference '
        "time / time (&gt; 1: faster), 95% interval from an unpaired bootstrap of the raw block samples; a difference is "
        "called only when the interval excludes 1 and it is at least 5%. Cost from the sustained throughput and each "
        "result's price per hour.</p>",
        "<h2>Machines</h2>",
        table(["machine", "file", "app", "status", "updated"],
              [[m.name, m.file, m.app, m.status, m.updated] for m in comparison.machines]),
        "<h2>Figures</h2>",
        table(compare_text.HEADERS, compare_text.rows(comparison)),
    ]
    if comparison.not_comparable:
        body += ["<h2>Not comparable (left out of the ratios)</h2>",
                 table(["machine", "backend", "reason"], [[i.machine, i.backend or "(whole file)", i.reason]
                                                          for i in comparison.not_comparable])]
    if comparison.environment_differences:
        machines = [m.name for m in comparison.machines]
        body += ["<h2>Environment differences</h2>",
                 table(["field", *machines], [[row.field, *[row.values.get(m, "n/a") for m in machines]]
                                              for row in comparison.environment_differences])]
    if comparison.regressions is not None:
        found = comparison.regressions
        body.append(f"<h2>Regressions (over {esc(comparison.fail_on_regression_pct)}%, significant)</h2>")
        body.append("<ul>" + "".join(f'<li class="fail">{esc(r.machine)}:{esc(r.backend)} '
                                     f"{r.slower_by:.1%} slower</li>" for r in found) + "</ul>" if found else "<p>None.</p>")
        not_gated = comparison.regressions_not_gated or []
        if not_gated:
            body.append("<ul>" + "".join(f"<li>not gated: {esc(r.machine)}:{esc(r.backend)} looks "
                                         f"{r.slower_by:.1%} slower, but {esc(r.why)}</li>" for r in not_gated) + "</ul>")
    comparable = [e for e in entries if e.comparable]
    body += ["<h2>Charts</h2>", '<div class="charts">']
    body.append(figure("step-time", "Sustained step time per machine and backend", svg.interval_bars(
        [(_entry_label(e), step.median, step.ci95[0], step.ci95[1]) for e in comparable if (step := e.step_time_s)],
        _ms, "Sustained time per step, median with 95% interval"), "no comparable entries"))
    body.append(figure("ratio", "Speed against the reference", svg.interval_bars(
        [(_entry_label(e), ratio.speedup, ratio.ci95[0], ratio.ci95[1]) for e in comparable if (ratio := e.ratio)],
        lambda v: f"{v:.2f}x", "Speed ratio to the reference with 95% interval (line: 1)", reference_line=1.0),
        "no entry besides the reference is comparable"))
    costed = [(e, e.cost) for e in comparable if e.cost]
    body.append(figure("cost", "Cost per 1M samples per machine and backend", svg.interval_bars(
        [(_entry_label(e), cost.usd_per_million_samples, cost.usd_per_million_samples_ci95[0],
          cost.usd_per_million_samples_ci95[1]) for e, cost in costed],
        fmt.usd, "USD per 1M samples with 95% interval"),
        "no prices: add them to the evaluations (--price) or here (--price MACHINE:BACKEND=USD_PER_HOUR)"))
    body.append(figure("first-step", "Time to first step per machine and backend", svg.stacked_bars(
        [(_entry_label(e), [(e.time_to_first_step_s or 0) - (e.first_step_s or 0), e.first_step_s or 0])
         for e in entries], ["start, imports, init", "first step"], fmt.seconds, "Time to the end of the first step"),
        "no entries"))
    body.append("</div>")
    return page("torchport comparison", body, comparison, "torchport-comparison")
