"""Static meets dynamic: the redirects a script needed at run time beside
what ``torchport scan`` finds in the same file, and a verdict per backend.

Runs in the parent after the timing rounds; the result goes into the
document's ``script`` section, which the reports render.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torchport.records import BackendStatus, ErrorKind, RunStatus

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
    """One of: runs by configuration alone; runs after N redirects (both only
    with device evidence from every finished run); did not run on the backend
    (the script finished, but its work was not on the device); does not run."""
    runs = backend.get("runs") or []
    if backend.get("status") == BackendStatus.UNAVAILABLE:
        return {"verdict": "not available", "text": f"not available here: {backend.get('reason', '')}"}
    if backend.get("status") == "skipped":
        return {"verdict": "not run", "text": f"not run: {backend.get('reason', '')}"}
    error = backend.get("error")
    redirects: dict[str, int] = {}
    for run in runs:
        for fired in (run.get("script") or {}).get("redirects") or []:
            redirects[fired["location"]] = redirects.get(fired["location"], 0) + fired["count"]
    name = backend.get("name", "")
    if error is not None and error.get("kind") == ErrorKind.NOT_ON_DEVICE:
        return {"verdict": "did not run on the device", "text": error.get("message") or f"did not run on {name}"}
    if error or not any(run.get("status") == RunStatus.OK for run in runs):
        error = error or {}
        where = f" at {error['location']}" if error.get("location") else ""
        return {"verdict": "does not run", "text": f"does not run: {error.get('kind', 'no result')}: "
                                                   f"{error.get('message', '')}{where}"}
    proofs = [((run.get("script") or {}).get("evidence") or {}) for run in runs if run.get("status") == RunStatus.OK]
    unproven = [found for found in proofs if not found.get("ran_on_device")]
    if unproven:  # a run from before evidence was collected, or one whose evidence says no
        why = unproven[0].get("why") or f"did not run on {name}: no device evidence recorded"
        return {"verdict": "did not run on the device", "text": why}
    proof = f" (device evidence: {proofs[0]['proof']})" if proofs and proofs[0].get("proof") else ""
    if not redirects:
        return {"verdict": BY_CONFIGURATION, "text": BY_CONFIGURATION + proof, "evidence": proofs[0]}
    return {"verdict": "runs after redirects", "lines": sorted(redirects, key=lambda where: _split(where) or (where, 0)),
            "evidence": proofs[0],
            "text": f"runs after {sum(redirects.values())} redirect(s) at {len(redirects)} line(s) to change{proof}"}


def losses(run: dict[str, Any]) -> list[float]:
    """The run's loss per step, in step order (first step, warm-up, sustained)."""
    training = run.get("training") or {}
    blocks = [training.get("first_step") or {}, *(training.get("warmup") or {}).get("blocks", []),
              *(training.get("sustained") or {}).get("blocks", [])]
    return [value for block in blocks for value in (block.get("losses") or [])]


def loss_agreement(backends: dict[str, dict[str, Any]], reference: str | None) -> dict[str, Any]:
    from torchport.check.tolerance import trajectory_error

    ok_runs = {name: [run for run in b.get("runs", []) if run.get("status") == RunStatus.OK] for name, b in backends.items()}
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


def _model(backend: dict[str, Any]) -> dict[str, Any] | None:
    """The model facts of the backend's first run that recorded them (a run that
    did not run on the device still trained its model somewhere)."""
    for run in backend.get("runs") or []:
        facts = (run.get("script") or {}).get("model")
        if facts:
            return facts
    return None


UNTIED = "untied-after-move"


def configuration_findings(backends: dict[str, dict[str, Any]], reference: str | None) -> list[dict[str, Any]]:
    """How each backend's model differs from the reference's (parameter count,
    tied parameters, dtypes, buffers), as findings at the line that caused it:
    the line that moved the model to the device."""
    base = _model(backends.get(reference or "") or {})
    if base is None:
        return []
    findings = []
    for name, backend in backends.items():
        facts = _model(backend)
        if name == reference or facts is None:
            continue
        where = facts.get("moved_at") or base.get("moved_at")

        def finding(rule: str, message: str, name: str = name, where: str | None = where) -> None:
            findings.append({"backend": name, "rule": rule, "location": where, "message": message})

        tied_here = {tuple(group) for group in facts.get("tied") or []}
        for group in base.get("tied") or []:
            if tuple(group) not in tied_here:
                finding(UNTIED, f"{' and '.join(group)} are one tensor on {reference} but separate tensors on {name} "
                                "after the model was moved to the device here, so the optimizer steps them apart "
                                "(moving a module to an XLA device replaces each parameter on its own); tie them "
                                "again after the move (e.g. model.head.weight = model.embed.weight, or "
                                "model.tie_weights())")
        if facts.get("parameters") != base.get("parameters") or \
                facts.get("parameter_tensors") != base.get("parameter_tensors"):
            finding("parameter-count", f"the model has {facts.get('parameters')} parameters in "
                                       f"{facts.get('parameter_tensors')} tensors on {name}, {base.get('parameters')} "
                                       f"in {base.get('parameter_tensors')} on {reference}")
        if facts.get("dtypes") != base.get("dtypes"):
            finding("dtypes", f"parameter dtypes {', '.join(facts.get('dtypes') or [])} on {name}, "
                              f"{', '.join(base.get('dtypes') or [])} on {reference}")
        if facts.get("buffers") != base.get("buffers"):
            missing = sorted(set(base.get("buffers") or []) - set(facts.get("buffers") or []))
            extra = sorted(set(facts.get("buffers") or []) - set(base.get("buffers") or []))
            finding("buffers", f"buffers differ on {name}: missing {', '.join(missing) or 'none'}, "
                               f"extra {', '.join(extra) or 'none'} against {reference}")
    return findings


