"""One verdict per target, and the check of the prediction against a real xla run.

A verdict is one of:

* ``runs``: "runs as is": every traced op was looked up and is supported, and
  no finding slows or blocks the target;
* ``slow``: "runs with N fallbacks / M recompilations (slow)";
* ``blocked``: "blocked by ..." (a blocker finding, or a step larger than every
  chip of the target);
* ``unknown``: nothing blocks in the trace, but op support could not be looked
  up (the backend is not installed and publishes no op list).
"""
from __future__ import annotations

from typing import Any

from torchport.trace.findings import LAZY_TARGETS, SEVERITY_RANK

# The harness reads each timed block's loss values after the block (protocol.py),
# which on torch_xla runs aten::_local_scalar_dense on the CPU: expected in the
# measured counters whatever the app does.
HARNESS_FALLBACKS = {"aten::_local_scalar_dense"}


def predicted_compilations(section: dict[str, Any]) -> int:
    """Distinct step graphs an XLA-style backend would compile: one per batch
    signature, more when the graph changes with the same shapes."""
    shapes = section.get("shapes") or {}
    graphs = max(1, shapes.get("signatures") or 1)
    changes = [f for f in section.get("findings", []) if f["id"] == "TR104"]
    return graphs + sum(f["count"] for f in changes)


def target_verdict(name: str, section: dict[str, Any]) -> dict[str, Any]:
    findings = [f for f in section.get("findings", []) if name in f["targets"]]
    support = (section.get("op_support") or {}).get(name) or {}
    statuses = support.get("ops") or {}
    fallbacks = sorted(op for op, entry in statuses.items() if entry["status"] == "fallback")
    unknown = sorted(op for op, entry in statuses.items() if entry["status"] == "unknown")
    recompilations = predicted_compilations(section) - 1 if name in LAZY_TARGETS else 0
    blockers = [f for f in findings if f["targets"][name] == "blocker"]
    slow = [f for f in findings if f["targets"][name] == "slow"]
    memory = section.get("memory") or {}
    chips = [c for c in memory.get("chips", []) if name in c["targets"]]
    too_big = bool(chips) and not any(c["fits"] for c in chips)

    verdict: dict[str, Any] = {"fallbacks": len(fallbacks), "fallback_ops": fallbacks,
                               "recompilations": recompilations, "blockers": len(blockers) + int(too_big),
                               "slow_findings": len(slow), "unknown_ops": len(unknown),
                               "op_support": support.get("kind", "none")}
    # Said with every verdict whose table names its own source (TorchTPU's).
    source = f" [{support['summary']}]" if support.get("summary") else ""
    if blockers or too_big:
        causes = [f"{f['title']} ({_where(f)})" for f in blockers]
        if too_big:
            largest = max(chips, key=lambda c: c["hbm_bytes"])
            causes.append(f"memory: the step needs about {_gib(memory['peak_bytes'])}, more than the largest chip "
                          f"({largest['chip']}, {largest['hbm']})")
        verdict.update(status="blocked", text="blocked by " + causes[0] +
                       (f" and {len(causes) - 1} more" if len(causes) > 1 else "") + source)
    elif fallbacks or recompilations or slow:
        parts = []
        if fallbacks:
            parts.append(f"{len(fallbacks)} fallback{'s' if len(fallbacks) != 1 else ''}")
        if recompilations:
            parts.append(f"{recompilations} recompilation{'s' if recompilations != 1 else ''}")
        others = sorted({f["title"] for f in slow if f["id"] not in ("TR103", "TR104", "TR109")})
        text = "runs with " + " / ".join(parts) if parts else "runs"
        if others:
            text += ("; " if parts else ", with ") + "; ".join(others)
        text += " (slow)"
        if unknown:
            text += f"; op support unknown for {len(unknown)} op(s) ({support.get('note') or 'not looked up'})"
        verdict.update(status="slow", text=text + source)
    elif unknown:
        verdict.update(status="unknown", text=f"no blocker found in the trace; op support unknown for {len(unknown)} "
                       f"op(s) ({support.get('note') or support.get('source') or 'not looked up'})")
    else:
        minor = [f for f in findings if f["targets"][name] == "minor"]
        verdict.update(status="runs", text="runs as is" + (f" ({len(minor)} minor finding{'s' if len(minor) != 1 else ''})"
                                                           if minor else "") + source)
    return verdict


