"""Static meets dynamic: the redirects a script needed at run time beside
what ``torchport scan`` finds in the same file, and a verdict per backend.

Runs in the parent after the timing rounds; the result goes into the
document's ``script`` section, which the reports render.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchport.records import (
    DeviceEvidence,
    FiredRedirect,
    BackendEntry,
    BackendStatus,
    CheckStatus,
    ConfigurationFinding,
    ErrorKind,
    LossParity,
    ModelFacts,
    ParityResult,
    RunRecord,
    RunStatus,
    ScriptCoverage,
    ScriptLine,
    ScriptSection,
    ScriptVerdict,
    TorchrunRank,
)

BY_CONFIGURATION = "runs by configuration alone"
# Script mode has no float64 ground truth (torchport cannot rebuild the
# script's model in float64), so parity is the loss trajectory of the first
# PARITY_STEPS steps against the reference's first run, within a relative
# LOSS_TOLERANCE, widened to 10x the reference's own run-to-run difference
# when it has one.  Weaker than `torchport check`'s error-ratio rule, and said so.
PARITY_STEPS = 5
LOSS_TOLERANCE = 1e-3


@dataclass
class Fired:
    """The redirects that fired at one line: their calls, and where (a backend, or a torchrun rank)."""

    calls: set[str] = field(default_factory=set)
    backends: set[str] = field(default_factory=set)


def _split(location: str) -> tuple[str, int] | None:
    path, _, line = location.rpartition(":")
    return (os.path.realpath(path), int(line)) if line.isdigit() else None


def _verdict(**words: Any) -> ScriptVerdict:
    # Each kind of verdict has always written its keys in its own order: the keyword order here.
    return ScriptVerdict(key_order=()).put(**words)


def verdict(backend: BackendEntry) -> ScriptVerdict:
    """One of: runs by configuration alone; runs after N redirects (both only
    with device evidence from every finished run); did not run on the backend
    (the script finished, but its work was not on the device); does not run."""
    runs = backend.runs
    if backend.status == BackendStatus.UNAVAILABLE:
        return _verdict(verdict="not available", text=f"not available here: {backend.reason}")
    if backend.status == BackendStatus.SKIPPED:
        return _verdict(verdict="not run", text=f"not run: {backend.reason}")
    error = backend.error
    redirects: dict[str, int] = {}
    for run in runs:
        for fired in (run.script or {}).get("redirects") or []:
            redirects[fired["location"]] = redirects.get(fired["location"], 0) + fired["count"]
    name = backend.name
    if error is not None and error.kind == ErrorKind.NOT_ON_DEVICE:
        return _verdict(verdict="did not run on the device", text=error.message or f"did not run on {name}")
    if error or not any(run.status == RunStatus.OK for run in runs):
        where = f" at {error.location}" if error and error.location else ""
        kind, message = (error.kind, error.message) if error else ("no result", "")
        return _verdict(verdict="does not run", text=f"does not run: {kind}: {message}{where}")
    proofs = [((run.script or {}).get("evidence") or {}) for run in runs if run.status == RunStatus.OK]
    unproven = [found for found in proofs if not found.get("ran_on_device")]
    if unproven:  # a run from before evidence was collected, or one whose evidence says no
        why = unproven[0].get("why") or f"did not run on {name}: no device evidence recorded"
        return _verdict(verdict="did not run on the device", text=why)
    proof = f" (device evidence: {proofs[0]['proof']})" if proofs and proofs[0].get("proof") else ""
    if not redirects:
        return _verdict(verdict=BY_CONFIGURATION, text=BY_CONFIGURATION + proof, evidence=DeviceEvidence.from_dict(proofs[0]))
    return _verdict(verdict="runs after redirects", lines=sorted(redirects, key=lambda where: _split(where) or (where, 0)),
                    evidence=DeviceEvidence.from_dict(proofs[0]),
                    text=f"runs after {sum(redirects.values())} redirect(s) at {len(redirects)} line(s) to change{proof}")


def losses(run: RunRecord) -> list[float]:
    """The run's loss per step, in step order (first step, warm-up, sustained)."""
    return run.training.losses() if run.training else []