CONFIRMED = "confirmed at run time"
MISSED = "executed, missed by the scanner"
NOT_EXECUTED = "found statically, not executed"
EXECUTED_NOT_REDIRECTED = "found statically, executed without a redirect"
NOT_REDIRECTED = "found statically, not redirected (no line coverage to say whether it ran)"


def _user_files(script: Path, backends: dict[str, dict[str, Any]], torchrun_ranks: dict[str, dict[str, Any]] | None,
                coverage: dict[str, Any] | None) -> list[str]:
    """The script and every file of the user's it imported (its runs record their import closures) or ran
    (the untimed pass's line coverage, DataLoader worker processes included)."""
    files = {os.path.realpath(script)}
    files.update(os.path.realpath(f) for f in (coverage or {}).get("files") or {})
    for backend in backends.values():
        for run in backend.get("runs") or []:
            files.update(os.path.realpath(f) for f in (run.get("script") or {}).get("user_files") or [])
    for record in (torchrun_ranks or {}).values():
        files.update(os.path.realpath(f) for f in record.get("user_files") or [])
    return sorted(f for f in files if os.path.isfile(f) and f.endswith(".py"))


def _spans(finding: Any) -> list[tuple[int, int]]:
    """Every line range a finding carries: its own and its related ones (a definition's use)."""
    return [(finding.line, finding.end_line or finding.line),
            *((related.line, related.end_line or related.line) for related in finding.related)]


def cross_reference(script: Path, backends: dict[str, dict[str, Any]], reference: str | None = None,
                    torchrun_ranks: dict[str, dict[str, Any]] | None = None,
                    coverage: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run time against ``torchport scan`` over the script's own import closure.

    ``torchrun_ranks``: the distributed stage's per-rank records; their
    redirects count as run time too (the script's DDP branch runs only
    there).  A redirect matches a finding when its line is in any range the
    finding carries (where it is reported and where it is used).
    ``coverage``: line coverage of the user's files from the untimed pass
    (the trace stage); without it, a finding nothing redirected is not called
    "not executed"."""
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
    files = _user_files(script, backends, torchrun_ranks, coverage)
    try:
        result = scan([Path(f) for f in files], ScanConfig())
        findings = result.findings  # guarded ones too (severity info): the scanner did see those lines
        scan_error = None
    except Exception as exc:  # the verdicts stand without the static side
        findings, scan_error = [], f"{type(exc).__name__}: {exc}"
    covered = {os.path.realpath(path): set(lines) for path, lines in ((coverage or {}).get("files") or {}).items()}
    static: dict[tuple[str, int], list[Any]] = {}
    for finding in findings:
        static.setdefault((os.path.realpath(finding.path), finding.line), []).append(finding)
    matched: set[tuple[str, int]] = set()
    lines: list[dict[str, Any]] = []
    for key, found in sorted(static.items()):
        path = key[0]
        spans = [span for f in found for span in _spans(f)]
        hits = sorted(where for where in fired if where[0] == path and any(a <= where[1] <= b for a, b in spans))
        matched.update(hits)
        if hits:
            status = CONFIRMED
        elif coverage is None:
            status = NOT_REDIRECTED
        elif any(line in covered.get(path, set()) for a, b in spans for line in range(a, b + 1)):
            status = EXECUTED_NOT_REDIRECTED
        else:
            status = NOT_EXECUTED
        lines.append({
            "location": f"{path}:{key[1]}",
            "status": status,
            "redirects": sorted({call for hit in hits for call in fired[hit]["calls"]}),
            "backends": sorted({name for hit in hits for name in fired[hit]["backends"]}),
            "run_time_locations": [f"{p}:{n}" for p, n in hits],
            "rules": sorted({f.rule_id for f in found}),
            "fixable": any(f.fixable for f in found),
        })
    for key in sorted(set(fired) - matched):
        ran = fired[key]
        lines.append({"location": f"{key[0]}:{key[1]}", "status": MISSED, "redirects": sorted(ran["calls"]),
                      "backends": sorted(ran["backends"]), "run_time_locations": [f"{key[0]}:{key[1]}"],
                      "rules": [], "fixable": False})
    lines.sort(key=lambda item: _split(item["location"]) or (item["location"], 0))
    return {
        "path": str(script),
        "files_scanned": files,
        "coverage_source": (coverage or {}).get("source"),
        "verdicts": {name: verdict(backend) for name, backend in backends.items()},
        "lines": lines,
        "scan_error": scan_error,
        "parity": loss_agreement(backends, reference),
        "configuration": configuration_findings(backends, reference),
    }
