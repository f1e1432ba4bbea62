"""Prediction against measurement: what the trace said about a target family, beside what a target measured.

The prediction is the trace section of one target's result (``local`` when it
was evaluated, else the first target with a trace): its verdict per family
(runs, slow, blocked, unknown) and the ops it expects to fall back.  A
measurement is a backend of that family that ran on some target (the xla
backend for ``xla``, tpu for ``tpu``, cuda for ``cuda``, ...).  A verdict of
runs or slow is a hit when the backend produced a result, blocked when it did
not; unknown is not judged.  For the xla family the graph, fallback and
execution counts are compared too (``torchport.trace.verdict.compare_with_xla``).
The answer for a family is always what was measured, when something was.
"""
from __future__ import annotations


from torchport.records import (PredictedCounts, PredictionRow, PredictionTable, ResultDocument, TraceVerdictStatus)
from torchport.report.compare_text import md


def _family(backend: str) -> str | None:
    from torchport import backends

    cls = backends.registry().get(backend)
    return cls.trace_target() if cls is not None else None


def prediction_table(results: list[tuple[str, ResultDocument]]) -> PredictionTable:
    """``results``: each target's name and its result document."""
    with_trace = [(name, doc.trace) for name, doc in results if doc.trace is not None and doc.trace.verdicts]
    if not with_trace:
        return PredictionTable(note="no target's result holds a trace (evaluated with --no-trace): nothing was predicted")
    predictor, section = next(((n, trace) for n, trace in with_trace if n == "local"), with_trace[0])
    verdicts = section.verdicts
    rows = []
    for target, document in results:
        for backend, record in document.backends.items():
            family = _family(backend)
            if family is None or family not in verdicts or not record.runs:
                continue  # not a predicted family, or nothing measured there
            predicted = verdicts[family]
            runs = bool(record.summary)
            error = next((run.error for run in record.runs if run.error), None)
            measured = "runs" if runs else f"fails: {(error.kind if error else None) or 'no result'}"
            unjudged = predicted.status == TraceVerdictStatus.UNKNOWN
            hit = None if unjudged else (predicted.status != TraceVerdictStatus.BLOCKED) == runs
            row = PredictionRow(target=target, backend=backend, family=family, predicted=predicted.status,
                                predicted_text=predicted.text, predicted_fallback_ops=predicted.fallback_ops,
                                measured=measured, hit=hit, verdict=measured)
            if backend == "xla" and runs:
                from torchport.trace.verdict import compare_with_xla

                detail = compare_with_xla(section, {backend: record})
                if detail is not None:
                    row.counts = PredictedCounts(
                        agrees=detail.agrees, disagreements=detail.disagreements,
                        predicted_step_graphs=detail.predicted.step_graphs,
                        measured_compilations=[run.compilations for run in detail.measured.per_run])
            rows.append(row)
    judged = [row for row in rows if row.hit is not None]
    hits = sum(1 for row in judged if row.hit)
    return PredictionTable(predictor=predictor, rows=rows, hits=hits, judged=len(judged),
                           hit_rate=hits / len(judged) if judged else None,
                           note=None if rows else "no target measured a backend of a predicted family (only cpu ran)")


def _hit_text(row: PredictionRow) -> str:
    return "not judged" if row.hit is None else "hit" if row.hit else "MISS"


def _counts_text(row: PredictionRow) -> str:
    counts = row.counts
    if not counts:
        return ""
    text = f"graphs predicted {counts.predicted_step_graphs}, compiled {counts.measured_compilations}"
    return text + ("; agrees" if counts.agrees else "; " + "; ".join(counts.disagreements[:3]))


def summary_line(table: PredictionTable) -> str:
    if table.hit_rate is None:
        return table.note or "nothing judged"
    return (f"prediction against measurement (trace of {table.predictor}): {table.hits}/{table.judged} "
            f"hits ({table.hit_rate:.0%})")


def print_table(table: PredictionTable) -> None:
    print(summary_line(table))
    for row in table.rows:
        counts = _counts_text(row)
        print(f"  {row.family} on {row.target} ({row.backend}): predicted {row.predicted}, measured "
              f"{row.measured}: {_hit_text(row)}" + (f" ({counts})" if counts else ""))


def markdown(table: PredictionTable) -> str:
    lines = ["# Prediction against measurement", "",
             md(summary_line(table)) + ". The answer for a family is what its target measured.", ""]
    if table.rows:
        lines += ["| family | target | backend | predicted (trace) | fallbacks predicted | measured | hit | counts |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in table.rows:
            lines.append(f"| {md(row.family)} | {md(row.target)} | {md(row.backend)} | "
                         f"{md(row.predicted_text)} | {md(', '.join(row.predicted_fallback_ops) or 'none')} | "
                         f"{md(row.measured)} | {_hit_text(row)} | {md(_counts_text(row))} |")
    return "\n".join(lines) + "\n"