def _where(finding: dict[str, Any]) -> str:
    return finding.get("location") or "no user location"


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


# ---- prediction vs. a measured xla run ------------------------------------------------------------


def measured_xla(document: dict[str, Any]) -> dict[str, Any] | None:
    """Compile and fallback counts of the xla backend's successful runs."""
    backend = (document.get("backends") or {}).get("xla") or {}
    runs = [run for run in backend.get("runs", []) if (run.get("training") or {}).get("counters")]
    if not runs:
        return None
    per_run = []
    for run in runs:
        counters = run["training"]["counters"]
        phases = [counters.get(p) or {} for p in ("first_step", "warmup", "sustained")]
        fallbacks: dict[str, int] = {}
        for phase in phases:
            for op, count in (phase.get("fallback_ops") or {}).items():
                fallbacks[op] = fallbacks.get(op, 0) + int(count)
        per_run.append({
            "compilations": sum(int(p.get("compilations") or 0) for p in phases),
            "sustained_compilations": run["training"].get("sustained_compilations"),
            "graph_cuts": sum(int(p.get("graph_cuts") or 0) for p in phases),
            "fallback_ops": fallbacks,
            "steps": run["training"].get("steps_total"),
        })
    return {"runs": len(per_run), "per_run": per_run}


def compare_with_xla(section: dict[str, Any], document: dict[str, Any]) -> dict[str, Any] | None:
    """Side by side: what the trace predicts for torch_xla and what the xla
    backend measured; every disagreement is listed with why it matters."""
    measured = measured_xla(document)
    if measured is None:
        return None
    support = ((section.get("op_support") or {}).get("xla") or {}).get("ops") or {}
    predicted_ops = sorted({name for entry in support.values() for name in entry.get("falls_back_as", [])
                            if entry["status"] == "fallback"})
    measured_ops = sorted({op for run in measured["per_run"] for op in run["fallback_ops"]})
    compilations = predicted_compilations(section)
    disagreements = []
    for op in measured_ops:
        if op not in predicted_ops and op not in HARNESS_FALLBACKS:
            disagreements.append(f"{op} fell back to the CPU on xla but the trace did not predict it")
    for op in predicted_ops:
        if op not in measured_ops:
            disagreements.append(f"the trace predicted a CPU fallback of {op} but the xla run executed none")
    for index, run in enumerate(measured["per_run"], 1):
        if compilations > 1 and run["compilations"] < compilations:
            disagreements.append(f"run {index}: predicted at least {compilations} step graphs (distinct shapes), "
                                 f"measured {run['compilations']} compilations")
        if compilations == 1 and run["sustained_compilations"]:
            disagreements.append(f"run {index}: predicted static shapes, but xla compiled "
                                 f"{run['sustained_compilations']} graph(s) during the sustained steps")
    return {
        "predicted": {"fallback_ops": predicted_ops, "step_graphs": compilations,
                      "host_syncs_per_step": sum(f["per_step"] or 0 for f in section.get("findings", [])
                                                 if f["id"] == "TR101")},
        "measured": measured,
        "expected_from_harness": sorted(HARNESS_FALLBACKS & set(measured_ops)),
        "disagreements": disagreements,
        "agrees": not disagreements,
        "rules": "fallback ops must match as sets (the harness's own loss reads excepted); with more than one "
                 "predicted step graph the run must compile at least that many; with one, the sustained steps "
                 "must compile nothing",
    }


def worst(verdicts: dict[str, dict[str, Any]]) -> str:
    order = {"blocked": 0, "slow": 1, "unknown": 2, "runs": 3}
    return min((v["status"] for v in verdicts.values()), key=order.__getitem__, default="runs")


__all__ = ["target_verdict", "compare_with_xla", "predicted_compilations", "SEVERITY_RANK", "worst"]
