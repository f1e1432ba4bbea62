"""The answer per target: one model (report.answer), three renderings that state
the same verdict for every target, each cell with its evidence level.

Documents: the H200 evaluation kept in benchmarks/results (CUDA measured on the
target, TPU and XLA predicted from tables, MPS unknown), a real evaluation of
the built-in app (compiled CPU measured, checks run), and, with the xla
environment, a real xla run (a proxy)."""
from __future__ import annotations

import copy
from html import escape as html_escape
import json
import re

import pytest
from rich.console import Console

from conftest import QUICK, QUICK_TIMING, ROOT, load_result, run_torchport
from torchport import summary
from torchport.document import result_record
from torchport.records import ChecksSection, ResultDocument
from torchport.report import answer, html, markdown, terminal
from torchport import formatting as fmt

H200 = ROOT / "benchmarks" / "results" / "h200-2026-11-30" / "evaluate-classifier.json"


def _terminal_text(document: ResultDocument) -> str:
    console = Console(width=1000, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    terminal.print_summary(document, console)
    return console.export_text()


def _rows(text: str, start: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip().startswith(start)]


def assert_three_renderings_agree(found: dict | ResultDocument) -> answer.Answer:
    document = result_record(found) if isinstance(found, dict) else found
    model = answer.build(document)
    md, page, term = markdown.render(document), html.render(document), _terminal_text(document)
    for line in model.lines():  # the lines under the table, in each rendering
        assert line in term and html_escape(line) in page
        assert fmt.md(line, 1000) in md
    for row in model.rows:
        md_row = _rows(md, f"| {row.target} |")
        assert len(md_row) == 1, row.target
        page_row = re.findall(rf"<tr><th>{re.escape(row.target)}</th>(.*?)</tr>", page)
        assert len(page_row) == 1, row.target
        term_row = [line for line in term.splitlines() if line.strip("│ ").startswith(row.target + " ")
                    or line.strip("│ ").startswith(row.target + "│")]
        assert term_row, row.target
        for cell in row.cells():
            mark = f"[{answer.EVIDENCE_MARK[cell.evidence]}]"
            # the same text and evidence mark in each rendering (markdown escapes brackets and underscores)
            assert cell.text.replace("_", "\\_").replace("[", "\\[").replace("]", "\\]") in md_row[0], (row.target, cell)
            assert f"\\{mark[:-1]}\\]" in md_row[0]
            assert mark in page_row[0] and cell.text.replace("&", "&amp;").replace("<", "&lt;") in page_row[0]
            assert mark in term_row[0] and cell.text in term_row[0], (row.target, cell.text, term_row[0])
    return model


def test_h200_document_measured_predicted_and_unknown():
    document = summary.refresh(result_record(json.loads(H200.read_text())))
    model = assert_three_renderings_agree(document)
    rows = {row.target: row for row in model.rows}
    assert len(model.rows) == 6 and model.no_evidence == ["compiled CPU"]
    assert rows["CUDA"].runs.evidence is answer.Evidence.MEASURED and rows["CUDA"].runs.text == "runs"
    assert rows["CUDA"].speed.evidence is answer.Evidence.MEASURED and "faster" in rows["CUDA"].speed.text
    # An op table's prediction is never worded as a measurement, and names its source and date.
    assert rows["TorchTPU"].runs.evidence is answer.Evidence.PREDICTED
    assert rows["TorchTPU"].runs.text == "no blocker predicted" and "2026-11-30" in rows["TorchTPU"].runs.source
    assert rows["TorchTPU"].speed.evidence is answer.Evidence.UNKNOWN
    assert rows["MPS"].runs.evidence is answer.Evidence.UNKNOWN and rows["MPS"].runs.text == "not known"
    assert rows["TorchTPU"].memory.evidence is answer.Evidence.PREDICTED and "fits 4 of 4 chips" in rows["TorchTPU"].memory.text


def test_builtin_evaluation_checks_and_unavailable_lines(builtin_evaluation):
    document = load_result(builtin_evaluation)
    model = assert_three_renderings_agree(document)
    compiled = next(row for row in model.rows if row.target == "compiled CPU")
    assert compiled.runs.evidence is answer.Evidence.MEASURED
    assert compiled.numbers.text.startswith("parity ") and compiled.numbers.evidence is answer.Evidence.MEASURED
    assert "checkpoint" in compiled.workflow.text and "pipeline" in compiled.workflow.text
    # A failed check shows as such in every rendering.
    failed = copy.deepcopy(document)
    for check in failed["checks"]["checks"]:
        if check["name"] == "parity" and check.get("backend") == "cpu-compile":
            check["status"] = "fail"
    model = assert_three_renderings_agree(failed)
    assert next(r for r in model.rows if r.target == "compiled CPU").numbers.text == "parity fail"


def test_unavailable_backends_collapse_into_one_line_per_reason(tmp_path):
    out = tmp_path / "run"
    completed = run_torchport("evaluate", "builtin:classifier", *QUICK, "-o", str(out))
    assert completed.returncode == 0, completed.stderr[-2000:]
    document = load_result(out)
    model = assert_three_renderings_agree(document)
    unavailable = [name for name, b in document["backends"].items() if b["status"] == "unavailable"]
    assert unavailable  # no GPU, no TPU here
    assert model.unavailable[-1].startswith("to measure those, run the same evaluation on a machine")
    assert len(model.unavailable) - 1 == len({answer.reason_without_details(document["backends"][n]["reason"])
                                              for n in unavailable})
    # QUICK runs no trace: the targets nothing here measured or predicted share one line.
    assert "compiled CPU" in [row.target for row in model.rows]
    assert {"TorchTPU", "Trainium", "CUDA", "ROCm", "MPS"} <= set(model.no_evidence)
    for name in unavailable:
        assert sum(re.search(rf"[:,] {re.escape(name)}[ ,]", line) is not None for line in model.unavailable) == 1
    assert "Answer per target" in completed.stdout and "[M] runs" in completed.stdout


@pytest.mark.xla
def test_xla_on_the_cpu_is_a_named_proxy(xla_environment, classifier_on_cpu_and_xla):
    document = load_result(classifier_on_cpu_and_xla)  # the run test_backends_xla checks too (conftest)
    model = assert_three_renderings_agree(document)
    xla = next(row for row in model.rows if row.target == "PyTorch/XLA")
    assert "XLA executions" in xla.runs.detail
    assert xla.runs.evidence is answer.Evidence.PROXY and "proxy for TPU" in xla.runs.source
    assert "a proxy's speed, not the target's" in xla.speed.detail
    # One process per backend (--repeats 1): no speed verdict is claimed.
    assert xla.speed.text.endswith("one process per side") and "not a verdict" in xla.speed.detail
    # The same runs without a single XLA execution (as when a script ignores the device it is
    # given): finished, but not "runs on xla", and its speed is not the target's.
    for row in document["backends"]["xla"]["summary"]["counters"]:
        row["counters"]["executions"] = 0
    model = assert_three_renderings_agree(document)
    xla = next(row for row in model.rows if row.target == "PyTorch/XLA")
    assert xla.runs.text == "no device evidence" and xla.runs.evidence is answer.Evidence.UNKNOWN
    assert xla.speed.text == "not measured"


def test_the_answer_is_in_the_markdown_before_the_per_backend_verdicts():
    text = markdown.render(summary.refresh(result_record(json.loads(H200.read_text()))))
    assert text.index("## Answer per target") < text.index("## Verdict per backend")



def test_what_to_change_counts_the_apps_own_lock_in(tmp_path):
    """An app that hard-codes autocast("cuda"): scan's finding in its own file is
    a line to change on every target but CUDA, at its line."""
    out = tmp_path / "run"
    app = ROOT / "tests" / "apps" / "planted_autocast_cuda.py"
    completed = run_torchport("evaluate", str(app), "-b", "cpu", *QUICK_TIMING, "--no-checks", "-o", str(out),
                              timeout=900)
    assert completed.returncode == 0, completed.stderr[-2000:]
    model = assert_three_renderings_agree(load_result(out))
    rows = {row.target: row for row in model.rows}
    tpu = rows["TorchTPU"].change
    assert tpu.evidence is answer.Evidence.PREDICTED and tpu.text.endswith("line(s)") and tpu.text != "0 line(s)"
    assert "TP201" in tpu.detail or "autocast" in tpu.detail.lower()
    assert "planted_autocast_cuda.py:" in tpu.detail


def test_a_borderline_check_says_borderline_in_every_rendering(builtin_evaluation):
    """A real evaluation, its cpu-compile pipeline check replaced by the verdict the real decision
    function gives a measurement whose median round waits 20% of a step (between 15% and 25%)."""
    from torchport.document import validate
    from torchport.check import pipeline
    from torchport.commands.check import terminal_table
    from torchport.records import PipelineMeasurement

    document = load_result(builtin_evaluation)
    compute = 0.08
    loads = [compute * share / (1 - share) for share in (0.17, 0.19, 0.20, 0.21, 0.23)]
    borderline = pipeline.check("cpu-compile", "cpu", PipelineMeasurement.from_dict(
        {"load_s": loads, "compute_s": [compute] * 5, "batches_per_s": 5 / sum(loads), "per_round": 4,
         "data": {"dataloader": False, "type": "builtins.list"}})).to_dict()
    assert borderline["status"] == "borderline" and borderline["figures"]["verdict"] == "borderline"
    checks = document["checks"]["checks"]
    (position,) = [i for i, c in enumerate(checks) if c["name"] == "pipeline" and c.get("backend") == "cpu-compile"]
    checks[position] = borderline
    validate(document)
    model = assert_three_renderings_agree(document)
    compiled = next(row for row in model.rows if row.target == "compiled CPU")
    assert "pipeline borderline" in compiled.workflow.text
    assert "| pipeline | cpu-compile | *borderline* | borderline: data" in markdown.render(result_record(document))
    # Every worker ran with the thread counts the parent decided, and the report says which.
    from torchport.launch import worker_threads

    decided = worker_threads()
    for backend in document["backends"].values():
        for run in backend["runs"]:
            assert {k: run["worker"]["threads"][k] for k in decided} == decided, run["worker"]
    threads = f"main, {decided['intra_op']} intra-op / {decided['inter_op']} inter-op threads"
    assert f"| {threads} |" in markdown.render(result_record(document))
    assert f"<td>{threads}</td>" in html.render(result_record(document))
    assert "<td>pipeline</td><td>cpu-compile</td><td>borderline</td>" in html.render(result_record(document))
    console = Console(width=400, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(terminal_table(document["checks"]))
    (row,) = [line for line in console.export_text().splitlines() if "cpu-compile" in line and "pipeline" in line]
    assert [cell.strip() for cell in row.split("│")][3] == "borderline"
    # Borderline is never counted as a pass, and does not fail the command.
    from torchport.check.report import markdown as checks_markdown
    from torchport.check.runner import exit_status

    assert ", 1 borderline," in checks_markdown(ChecksSection.from_dict(document["checks"]))
    assert exit_status(ChecksSection.from_dict({"checks": [borderline]})) == 0
    assert exit_status(ChecksSection.from_dict({"checks": [borderline, {**borderline, "status": "fail"}]})) == 1
