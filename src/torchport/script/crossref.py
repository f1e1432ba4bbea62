"""Static meets dynamic: the redirects a script needed at run time beside
what ``torchport scan`` finds in the same file, and a verdict per backend.

Runs in the parent after the timing rounds; the result goes into the
document's ``script`` section, which the reports render.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BY_CONFIGURATION = "runs by configuration alone"
# Script mode has no float64 ground truth (torchport cannot rebuild the
# script's model in float64), so parity is the loss trajectory of the first
# PARITY_STEPS steps against the reference's first run, within a relative
# LOSS_TOLERANCE, widened to 10x the reference's own run-to-run difference
# when it has one.  Weaker than `torchport check`'s error-ratio rule, and said so.
PARITY_STEPS = 5
LOSS_TOLERANCE = 1e-3


def _split(location: str) -> tuple[str, int] | None:
    path, _, line = location.rpartition(":")
    return (os.path.realpath(path), int(line)) if line.isdigit() else None


def verdict(backend: dict[str, Any]) -> dict[str, Any]:
    """One of: runs by configuration alone; runs after N redirects; does not run."""
    runs = backend.get("runs") or []
    if backend.get("status") == "unavailable":
        return {"verdict": "not available", "text": f"not available here: {backend.get('reason', '')}"}
    error = backend.get("error")
    redirects: dict[str, int] = {}
    for run in runs:
        for fired in (run.get("script") or {}).get("redirects") or []:
            redirects[fired["location"]] = redirects.get(fired["location"], 0) + fired["count"]
    if error or not any(run.get("status") == "ok" for run in runs):
        error = error or {}
        where = f" at {error['location']}" if error.get("location") else ""
        return {"verdict": "does not run", "text": f"does not run: {error.get('kind', 'no result')}: "
                                                   f"{error.get('message', '')}{where}"}
    if not redirects:
        return {"verdict": BY_CONFIGURATION, "text": BY_CONFIGURATION}
    return {"verdict": "runs after redirects", "lines": sorted(redirects, key=lambda where: _split(where) or (where, 0)),
            "text": f"runs after {sum(redirects.values())} redirect(s) at {len(redirects)} line(s) to change"}


def losses(run: dict[str, Any]) -> list[float]:
    """The run's loss per step, in step order (first step, warm-up, sustained)."""
    training = run.get("training") or {}
    blocks = [training.get("first_step") or {}, *(training.get("warmup") or {}).get("blocks", []),
              *(training.get("sustained") or {}).get("blocks", [])]
    return [value for block in blocks for value in (block.get("losses") or [])]


def loss_agreement(backends: dict[str, dict[str, Any]], reference: str | None) -> dict[str, Any]:
    from torchport.check.tolerance import trajectory_error

    ok_runs = {name: [run for run in b.get("runs", []) if run.get("status") == "ok"] for name, b in backends.items()}
    base = ok_runs.get(reference or "") or []
    if not base:
        return {"status": "not compared", "reason": "the reference has no finished run"}
    truth = losses(base[0])[:PARITY_STEPS]
    noise = trajectory_error(losses(base[1])[:PARITY_STEPS], truth) if len(base) > 1 else None
    tolerance = max(LOSS_TOLERANCE, 10 * noise) if noise else LOSS_TOLERANCE
    verdicts = {}
    for name, runs in ok_runs.items():
        if name == reference or not runs:
            continue
        error = trajectory_error(losses(runs[0])[:PARITY_STEPS], truth)
        verdicts[name] = {"worst_relative_difference": error, "status": "pass" if error <= tolerance else "fail"}
    return {"status": "compared", "steps": len(truth), "tolerance": tolerance, "reference_run_to_run": noise,
            "rule": f"loss of the first {PARITY_STEPS} steps within {LOSS_TOLERANCE:g} relative of the reference's "
                    "first run (10x its run-to-run difference when larger); no float64 ground truth in script mode",
            "backends": verdicts}


def cross_reference(script: Path, backends: dict[str, dict[str, Any]], reference: str | None = None,
                    torchrun_ranks: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``torchrun_ranks``: the distributed stage's per-rank records; their
    redirects count as run time too (the script's DDP branch runs only there)."""
    from torchport.scan.config import ScanConfig
    from torchport.scan.scanner import scan

    fired: dict[tuple[str, int], dict[str, Any]] = {}
    sources = [(b["name"], (run.get("script") or {}).get("redirects") or [])
               for b in backends.values() for run in b.get("runs") or []]
    sources += [(f"torchrun rank {rank}", record.get("redirects") or [])
                for rank, record in (torchrun_ranks or {}).items()]
    for name, redirects in sources:
        for redirect in redirects:
            key = _split(redirect["location"] or "")
            if key is None:
                continue
            entry = fired.setdefault(key, {"location": redirect["location"], "calls": set(), "backends": set()})
            entry["calls"].add(redirect["call"])
            entry["backends"].add(name)
    try:
        result = scan([script], ScanConfig())
        findings = result.findings  # guarded ones too (severity info): the scanner did see those lines
        scan_error = None
    except Exception as exc:  # the verdicts stand without the static side
        findings, scan_error = [], f"{type(exc).__name__}: {exc}"
    static: dict[tuple[str, int], list[Any]] = {}
    for finding in findings:
        static.setdefault((os.path.realpath(finding.path), finding.line), []).append(finding)
    lines = []
    for key in sorted(set(fired) | set(static)):
        found = static.get(key, [])
        ran = fired.get(key)
        lines.append({
            "location": f"{key[0]}:{key[1]}",
            "status": ("confirmed at run time" if ran and found else
                       "executed, missed by the scanner" if ran else "found statically, not executed"),
            "redirects": sorted(ran["calls"]) if ran else [],
            "backends": sorted(ran["backends"]) if ran else [],
            "rules": sorted({f.rule_id for f in found}),
            "fixable": any(f.fixable for f in found),
        })
    return {
        "path": str(script),
        "verdicts": {name: verdict(backend) for name, backend in backends.items()},
        "lines": lines,
        "scan_error": scan_error,
        "parity": loss_agreement(backends, reference),
    }