def loss_agreement(backends: dict[str, BackendEntry], reference: str | None) -> LossParity:
    from torchport.check.tolerance import trajectory_error

    ok_runs = {name: [run for run in b.runs if run.status == RunStatus.OK] for name, b in backends.items()}
    base = ok_runs.get(reference or "") or []
    if not base:
        return LossParity(key_order=()).put(status="not compared", reason="the reference has no finished run")
    truth = losses(base[0])[:PARITY_STEPS]
    noise = trajectory_error(losses(base[1])[:PARITY_STEPS], truth) if len(base) > 1 else None
    tolerance = max(LOSS_TOLERANCE, 10 * noise) if noise else LOSS_TOLERANCE
    verdicts = {}
    for name, runs in ok_runs.items():
        if name == reference or not runs:
            continue
        error = trajectory_error(losses(runs[0])[:PARITY_STEPS], truth)
        verdicts[name] = ParityResult(worst_relative_difference=error,
                                      status=CheckStatus.PASS if error <= tolerance else CheckStatus.FAIL)
    return LossParity(key_order=()).put(
        status="compared", steps=len(truth), tolerance=tolerance, reference_run_to_run=noise,
        rule=f"loss of the first {PARITY_STEPS} steps within {LOSS_TOLERANCE:g} relative of the reference's "
             "first run (10x its run-to-run difference when larger); no float64 ground truth in script mode",
        backends=verdicts)


def _model(backend: BackendEntry | None) -> ModelFacts | None:
    """The model facts of the backend's first run that recorded them (a run that
    did not run on the device still trained its model somewhere)."""
    for run in backend.runs if backend else []:
        facts = (run.script or {}).get("model")
        if facts:
            return ModelFacts.from_dict(facts)
    return None


UNTIED = "untied-after-move"


def configuration_findings(backends: dict[str, BackendEntry], reference: str | None) -> list[ConfigurationFinding]:
    """How each backend's model differs from the reference's (parameter count,
    tied parameters, dtypes, buffers), as findings at the line that caused it:
    the line that moved the model to the device."""
    base = _model(backends.get(reference or ""))
    if base is None:
        return []
    findings = []
    for name, backend in backends.items():
        facts = _model(backend)
        if name == reference or facts is None:
            continue
        where = facts.moved_at or base.moved_at

        def finding(rule: str, message: str, name: str = name, where: str | None = where) -> None:
            findings.append(ConfigurationFinding(backend=name, rule=rule, location=where, message=message))

        tied_here = {tuple(group) for group in facts.tied}
        for group in base.tied:
            if tuple(group) not in tied_here:
                finding(UNTIED, f"{' and '.join(group)} are one tensor on {reference} but separate tensors on {name} "
                                "after the model was moved to the device here, so the optimizer steps them apart "
                                "(moving a module to an XLA device replaces each parameter on its own); tie them "
                                "again after the move (e.g. model.head.weight = model.embed.weight, or "
                                "model.tie_weights())")
        if facts.parameters != base.parameters or facts.parameter_tensors != base.parameter_tensors:
            finding("parameter-count", f"the model has {facts.parameters} parameters in "
                                       f"{facts.parameter_tensors} tensors on {name}, {base.parameters} "
                                       f"in {base.parameter_tensors} on {reference}")
        if facts.dtypes != base.dtypes:
            finding("dtypes", f"parameter dtypes {', '.join(facts.dtypes)} on {name}, "
                              f"{', '.join(base.dtypes)} on {reference}")
        if facts.buffers != base.buffers:
            missing = sorted(set(base.buffers) - set(facts.buffers))
            extra = sorted(set(facts.buffers) - set(base.buffers))
            finding("buffers", f"buffers differ on {name}: missing {', '.join(missing) or 'none'}, "
                               f"extra {', '.join(extra) or 'none'} against {reference}")
    return findings


