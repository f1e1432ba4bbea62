"""``report.md``: the evaluation as a reviewer reads it."""
from __future__ import annotations

from typing import Any

from torchport.limits import REPORT_TAIL_LINES
from torchport import stages
from torchport import formatting as fmt
from torchport.report.verdict import verdict_line
from torchport.report import model
from torchport.records import (BackendComparison, BackendEntry, ErrorRecord, FailureDigest, MetricValue, ResultDocument,
                               ScriptSection)

# Each stage renders its own section of the report (torchport.stages).


def render(document: ResultDocument) -> str:
    app = document.app
    env = document.environment
    config = document.config
    reference = document.reference
    lines = [
        f"# torchport evaluation: {fmt.md_code(document.app_spec)}",
        "",
        f"Status: **{fmt.md(document.status)}**" + (f" ({fmt.md(document.status_reason)})" if document.status_reason else ""),
        f" · {document.updated} · torchport {document.tool.version} · torch {env.torch} · Python {env.python}",
        f" · {fmt.md(env.cpu)} ({env.cpu_count} cores)",
        "",
        f"Same configuration on every backend: dtype {config['dtype']}, seed {config['seed']}, "
        f"{config['steps']} sustained steps in {config['blocks']} timed blocks, warm-up bound {config['max_warmup_steps']} steps, "
        f"{config.get('repeats', 1)} fresh process(es) per backend, interleaved. Reference: {fmt.md_code(reference)}.",
    ]
    if document.reference_note:
        lines.append(f"Note: {fmt.md(document.reference_note)}.")
    if app.git_commit:
        lines.append(f"App commit {app.git_commit[:12]}{' (with uncommitted changes)' if app.git_dirty else ''}.")
    consistency = document.config_consistency
    if consistency and not consistency.consistent:
        lines += ["", f"**Warning: configuration differs on {fmt.md(', '.join(consistency.differing))}**: "
                  "their figures are not comparable with the others (see the config hashes below)."]
    from torchport.report import answer

    lines += ["", *answer.markdown(answer.build(document))]
    lines += ["", "## Verdict per backend", ""]
    parts = model.sections(document)
    lines += [f"- {fmt.md(verdict_line(name, b, reference), 2000)}" for name, b in parts.backends.items()]
    if document.script:
        lines += _script_section(document.script, document)
    if document.script_distributed:
        ddp = document.script_distributed
        lines += ["", f"Under torchrun ({ddp.nproc_per_node} processes on {fmt.md(ddp.backend)}): "
                      f"**{fmt.md(ddp.status)}**, {fmt.md(ddp.reason)}. Comparison with one process "
                      f"{fmt.md(ddp.comparison or 'not made')}."]
    measured = parts.measured
    if measured:
        lines += ["", "## Training throughput (sustained)", "",
                  "| backend | step time, median [95% CI] | samples/s | tokens/s | vs reference | epoch | cost / 1M samples |",
                  "|---|---|---|---|---|---|---|"]
        for name, b in measured.items():
            s = b.measured()
            lines.append(
                f"| {fmt.md(name)} | {fmt.step_time_with_ci(s.step_time_s)} | {fmt.rate(s.samples_per_s, 'samples')} "
                f"| {fmt.rate(s.tokens_per_s, 'tokens') if s.tokens_per_s else '–'} "
                f"| {fmt.speedup(b.comparison) if name != reference else 'reference'} "
                f"| {fmt.seconds(s.epoch_s)} | {fmt.usd(b.cost.usd_per_million_samples) if b.cost else '–'} |"
            )
        lines += ["", "## Phases (median over runs)", "",
                  "| backend | process start | imports | init | first step | compile overhead | warm-up steps | steady | per step, compile excluded (MLPerf) | per step, compile included (AlgoPerf, first K steps) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name, b in measured.items():
            s = b.measured()
            lines.append(
                f"| {fmt.md(name)} | {fmt.seconds(s.process_start_s)} | {fmt.seconds(s.import_s)} | {fmt.seconds(s.init_s)} "
                f"| {fmt.seconds(s.first_step_s)} | {fmt.seconds(s.compile_overhead_s)} | {', '.join(map(str, s.warmup_steps or []))} "
                f"| {'yes' if s.steady else 'NO'} | {fmt.seconds(s.time_per_step_compile_excluded_s)} "
                f"| {fmt.seconds(s.time_per_step_compile_included_s)} (K={s.compile_included_steps}) |"
            )
        lines += ["", "## Memory, input pipeline, quality", "",
                  "| backend | peak device memory | peak host RSS | waiting for data | input-bound | final loss (at step) "
                  f"| loss vs {fmt.md(str(reference))} at a step both reached | quality metric |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, b in measured.items():
            s = b.measured()
            lines.append(
                f"| {fmt.md(name)} | {fmt.size(s.peak_device_memory_bytes) if s.peak_device_memory_bytes is not None else 'n/a (no device memory)'} "
                f"| {fmt.size(s.peak_host_rss_bytes)} | {s.data_wait_share:.1%} | {'YES' if s.input_bound else 'no'} "
                f"| {s.final_loss:.4f}{_at_step(s.final_loss_step)} "
                f"| {_common_step_loss(b.comparison, name == reference)} | {_metric_text(s.metric)} |"
            )
        inference = {name: scenario for name, b in measured.items() if (scenario := b.measured().inference)}
        if inference:
            lines += ["", "## Inference scenario (forward only, sustained)", "",
                      "| backend | call time, median [95% CI] | samples/s | first call |", "|---|---|---|---|"]
            for name, scenario in inference.items():
                lines.append(f"| {fmt.md(name)} | {fmt.step_time_with_ci(scenario.step_time_s)} | {fmt.rate(scenario.samples_per_s, 'samples')} "
                             f"| {fmt.seconds(scenario.first_step_s)} |")
        lines += _compiler_counters_section(measured)
    notes = [(name, note) for name, b in measured.items() for note in b.measured().notes]
    if notes:
        lines += ["", "## Warnings", ""] + [f"- {fmt.md(name)}: {fmt.md(note)}" for name, note in notes]
    lines += _does_not_run_here(parts.does_not_run_here)
    if parts.stage_errors:
        lines += ["", "## Stages that could not finish", ""]
        lines += [f"- {fmt.md(e.stage)}: {fmt.md(e.message)}" + (f" at {fmt.md_code(e.location)}" if e.location else "")
                  for e in parts.stage_errors]
    for section in stages.result_keys():
        if text := _stage_markdown(document, stages.by_key(section)):
            lines += ["", text]
    from torchport.report.budget import budget_markdown, memory_markdown

    lines += budget_markdown(document) + memory_markdown(document)
    lines += ["", "## What was verified", "",
              "| backend | kind | verification | environment |", "|---|---|---|---|"]
    for name, b in parts.backends.items():
        kind = f"proxy for {b.proxy_for}" if b.proxy_for else b.title or ""
        lines.append(f"| {fmt.md(name)} | {fmt.md(kind)} | {fmt.md(b.verification)} | {fmt.md(fmt.worker_environment(b))} |")
    if consistency and consistency.hashes:
        lines += ["", "Effective configuration hash per backend: " +
                  ", ".join(f"{fmt.md(name)} {fmt.md_code('/'.join(h))}" for name, h in consistency.hashes.items()) + "."]
    return "\n".join(lines) + "\n"


def _script_section(script: ScriptSection, document: ResultDocument) -> list[str]:
    """Script mode: did it run on each backend (with the device's evidence), which lines had to be redirected."""
    from torchport.script import report as script_report

    lines = ["", "## Script mode", *_captioned_table(
        f"The script {fmt.md_code(script.path)} ran unmodified in each backend's worker "
        "(steps from its optimizer, loss from `backward()`, unscaled when a GradScaler scales it). "
        "A backend counts as run only with evidence from its device.", ("backend", "verdict"),
        [f"| {fmt.md(name)} | {fmt.md(v.text)} |" for name, v in script.verdicts.items()])]
    compiled = {name: where for name, b in document.backends.items() for run in b.runs
                if (where := (run.script or {}).get("compiled_by_script"))}
    for name, where in compiled.items():
        lines.append(f"\nOn {fmt.md(name)} the script called `torch.compile` itself (at {fmt.md(', '.join(sorted(set(where))))}): "
                     "its model is compiled even on an eager backend.")
    fired = script_report.redirects(document)
    if fired:
        lines += _captioned_table(
            "Redirects that fired (`--redirect-cuda`), at the script's lines:",
            ("line", "call", "became", "backends", "count"),
            [f"| {fmt.md_code(row.location)} | {fmt.md(row.call)} "
             f"| {fmt.md('; '.join(f'{n}: {b}' for n, b in row.becomes.items()) or '–')} "
             f"| {fmt.md(', '.join(row.backends))} | {row.count} |" for row in fired])
    regions = script_report.autocasts(document)
    if regions:
        lines += _captioned_table(
            "Mixed precision regions (autocast) as they ran:", ("backend", "line", "asked for", "ran as"),
            [f"| {fmt.md(row.backend)} | {fmt.md_code(row.location)} | {fmt.md(row.requested_device_type)} "
             f"| {fmt.md(row.ran_as())} |" for row in regions])
    if script.configuration:
        lines += ["", "The model differs between backends (the figures are not comparable until it does not):", ""]
        lines += [f"- {fmt.md(item.backend)}, {fmt.md(item.rule)} at {fmt.md_code(item.location or '?')}: "
                  f"{fmt.md(item.message, 2000)}" for item in script.configuration]
    if script.lines:
        scanned = script.files_scanned or [script.path]
        lines += _captioned_table(
            f"Lines that tie the script to CUDA, found at run time (redirects) and statically (`torchport scan` "
            f"of the script's own files: {len(scanned)}):",
            ("line", "status", "redirected at run time", "scan rules", "`torchport fix`"),
            [f"| {fmt.md_code(item.location)} | {fmt.md(item.status)} | {fmt.md(', '.join(item.redirects) or '–')} "
             f"| {fmt.md(', '.join(item.rules) or '–')} | {'rewrites it' if item.fixable else '–'} |"
             for item in script.lines])
        if script.coverage_source:
            lines.append(f"\n\"Not executed\" is line coverage: {fmt.md(script.coverage_source)}.")
    rows = script_report.parity_rows(document)
    if rows:
        rule = script.parity.rule if script.parity and script.parity.rule else "not compared"
        lines += _captioned_table(f"Loss trajectories ({fmt.md(rule)}):",
                                  ("backend", "worst relative difference", "parity"),
                                  [f"| {fmt.md(name)} | {diff} | {fmt.md(status)} |" for name, diff, status in rows])
    notes = script_report.bfloat16_notes(document) + script_report.load_notes(document)
    if notes:
        lines += ["", *[f"- {fmt.md(note)}" for note in notes]]
    if script.scan_error:
        lines.append(f"\nThe static scan could not run: {fmt.md(script.scan_error)}.")
    return lines


def _captioned_table(caption: str, columns: tuple[str, ...], rows: list[str]) -> list[str]:
    """A caption, then a table with these column headings over rows already rendered, each set off by a blank line."""
    return ["", caption, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *rows]


def _does_not_run_here(failed: dict[str, BackendEntry]) -> list[str]:
    """Backends whose runs failed: what users come for.  Per backend the kind
    of failure, its cause and where: the user's line and the library's frame."""
    if not failed:
        return []
    lines = ["", "## Does not run here", "",
             "| backend | kind | cause | your code | inside | runs that failed |", "|---|---|---|---|---|---|"]
    for name, b in failed.items():
        error = b.error or ErrorRecord()
        digest = b.failures or FailureDigest()
        cause = fmt.md(error.message) + (" (more with `--debug`)" if error.more else "")
        lines.append(f"| {fmt.md(name)} | {fmt.md(str(error.kind))} | {cause} "
                     f"| {fmt.md_code(error.location) if error.location else '–'} "
                     f"| {fmt.md_code(error.library_frame) if error.library_frame else '–'} "
                     f"| {digest.runs_failed} of {digest.runs} |")
    for name, b in failed.items():
        tail = b.failures.last_stderr_tail if b.failures else None
        if tail:
            lines += ["", f"Last lines of {fmt.md(name)}'s worker stderr:", "", *fmt.md_block(tail[-REPORT_TAIL_LINES:])]
    return lines


def _compiler_counters_section(measured: dict[str, BackendEntry]) -> list[str]:
    """Per phase, what a compiling backend did: XLA's counters (graphs
    compiled, compile time, executions, transfers, ops that fell back to the
    CPU) and torch.compile's (frames compiled, graph breaks, recompilations)."""
    rows = []
    for name, b in measured.items():
        for row in b.measured().counters or []:
            c = row.counters
            if "compilations" not in c or "executions" not in c:
                continue
            fallbacks = ", ".join(f"{fmt.md_code(op)} x{count}" for op, count in c["fallback_ops"].items()) or "none"
            rows.append(f"| {fmt.md(name)} | {row.phase.replace('_', ' ')} | {row.steps} | {c['compilations']} | {fmt.seconds(c['compile_time_s'])} "
                        f"| {c['cached_compilations']} | {c['executions']} | {c['transfers_to_device']} / {c['transfers_from_device']} "
                        f"| {c['graph_cuts']} | {fallbacks} |")
    lines: list[str] = []
    if rows:
        lines += ["", "## Compiler counters (first successful run)", "",
                  "Graphs compiled, cache hits and executions per phase; `aten::*` ops ran on the CPU "
                  "(no lowering, or a host sync such as `.item()`). Graph cuts include torchport's own barrier, one per timed block.", "",
                  "| backend | phase | steps | compilations | compile time | cached compilations | executions "
                  "| transfers to / from device | graph cuts | CPU fallback ops |",
                  "|---|---|---|---|---|---|---|---|---|---|", *rows]
    return lines + _torch_compile_section(measured)


def _count(value: Any) -> str:
    return "n/a" if value is None else str(value)


def _torch_compile_section(measured: dict[str, BackendEntry]) -> list[str]:
    """torch.compile (Dynamo) per phase: frames compiled, graph breaks with
    their reason and line, recompilations with the guard that failed."""
    rows, breaks, recompiles, problems = [], [], [], set()
    for name, b in measured.items():
        for row in b.measured().counters or []:
            c = row.counters.get("torch_compile")
            if not c or "frames_compiled" not in c:
                continue
            label = row.phase.replace("_", " ")
            rows.append(f"| {fmt.md(name)} | {label} | {row.steps} | {c['frames_compiled']} "
                        f"| {c['frames_not_compiled']} | {c['graphs']} | {_count(c['graph_breaks'])} | {_count(c['recompilations'])} "
                        f"| {fmt.seconds(c['compile_time_s']) if c.get('compile_time_s') is not None else 'n/a'} |")
            breaks += [f"| {fmt.md(name)} | {label} | {fmt.md_code(site['location']) if site.get('location') else '–'} "
                       f"| {fmt.md(site['reason'])} | {site['count']} |" for site in c.get("graph_break_sites", [])]
            recompiles += [f"| {fmt.md(name)} | {label} | {fmt.md_code(item['function'] or '?')} "
                           f"| {fmt.md_code(item['location']) if item.get('location') else '–'} | {fmt.md_code(item['guard'])} |"
                           for item in c.get("recompilation_causes", [])]
            if c.get("problem"):
                problems.add(f"{name}: {c['problem']}")
    if not rows:
        return []
    lines = ["", "## torch.compile counters (first successful run)", "",
             "From Dynamo's counters and its graph-break and recompile logs, per phase. A frame is one Python function "
             "Dynamo compiled (a graph break splits a function into frames); the steady state requires no compile "
             "in the sustained phase. Compile time: Dynamo's per-frame figures (lazy backward compiles not included).", "",
             "| backend | phase | steps | frames compiled | frames not compiled | graphs | graph breaks | recompilations | compile time |",
             "|---|---|---|---|---|---|---|---|---|", *rows]
    if breaks:
        lines += ["", "Graph breaks (where in your code, and why):", "",
                  "| backend | phase | where | reason | times |", "|---|---|---|---|---|", *breaks]
    if recompiles:
        lines += ["", "Recompilations (the guard that failed):", "",
                  "| backend | phase | function | where | failed guard |", "|---|---|---|---|---|", *recompiles]
    lines += [f"\nNot captured: {fmt.md(problem)}." for problem in sorted(problems)]
    return lines


def _at_step(step: int | None) -> str:
    return f" (step {step})" if step else ""


def _common_step_loss(comparison: BackendComparison | None, is_reference: bool) -> str:
    """This backend's loss and the reference's at the last step both reached."""
    if is_reference:
        return "reference"
    common = comparison.loss_at_common_step if comparison else None
    if not common:
        return "–"
    difference = common.relative_difference
    return (f"{common.loss:.4f} vs {common.reference_loss:.4f} at step {common.step}"
            + (f" ({difference:.1%} apart)" if difference is not None else ""))


def _metric_text(metric: MetricValue | None) -> str:
    return f"{fmt.md(metric.name)} {metric.value:.4f}" if metric and metric.value is not None else "–"


def _stage_markdown(document: ResultDocument, stage: stages.Stage) -> str:
    """A stage's section drawn by its renderer; "" when the document has none or the stage draws none here."""
    if not stage.render:
        return ""
    try:
        data = document.section(stage.key, stage.section_record())
        render = stage.renderer()
    except ImportError:
        return f"## {stage.key}\n\n(no renderer installed for this section)" if document.extra.get(stage.key) else ""
    return render(data) if data and render else ""
