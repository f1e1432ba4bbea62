"""Per-target summary (effort, portability score) and the text / JSON / SARIF renderers.

Portability score, per target (also in docs/scan.md):

    cost(finding) = 0                     if the rule is fine or only "info" on the target
                  = 0.5                   if ``torchport fix`` rewrites it
                  = 2 / 5 / 10            otherwise, by the rule's manual effort (low/medium/high)
                  x 0.5                   when the severity there is only "perf"
    score         = round(100 * 20 / (20 + sum of costs))

100 means nothing to change; one unfixed high-effort blocker gives 67; ten
unfixed low-effort blockers give 50.  Effort per target is the largest manual
effort among its error/silent/perf findings ("none" when all are auto-fixable).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from torchport import __version__
from torchport.scan import judged
from torchport.scan.model import Finding
from torchport.scan.policy import is_opt_in
from torchport.scan.rules import (EFFORTS, RULES, RULES_BY_ID, SEVERITIES, SEVERITY_RANK,
                                  finding_severity, finding_worst)
from torchport.scan.scanner import ScanResult
from torchport.text import one_line

_EFFORT_COST = {"low": 2.0, "medium": 5.0, "high": 10.0}
INFORMATION_URI = "https://github.com/torchport/torchport/blob/main/docs/scan.md"


_SNIPPET_CHARS = 200  # an excerpt of a long line: enough to see the token, bounded in size


def finding_cost(finding: Finding, target: str) -> float:
    rule = RULES_BY_ID[finding.rule_id]
    severity = finding_severity(finding, target)
    if severity in (None, "info"):
        return 0.0
    cost = 0.5 if finding.fixable else _EFFORT_COST[rule.effort]
    return cost * (0.5 if severity == "perf" else 1.0)


def summarise(result: ScanResult) -> dict:
    per_target = {}
    for target in result.targets:
        counts = dict.fromkeys(SEVERITIES, 0)
        effort = "none"
        cost = 0.0
        for finding in result.findings:
            rule = RULES_BY_ID[finding.rule_id]
            severity = finding_severity(finding, target)
            if severity is None:
                continue
            counts[severity] += 1
            cost += finding_cost(finding, target)
            if severity != "info" and not finding.fixable and EFFORTS.index(rule.effort) > EFFORTS.index(effort):
                effort = rule.effort
        per_target[target] = {**counts, "effort": effort, "score": round(100 * 20 / (20 + cost))}
    return {
        "files_scanned": result.files_scanned,
        "lines_scanned": result.lines_scanned,
        "files_skipped": len(result.skipped),
        "findings": len(result.findings),
        "fixable": sum(f.fixable for f in result.findings),
        "suppressed": result.suppressed,
        "min_torch": result.min_torch,
        "min_torch_source": result.min_torch_source,
        "targets": per_target,
    }


def _where(finding: Finding, targets) -> str:
    by_severity: dict[str, list[str]] = {}
    for target in targets:
        severity = finding_severity(finding, target)
        if severity:
            by_severity.setdefault(severity, []).append(target)
    parts = [f"{severity} on {', '.join(by_severity[severity])}" for severity in SEVERITIES
             if severity in by_severity]
    fine = [t for t in targets if finding_severity(finding, t) is None]
    if fine:
        parts.append(f"fine on {', '.join(fine)}")
    if finding.cap_reason:
        parts.append(f"{_reason_label(finding, targets)} because {finding.cap_reason}")
    return "; ".join(parts)


def _reason_label(finding: Finding, targets) -> str:
    """What the reason explains: a raise above the rule, a cap below it, or the rule's own severity."""
    if finding.raised_to:
        return finding.raised_to
    if finding.severity_cap:
        return f"only {finding.severity_cap}"
    return finding_worst(finding, targets) or "fine"