CONFIRMED = "confirmed at run time"
MISSED = "executed, missed by the scanner"
NOT_EXECUTED = "found statically, not executed"
EXECUTED_NOT_REDIRECTED = "found statically, executed without a redirect"
NOT_REDIRECTED = "found statically, not redirected (no line coverage to say whether it ran)"


def _user_files(script: Path, backends: dict[str, BackendEntry], torchrun_ranks: dict[str, TorchrunRank] | None,
                coverage: ScriptCoverage | None) -> list[str]:
    """The script and every file of the user's it imported (its runs record their import closures) or ran
    (the untimed pass's line coverage, DataLoader worker processes included)."""
    files = {os.path.realpath(script)}
    files.update(os.path.realpath(f) for f in (coverage.files if coverage else {}))
    for backend in backends.values():
        for run in backend.runs:
            files.update(os.path.realpath(f) for f in (run.script or {}).get("user_files") or [])
    for rank in (torchrun_ranks or {}).values():
        files.update(os.path.realpath(f) for f in rank.user_files or [])
    return sorted(f for f in files if os.path.isfile(f) and f.endswith(".py"))


def _spans(finding: Any) -> list[tuple[int, int]]:
    """Every line range a finding carries: its own and its related ones (a definition's use)."""
    return [(finding.line, finding.end_line or finding.line),
            *((related.line, related.end_line or related.line) for related in finding.related)]


def cross_reference(script: Path, backends: dict[str, BackendEntry], reference: str | None = None,
                    torchrun_ranks: dict[str, TorchrunRank] | None = None,
                    coverage: ScriptCoverage | None = None) -> ScriptSection:
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

    fired: dict[tuple[str, int], Fired] = {}
    sources = [(b.name, [FiredRedirect.from_dict(raw) for raw in (run.script or {}).get("redirects") or []])
               for b in backends.values() for run in b.runs]
    sources += [(f"torchrun rank {rank}", record.redirects) for rank, record in (torchrun_ranks or {}).items()]
    for name, redirects in sources:
        for redirect in redirects:
            key = _split(redirect.location or "")
            if key is None:
                continue
            entry = fired.setdefault(key, Fired())
            entry.calls.add(redirect.call)
            entry.backends.add(name)
    files = _user_files(script, backends, torchrun_ranks, coverage)
    try:
        result = scan([Path(f) for f in files], ScanConfig())
        findings = result.findings  # guarded ones too (severity info): the scanner did see those lines
        scan_error = None
    except Exception as exc:  # the verdicts stand without the static side
        findings, scan_error = [], f"{type(exc).__name__}: {exc}"
    covered = {os.path.realpath(path): set(lines) for path, lines in (coverage.files if coverage else {}).items()}
    static: dict[tuple[str, int], list[Any]] = {}
    for finding in findings:
        static.setdefault((os.path.realpath(finding.path), finding.line), []).append(finding)
    matched: set[tuple[str, int]] = set()
    lines: list[ScriptLine] = []
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
        lines.append(ScriptLine(
            location=f"{path}:{key[1]}",
            status=status,
            redirects=sorted({call for hit in hits for call in fired[hit].calls}),
            backends=sorted({name for hit in hits for name in fired[hit].backends}),
            run_time_locations=[f"{p}:{n}" for p, n in hits],
            rules=sorted({f.rule_id for f in found}),
            fixable=any(f.fixable for f in found),
        ))
    for key in sorted(set(fired) - matched):
        ran = fired[key]
        lines.append(ScriptLine(location=f"{key[0]}:{key[1]}", status=MISSED, redirects=sorted(ran.calls),
                                backends=sorted(ran.backends), run_time_locations=[f"{key[0]}:{key[1]}"],
                                rules=[], fixable=False))
    lines.sort(key=lambda item: _split(item.location) or (item.location, 0))
    return ScriptSection(
        path=str(script),
        files_scanned=files,
        coverage_source=coverage.source if coverage else None,
        verdicts={name: verdict(backend) for name, backend in backends.items()},
        lines=lines,
        scan_error=scan_error,
        parity=loss_agreement(backends, reference),
        configuration=configuration_findings(backends, reference),
    )
