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


def cross_reference(script: Path, backends: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from torchport.scan.config import ScanConfig
    from torchport.scan.scanner import scan

    fired: dict[tuple[str, int], dict[str, Any]] = {}
    for backend in backends.values():
        for run in backend.get("runs") or []:
            for redirect in (run.get("script") or {}).get("redirects") or []:
                key = _split(redirect["location"] or "")
                if key is None:
                    continue
                entry = fired.setdefault(key, {"location": redirect["location"], "calls": set(), "backends": set()})
                entry["calls"].add(redirect["call"])
                entry["backends"].add(backend["name"])
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
    }
