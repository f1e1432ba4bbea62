"""evaluate's trace findings about graphs, confirmed or refuted by the Dynamo
counts a real cpu-compile run measured: a data-dependent branch that first
flips at step 3 (the trace runs until the op sequence repeats, so it sees it)
and a partial last batch."""
from __future__ import annotations

from conftest import APPS, load_result

from torchport.document import result_record
from torchport.records import TraceSection
from torchport.trace.compile_check import compare_with_torch_compile

BRANCH_APP = APPS / "compile_branch_flip.py"


def _line(marker: str) -> str:
    number = next(n for n, text in enumerate(BRANCH_APP.read_text().splitlines(), 1) if marker in text)
    return f"{BRANCH_APP}:{number}"


def test_graph_findings_are_judged_by_the_measured_dynamo_counts(branch_flip_evaluation):
    out = branch_flip_evaluation  # the run test_compile_counters reads too (conftest)
    document = load_result(out)
    section = document["trace"]
    measured = section["torch_compile_comparison"]["backends"]["cpu-compile"]
    judged = {(item["id"], item["location"]): item for item in measured["findings"]}
    branch = _line("# BRANCH")
    # The branch's host read: Dynamo broke the graph at that very line.
    assert judged[("TR101", branch)]["verdict"] == "confirmed", judged
    assert judged[("TR101", branch)]["evidence"].startswith("graph break at this line: Data-dependent branching")
    # The changing graph (the trace names the op the branch adds, at step 3): the same break confirms it.
    (varies,) = [item for item in measured["findings"] if item["id"] == "TR104"]
    assert varies["location"] == _line("hidden = torch.relu(hidden)")
    assert varies["verdict"] == "confirmed" and varies["evidence"].startswith(f"graph break at {branch}: Data-dependent")
    # The partial last batch: Dynamo recompiled on the batch size.
    (shapes,) = [item for item in measured["findings"] if item["id"] == "TR103"]
    assert shapes["verdict"] == "confirmed" and "size mismatch" in shapes["evidence"]
    assert measured["graph_breaks"] >= 1 and measured["recompilations"] >= 1
    assert measured["unpredicted_breaks"] == []
    report = (out / "report.md").read_text()
    assert "### Prediction vs. the measured torch.compile runs" in report
    assert "| confirmed | graph break at this line: Data-dependent branching" in report
    assert "| TR104 at " in report

    # The same finding against a run whose Dynamo counts are clean is refuted.
    run = document["backends"]["cpu-compile"]["runs"][0]
    for phase in run["training"]["counters"].values():
        phase["torch_compile"].update(graph_breaks=0, graph_break_sites=[], recompilations=0, recompilation_causes=[])
    clean = compare_with_torch_compile(TraceSection.from_dict(section), result_record(document).backends).to_dict()["backends"]["cpu-compile"]["findings"]
    assert {item["id"]: item["verdict"] for item in clean}["TR104"] == "refuted"
