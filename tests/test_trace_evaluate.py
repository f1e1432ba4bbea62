"""The trace as an evaluate stage: in the result document, valid against the
schema, rendered in report.md, and set beside a measured xla run."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from torchport import results
from torchport.evaluate import Evaluation, EvaluationOptions
from torchport.protocol import ProtocolConfig
from torchport.report.markdown import render
from torchport.trace.stage import evaluate_stage
from torchport.trace.verdict import compare_with_xla

APPS = Path(__file__).resolve().parent / "apps"
QUICK = ProtocolConfig(steps=4, blocks=2, max_warmup_steps=4, inference=False)


def evaluate(app: str, backends: list[str], out_dir: Path) -> dict:
    options = EvaluationOptions(app=app, backends=backends, repeats=1, protocol=QUICK, out_dir=out_dir,
                                stages=[evaluate_stage], command=["pytest"])
    return Evaluation(options).run()


@pytest.fixture(scope="module")
def cpu_document(tmp_path_factory) -> dict:
    return evaluate(str(APPS / "trace_dynamic_shape.py"), ["cpu"], tmp_path_factory.mktemp("evaluate"))


def test_evaluate_stage_puts_a_valid_trace_in_the_document_and_the_report(cpu_document):
    section = cpu_document["trace"]
    assert section["status"] == "complete" and section["steps_traced"] == 2
    assert [f["id"] for f in section["findings"]] == ["TR102"]
    assert section["xla_comparison"] is None  # no xla run in this evaluation
    results.validate(cpu_document)
    report = render(cpu_document)
    assert "## Op trace: readiness per target" in report
    assert "| TR102 dynamic-output-shape | slow | `" in report


def test_comparison_with_xla_counters_flags_each_disagreement(cpu_document):
    """A unit test of the comparison logic only: the document is a real cpu
    evaluation, the xla counters below are handwritten (shaped like the xla
    backend's), not measured."""
    document = copy.deepcopy(cpu_document)

    def xla_run(fallbacks: dict, compilations: int, sustained: int) -> dict:
        phase = {"compilations": 0, "compile_time_s": 0.0, "cached_compilations": 0, "executions": 1,
                 "transfers_to_device": 0, "transfers_from_device": 0, "graph_cuts": 0, "fallback_ops": {}}
        return {"training": {"counters": {"first_step": {**phase, "compilations": compilations, "fallback_ops": fallbacks},
                                          "warmup": phase, "sustained": {**phase, "compilations": sustained}},
                             "sustained_compilations": sustained, "steps_total": 10}}

    document["backends"]["xla"] = {"runs": [xla_run({"aten::nonzero": 10, "aten::_local_scalar_dense": 3}, 2, 0)]}
    agreed = compare_with_xla(document["trace"], document)
    assert agreed["predicted"]["fallback_ops"] == ["aten::nonzero"]
    assert agreed["agrees"], agreed["disagreements"]
    assert agreed["expected_from_harness"] == ["aten::_local_scalar_dense"]

    document["backends"]["xla"] = {"runs": [xla_run({"aten::histc": 10}, 3, 2)]}
    disagreed = compare_with_xla(document["trace"], document)
    assert disagreed["disagreements"] == [
        "aten::histc fell back to the CPU on xla but the trace did not predict it",
        "the trace predicted a CPU fallback of aten::nonzero but the xla run executed none",
        "run 1: predicted static shapes, but xla compiled 2 graph(s) during the sustained steps",
    ]


@pytest.mark.xla
def test_prediction_beside_a_real_xla_run(tmp_path, xla_environment):
    document = evaluate(str(APPS / "trace_dynamic_shape.py"), ["xla"], tmp_path)
    assert document["backends"]["xla"]["status"] == "ok", document["backends"]["xla"].get("error")
    comparison = document["trace"]["xla_comparison"]
    measured_ops = {op for run in comparison["measured"]["per_run"] for op in run["fallback_ops"]}
    assert "aten::nonzero" in measured_ops  # the boolean mask, run on the CPU by torch_xla
    assert comparison["predicted"]["fallback_ops"] == ["aten::nonzero"]
    assert comparison["agrees"], comparison["disagreements"]
    assert "### Prediction vs. the measured xla run" in render(document)
