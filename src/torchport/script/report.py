"""What script mode found, in the shapes every output renders: report.md,
report.html and the terminal summary read the same rows from here, so they
never disagree (verdicts with their device evidence, redirects with what they
became, the cross-reference with scan, parity, configuration differences,
torchrun, and the machine's load during each run)."""
from __future__ import annotations

from typing import Any

from torchport.limits import HEAVY_LOAD_PER_CPU
from torchport.records import RunStatus


def heavy_load(run: dict[str, Any]) -> str | None:
    """'1-minute load 10.2 on 2 CPUs' when the run was measured under heavy load (the 1-minute load average
    per CPU, at the run's start or end, above HEAVY_LOAD_PER_CPU: its speed is not the backend's alone),
    else None."""
    load = (run.get("script") or {}).get("machine_load") or {}
    cpus = load.get("cpus") or 1
    values = [value for value in (load.get("start"), load.get("end")) if value is not None]
    if not values or max(values) / cpus <= HEAVY_LOAD_PER_CPU:
        return None
    return f"1-minute load {max(values):.1f} on {cpus} CPU(s)"


def load_notes(document: dict[str, Any]) -> list[str]:
    """One note per backend whose speed was measured (in part) under heavy load."""
    notes = []
    for name, backend in document.get("backends", {}).items():
        loaded = [text for run in backend.get("runs") or [] if run.get("status") == RunStatus.OK
                  for text in [heavy_load(run)] if text]
        if loaded:
            notes.append(f"{name}: speed measured under heavy load ({len(loaded)} of {len(backend['runs'])} run(s); "
                         f"highest {max(loaded)}): the ratio to the reference may be the machine's, not the backend's")
    return notes


def redirects(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every redirect that fired, per line and call: backends, count, what it became."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for name, backend in document.get("backends", {}).items():
        for run in backend.get("runs") or []:
            for fired in (run.get("script") or {}).get("redirects") or []:
                row = rows.setdefault((fired["location"] or "?", fired["call"]),
                                      {"location": fired["location"] or "?", "call": fired["call"], "count": 0,
                                       "backends": set(), "becomes": {}})
                row["count"] += fired["count"]
                row["backends"].add(name)
                if fired.get("becomes"):
                    row["becomes"][name] = fired["becomes"]
    return [{**row, "backends": sorted(row["backends"])} for _, row in sorted(rows.items())]


def autocasts(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each autocast region the script opened, per backend: asked for, ran as (dtype or disabled)."""
    rows = []
    for name, backend in document.get("backends", {}).items():
        seen: dict[str, dict[str, Any]] = {}
        for run in backend.get("runs") or []:
            for item in (run.get("script") or {}).get("autocast") or []:
                seen.setdefault(item["location"], item)
        rows += [{"backend": name, **item} for item in seen.values()]
    return rows


def parity_rows(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(backend, worst relative difference, status) for every backend but the reference."""
    script = document.get("script") or {}
    parity = script.get("parity") or {}
    compared = parity.get("backends") or {}
    rows = []
    for name, verdict in (script.get("verdicts") or {}).items():
        if name == document.get("reference"):
            continue
        if name in compared:
            rows.append((name, f"{compared[name]['worst_relative_difference']:.2e}", compared[name]["status"]))
        elif verdict.get("verdict") == "did not run on the device":
            rows.append((name, "–", f"not compared: {verdict['text']}"))
        else:
            rows.append((name, "–", f"not compared: {verdict.get('text', 'no finished run')}"))
    return rows


def torchrun_line(document: dict[str, Any]) -> str | None:
    ddp = document.get("script_distributed")
    if not ddp:
        return None
    return (f"under torchrun ({ddp.get('nproc_per_node')} processes on {ddp.get('backend')}): {ddp['status']}, "
            f"{ddp.get('reason', '')}")


def terminal_lines(document: dict[str, Any]) -> list[str]:
    """The script section of the terminal summary: one line each."""
    script = document.get("script")
    if not script:
        return []
    lines = [f"script {name}: {verdict['text']}" for name, verdict in script.get("verdicts", {}).items()]
    lines += [f"script parity {name}: {status}" + (f" (worst relative difference {diff})" if diff != "–" else "")
              for name, diff, status in parity_rows(document)]
    lines += [f"script {item['backend']}: {item['message']} at {item['location'] or '?'}"
              for item in script.get("configuration") or []]
    lines += [f"script {row['backend']}: autocast at {row['location']} asked for {row.get('requested_device_type')}, "
              + (f"ran as {row.get('device_type')}, {row['dtype']}" if row["enabled"] else "ran disabled: float32")
              for row in autocasts(document)
              if row.get("requested_device_type") != row.get("device_type") or not row["enabled"]]
    counts: dict[str, int] = {}
    for item in script.get("lines") or []:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    if counts:
        lines.append("script lines tied to CUDA: " + ", ".join(f"{count} {status}" for status, count in counts.items())
                     + " (report.md lists them)")
    ddp = torchrun_line(document)
    if ddp:
        lines.append(f"script {ddp}")
    return lines + load_notes(document)


def html_section(document: dict[str, Any], esc: Any, cap: Any, table: Any) -> list[str]:
    """The Script mode section of report.html (``esc``, ``cap`` and ``table`` are the page's own helpers)."""
    script = document["script"]
    body = ["<h2>Script mode</h2>",
            f"<p>The script <code>{esc(cap(script['path'], 300))}</code> ran unmodified in each backend's worker. "
            "A backend counts as run only with evidence from its device.</p>",
            table(["backend", "verdict"], [[name, v["text"]] for name, v in script.get("verdicts", {}).items()])]
    fired = redirects(document)
    if fired:
        body += ["<h3>Redirects (--redirect-cuda)</h3>", table(
            ["line", "call", "became", "backends", "count"],
            [[row["location"], row["call"], "; ".join(f"{n}: {b}" for n, b in row["becomes"].items()) or "–",
              ", ".join(row["backends"]), row["count"]] for row in fired], numeric={4})]
    regions = autocasts(document)
    if regions:
        body += ["<h3>Mixed precision (autocast) as it ran</h3>", table(
            ["backend", "line", "asked for", "ran as"],
            [[row["backend"], row["location"], row.get("requested_device_type"),
              f"{row.get('device_type')}, {row['dtype']}" if row["enabled"] else "disabled: float32"] for row in regions])]
    if script.get("configuration"):
        body += ["<h3>The model differs between backends</h3>", table(
            ["backend", "rule", "line", "finding"],
            [[item["backend"], item["rule"], item["location"] or "?", item["message"]] for item in script["configuration"]])]
    if script.get("lines"):
        body += ["<h3>Lines tied to CUDA: run time and torchport scan</h3>", table(
            ["line", "status", "redirected at run time", "scan rules"],
            [[item["location"], item["status"], ", ".join(item["redirects"]) or "–", ", ".join(item["rules"]) or "–"]
             for item in script["lines"]])]
    rows = parity_rows(document)
    if rows:
        body += ["<h3>Loss parity</h3>", f"<p>{esc(cap((script.get('parity') or {}).get('rule', '')))}</p>",
                 table(["backend", "worst relative difference", "parity"], [list(row) for row in rows])]
    ddp = torchrun_line(document)
    if ddp:
        body.append(f"<p>{esc(cap(ddp.capitalize()))}</p>")
    notes = load_notes(document)
    if notes:
        body += ['<ul class="warn">', *[f"<li>{esc(cap(note))}</li>" for note in notes], "</ul>"]
    return body