def excerpt(finding: Finding) -> tuple[str, int]:
    """(the source line, or a window of it around the finding, at most a few hundred
    characters; the character offset of the window in the line)."""
    line = finding.snippet.expandtabs(4).rstrip() if "\t" in finding.snippet else finding.snippet.rstrip()
    if len(line) <= _SNIPPET_CHARS:
        return line, 0
    start = max(0, finding.column - 1 - _SNIPPET_CHARS // 4)
    return line[start:start + _SNIPPET_CHARS], start


def render_text(result: ScanResult, min_severity: str = "perf") -> str:
    """Findings whose worst severity on the targets reaches ``min_severity`` (info
    findings change nothing; by default they are counted, not listed); the summary
    always counts every finding."""
    out: list[str] = []
    floor = SEVERITY_RANK[min_severity]
    shown = [f for f in result.findings if SEVERITY_RANK[finding_worst(f, result.targets) or "info"] >= floor]
    hidden = len(result.findings) - len(shown)
    for finding in shown:
        rule = RULES_BY_ID[finding.rule_id]
        mark = " [*]" if finding.fixable else ""
        path = one_line(finding.path)  # a newline in a file name must not forge a finding line
        out.append(f"{path}:{finding.line}:{finding.column}: {rule.id}{mark} {rule.title}: {one_line(finding.detail)}")
        if finding.snippet:
            gutter = str(finding.line)
            snippet, start = excerpt(finding)
            column = finding.column - start
            width = max(1, (finding.end_column - finding.column) if finding.end_line == finding.line
                        else len(snippet) - column + 1)
            width = min(width, max(1, len(snippet) - column + 1))
            out.append(f" {gutter} | {one_line(snippet)}")
            out.append(f" {' ' * len(gutter)} | {' ' * (column - 1)}{'^' * width}")
        for related in finding.related:
            out.append(f"   = {one_line(related.message)} at {path}:{related.line}:{related.column}")
        out.append(f"   = {_where(finding, result.targets)}")
        out.append(f"   = instead: {rule.replacement}")
        if finding.fix_note:
            out.append(f"   = {finding.fix_note}")
        out.append("")
    for skipped in result.skipped:
        out.append(f"{one_line(skipped.path)}: skipped: {one_line(skipped.reason)}")
    for unfinished in result.unfinished:
        out.append(f"unfinished pass over every file ({unfinished.name}): {one_line(unfinished.reason)}; findings "
                   "it would add are missing, and findings it would lower are reported more severely")
    if result.skipped or result.unfinished:
        out.append("")
    summary = summarise(result)
    out.append("target     error  silent  perf  info  effort  score")
    for target, row in summary["targets"].items():
        out.append(f"{target:<9} {row['error']:>6} {row['silent']:>7} {row['perf']:>5} {row['info']:>5}"
                   f"  {row['effort']:<6} {row['score']:>6}")
    out.append("")
    fixable = summary["fixable"]
    out.append(
        f"{summary['findings']} finding(s), {fixable} fixable with `torchport fix` [*] "
        f"(torch>={result.min_torch}, from {result.min_torch_source}); "
        f"{summary['files_scanned']} file(s), {summary['lines_scanned']} line(s) scanned, "
        f"{summary['files_skipped']} skipped, {summary['suppressed']} suppressed.")
    if hidden:
        below = "info" if min_severity == "perf" else f"below {min_severity}"
        how = "--show-info" if min_severity == "perf" else f"a lower --min-severity than {min_severity}"
        listed = {id(f) for f in shown}
        opt_in = sum(1 for f in result.findings if id(f) not in listed and is_opt_in(f))
        among = f", {opt_in} of them only under an opt-in option" if opt_in else ""
        out.append(f"{hidden} {below} finding(s) not listed{among} ({how} lists them; JSON and SARIF keep every "
                   "finding).")
    out.extend(_judged_lines(shown, result.targets))
    if any(row["error"] or row["silent"] for row in summary["targets"].values()):
        out.append(REACH_NOTE)
    return "\n".join(out) + "\n"


def _judged_lines(listed: list[Finding], targets) -> list[str]:
    """How often judges found the rules of the listed error/silent findings right, one line each."""
    kinds = sorted({(f.rule_id, worst) for f in listed
                    if (worst := finding_worst(f, targets)) in ("error", "silent")})
    found = judged.table()
    if not kinds or found is None:
        return []
    lines = ["how often independent judges found these rules right in public library code",
             f"  ({found.source()}):",
             f"  every rule    {found.overall.describe()}"]
    lines.extend(f"  {rule_id} {severity:<7} {found.describe(rule_id, severity)}" for rule_id, severity in kinds)
    return lines


# Independent judges found most error/silent findings on library code unreached without CUDA
# (docs/scan.md, precision on real code): the reader needs to know what the levels do not say,
# and where the evidence for their own script comes from.
REACH_COMMAND = ("torchport", "evaluate", "--script", "FILE", "--redirect-cuda", "-b", "cpu", "--", "ARGS")
REACH_NOTE = ("error and silent say what happens where the line runs, not that it runs: the scan does not follow "
              "callers in other files or options set elsewhere. For a script, `" + " ".join(REACH_COMMAND) + "` runs "
              "it and marks each finding in it and the modules it imports as confirmed at run time or not executed "
              "(give it enough steps to pass the warm-up).")


def finding_dict(finding: Finding, targets) -> dict:
    rule = RULES_BY_ID[finding.rule_id]
    return {
        "rule": rule.id,
        "name": rule.name,
        "title": rule.title,
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "detail": finding.detail,
        "snippet": excerpt(finding)[0],
        "severity": {t: finding_severity(finding, t) for t in targets},
        "severity_note": finding.cap_reason or None,
        "related": [{"line": r.line, "column": r.column, "end_line": r.end_line,
                     "end_column": r.end_column, "message": r.message} for r in finding.related],
        "fixable": finding.fixable,
        "fix_note": finding.fix_note or None,
        "replacement": rule.replacement,
        "min_torch": rule.min_torch,
        "judged": _judged_dict(finding, targets),
    }


def _judged_dict(finding: Finding, targets) -> dict | None:
    found = judged.table()
    worst = finding_worst(finding, targets)
    verdicts = found.at(finding.rule_id, worst) if found is not None else None
    return {"severity": worst, **verdicts.as_dict()} if verdicts else None


def render_json(result: ScanResult) -> str:
    document = {
        "tool": "torchport",
        "version": __version__,
        "targets": result.targets,
        "summary": summarise(result),
        "judged": found.as_dict() if (found := judged.table()) is not None else None,
        "findings": [finding_dict(f, result.targets) for f in result.findings],
        "skipped": [{"path": s.path, "reason": s.reason} for s in result.skipped],
        "unfinished_passes": [{"name": u.name, "reason": u.reason} for u in result.unfinished],
    }
    return json.dumps(document, indent=2) + "\n"


_SARIF_LEVEL = {"error": "error", "silent": "warning", "perf": "warning", "info": "note", None: "note"}


def _sarif_level(worst: str | None) -> str:
    """error -> error; silent and perf -> warning; info -> note."""
    return _SARIF_LEVEL[worst]


def _sarif_judged(rule_id: str, worst: str | None) -> dict:
    """The rule's judged figures at the severity it has on these targets (none for perf and info,
    never sampled), and GitHub code scanning's ``precision`` read from them, which it uses to rank
    alerts, once there are enough verdicts and packages to say."""
    found = judged.table()
    verdicts = found.at(rule_id, worst) if found is not None and worst in ("error", "silent") else None
    if found is None or verdicts is None:
        return {}
    properties: dict[str, Any] = {"judged": {"severity": worst, **verdicts.as_dict(), "asOf": found.as_of,
                                             "where": judged.WHERE}}
    if verdicts.enough:
        share = verdicts.correct / verdicts.judged
        properties["precision"] = ("very-high" if share >= 0.9 else "high" if share >= 0.75
                                   else "medium" if share >= 0.5 else "low")
    return properties


def _uri(path: str) -> str:
    return quote(Path(path).as_posix(), safe="/:")


def render_sarif(result: ScanResult) -> str:
    rules = [rule for rule in RULES if rule.worst(result.targets) is not None]
    index = {rule.id: i for i, rule in enumerate(rules)}
    descriptors = [{
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": f"{rule.detects} {rule.why}"},
        "help": {"text": f"Instead: {rule.replacement}"
                         + (f" (torch>={rule.min_torch})." if rule.min_torch else ".")
                         + f"\n\nBefore:\n{rule.before}\nAfter:\n{rule.after}",
                 "markdown": f"**Instead:** {rule.replacement}\n\n```python\n{rule.before}```\n\n"
                             f"```python\n{rule.after}```"},
        "helpUri": f"{INFORMATION_URI}#{rule.id.lower()}",
        "defaultConfiguration": {"level": _sarif_level(rule.worst(result.targets))},
        "properties": {
            "severity": {t: rule.severity[t] for t in result.targets},
            "fixable": rule.fixable,
            "effort": rule.effort,
            "minTorch": rule.min_torch,
            "tags": ["portability"],
            **_sarif_judged(rule.id, rule.worst(result.targets)),
        },
    } for rule in rules]
    results = []
    for finding in result.findings:
        rule = RULES_BY_ID[finding.rule_id]
        region: dict[str, Any] = {"startLine": finding.line, "startColumn": finding.column,
                  "endLine": finding.end_line, "endColumn": max(finding.end_column, 1)}
        if finding.snippet:
            region["snippet"] = {"text": excerpt(finding)[0]}
        entry = {
            "ruleId": rule.id,
            "ruleIndex": index[rule.id],
            "level": _sarif_level(finding_worst(finding, result.targets)),
            "message": {"text": f"{rule.title}: {finding.detail}. {_where(finding, result.targets)}. "
                                f"Instead: {rule.replacement}"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(finding.path), "uriBaseId": "%SRCROOT%"},
                "region": region}}],
            "properties": {"fixable": finding.fixable,
                           "severity": {t: finding_severity(finding, t) for t in result.targets},
                           "judged": _judged_dict(finding, result.targets)},
        }
        if finding.related:
            entry["relatedLocations"] = [{
                "id": number,
                "message": {"text": related.message},
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(finding.path), "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": related.line, "startColumn": related.column,
                               "endLine": related.end_line, "endColumn": max(related.end_column, 1)}},
            } for number, related in enumerate(finding.related)]
        results.append(entry)
    notifications = [{
        "level": "warning",
        "message": {"text": f"skipped: {s.reason}"},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(s.path),
                                                                 "uriBaseId": "%SRCROOT%"}}}],
    } for s in result.skipped] + [{
        "level": "error",
        "message": {"text": f"unfinished pass over every file ({u.name}): {u.reason}"},
    } for u in result.unfinished]
    root = Path(os.getcwd()).resolve().as_uri() + "/"
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "torchport", "version": __version__,
                                "informationUri": INFORMATION_URI, "rules": descriptors}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root}},
            "invocations": [{"executionSuccessful": not result.unfinished and not any(
                s.internal for s in result.skipped),
                             "toolExecutionNotifications": notifications}],
            "results": results,
            "properties": {"summary": summarise(result)},
        }],
    }
    return json.dumps(log, indent=2) + "\n"


def worst_rank(result: ScanResult) -> int:
    ranks = [SEVERITY_RANK[s] for f in result.findings if (s := finding_worst(f, result.targets))]
    return max(ranks, default=0)


__all__ = ["render_json", "render_sarif", "render_text", "summarise", "worst_rank"]
