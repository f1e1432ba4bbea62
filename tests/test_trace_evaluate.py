"""The trace as an evaluate stage: in the result document, valid against the
schema, rendered in report.md, and set beside a measured xla run."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from torchport.document import result_record, validate
from torchport.evaluate import Evaluation, EvaluationOptions
from torchport.protocol import ProtocolConfig
from torchport.records import Finding, TraceSection, TraceSeverity
from torchport.report.markdown import render
from torchport.records import ScenarioSamples
from torchport.summary import counter_totals
from torchport.trace.stage import evaluate_stage
from torchport.trace.verdict import compare_with_xla

APPS = Path(__file__).resolve().parent / "apps"
QUICK = ProtocolConfig(steps=4, blocks=2, max_warmup_steps=4, inference=False)


def evaluate(app: str, backends: list[str], out_dir: Path) -> dict:
    options = EvaluationOptions(app=app, backends=backends, repeats=1, protocol=QUICK, out_dir=out_dir,
                                stages=[evaluate_stage], command=["pytest"])
    return Evaluation(options).run().to_dict()


@pytest.fixture(scope="module")
def cpu_document(tmp_path_factory) -> dict:
    return evaluate(str(APPS / "trace_dynamic_shape.py"), ["cpu"], tmp_path_factory.mktemp("evaluate"))


def test_evaluate_stage_puts_a_valid_trace_in_the_document_and_the_report(cpu_document):
    section = cpu_document["trace"]
    # the op sequence never changes: traced until it repeated for 3 steps
    assert section["status"] == "complete" and section["steps_traced"] == 3
    assert section["steps_rule"] == "the op sequence was unchanged for 3 steps"
    assert [f["id"] for f in section["findings"]] == ["TR102"]
    # A real finding, read as a typed record and written back unchanged (tests/test_records.py tests the rest).
    assert [Finding.from_dict(f).to_dict() for f in section["findings"]] == section["findings"]
    assert Finding.from_dict(section["findings"][0]).severity is TraceSeverity.SLOW
    assert section["xla_comparison"] is None  # no xla run in this evaluation
    validate(cpu_document)
    report = render(result_record(cpu_document))
    assert "## Op trace: readiness per target" in report
    assert "| TR102 dynamic-output-shape | slow | `" in report


def test_comparison_with_xla_counters_flags_each_disagreement(cpu_document):
    """A unit test of the comparison logic only: the document is a real cpu
    evaluation, the xla counters below are handwritten (shaped like the xla
    backend's), not measured."""
    document = copy.deepcopy(cpu_document)
    location = document["trace"]["findings"][0]["location"]

    def xla_run(fallbacks: dict, compilations: int, sustained: int, executions: int = 1) -> dict:
        phase = {"compilations": 0, "compile_time_s": 0.0, "cached_compilations": 0, "executions": executions,
                 "transfers_to_device": 0, "transfers_from_device": 0, "graph_cuts": 0, "fallback_ops": {}}
        return {"training": {"counters": {"first_step": {**phase, "compilations": compilations, "fallback_ops": fallbacks},
                                          "warmup": phase, "sustained": {**phase, "compilations": sustained}},
                             "loss_reads": {"first_step": {"values": 1, "counters": {
                                 "fallback_ops": {"aten::_local_scalar_dense": 1}}}},
                             "sustained_compilations": sustained, "steps_total": 10}}

    def xla_backend(*runs: dict) -> dict:
        # The comparison reads the backend's summary, which torchport.summary computes from the runs.
        return {"runs": list(runs), "summary": {"counter_runs": [
            counter_totals(ScenarioSamples.from_dict(run["training"])).to_dict() for run in runs]}}

    # The data-dependent shape cuts each step's graph once: two graphs to compile.
    document["backends"]["xla"] = xla_backend(xla_run({"aten::nonzero": 10}, 2, 0))
    agreed = compare_with_xla(TraceSection.from_dict(document["trace"]), result_record(document).backends).to_dict()
    assert agreed["predicted"]["fallback_ops"] == ["aten::nonzero"]
    assert agreed["agrees"], agreed["disagreements"]
    assert agreed["measured"]["per_run"][0]["torchport_loss_reads"] == {"values": 1, "aten::_local_scalar_dense": 1}

    # Host syncs counted inside the phases are the app's: torchport's own reads are outside them.
    document["backends"]["xla"] = xla_backend(xla_run({"aten::histc": 10, "aten::_local_scalar_dense": 3}, 3, 2,
                                                      executions=8))
    disagreed = compare_with_xla(TraceSection.from_dict(document["trace"]), result_record(document).backends).to_dict()
    assert disagreed["disagreements"] == [
        "aten::histc fell back to the CPU on xla but the trace did not predict it",
        "the trace predicted a CPU fallback of aten::nonzero but the xla run executed none",
        f"run 1: compiled 5 graphs (3 in first step, 0 in warmup, 2 in sustained; 0.00 s of compiling), the trace "
        f"predicted 2: data-dependent shapes at {location} (aten::nonzero x0: one graph per distinct size of the "
        "selection); host syncs (aten::_local_scalar_dense x3: each cuts the graph)",
        "run 1: the app's own host syncs (aten::_local_scalar_dense) ran 3 times in 10 steps, the trace predicted 0 "
        "(torchport's own loss reads are outside these counts)",
        f"run 1: 24 graph executions in 10 steps, the trace predicted 20 (2 per step): data-dependent shapes at "
        f"{location} (aten::nonzero x0: one graph per distinct size of the selection); host syncs "
        "(aten::_local_scalar_dense x3: each cuts the graph)",
    ]
    assert disagreed["recompiling"][0]["sustained_compilations"] == 2


def test_evaluate_trace_runs_until_a_branch_flipping_at_step_3_is_seen(tmp_path):
    """The branch in the model's forward is first taken at step 3: tracing a
    fixed 2 steps missed it; evaluate's trace keeps going until the op
    sequence repeats and names the branch's line."""
    app = APPS / "compile_branch_flip.py"
    document = evaluate(str(app), ["cpu"], tmp_path)
    section = document["trace"]
    assert section["steps_traced"] == 5  # steps 3, 4, 5 ran the same ops
    assert section["steps_rule"] == "the op sequence was unchanged for 3 steps"
    varies = [f for f in section["findings"] if f["id"] == "TR104"]
    assert len(varies) == 1 and "step 3 ran a different op sequence than step 2" in varies[0]["detail"]
    branch_line = next(n for n, text in enumerate(app.read_text().splitlines(), 1) if "# BRANCH" in text)
    assert varies[0]["location"] == f"{app}:{branch_line + 1}"  # the op the branch adds: torch.relu
    assert "Tracing stopped there: the op sequence was unchanged for 3 steps." in render(result_record(document))


@pytest.mark.xla
def test_mask_over_repeating_data_disagrees_and_recompiles_in_warmup(tmp_path, xla_environment):
    """The boolean mask compiles one graph per selection size; the 8 batches
    repeat, so every compile lands in warm-up and the sustained phase is clean.
    The trace predicts one graph: the report must say it disagrees, and that
    the warm-up recompiled, with its compile time."""
    app = APPS / "xla_mask_repeating.py"
    options = EvaluationOptions(app=str(app), backends=["xla"], repeats=1, out_dir=tmp_path,
                                protocol=ProtocolConfig(steps=4, blocks=2, max_warmup_steps=16, inference=False),
                                stages=[evaluate_stage], command=["pytest"])
    document = Evaluation(options).run().to_dict()
    assert document["backends"]["xla"]["status"] == "ok", document["backends"]["xla"].get("error")
    comparison = document["trace"]["xla_comparison"]
    run = comparison["measured"]["per_run"][0]
    # one step graph, cut once by the mask's data-dependent shape (the nonzero the trace found)
    assert comparison["predicted"]["step_graphs"] == 2
    assert run["compilations"] > 2 and run["compilations_per_phase"]["sustained"] == 0
    assert run["fallback_ops"]["aten::nonzero"] > 0 and run["app_host_syncs"] == 0
    # torchport's own reads: one per step, counted exactly, outside the phases
    assert run["torchport_loss_reads"] == {"values": run["steps"], "aten::_local_scalar_dense": run["steps"]}
    mask_line = next(n for n, text in enumerate(app.read_text().splitlines(), 1) if "# MASK" in text)
    assert not comparison["agrees"]
    assert comparison["disagreements"][0].startswith(f"run 1: compiled {run['compilations']} graphs")
    assert f"the trace predicted 2: data-dependent shapes at {app}:{mask_line}" in comparison["disagreements"][0]
    recompiling = comparison["recompiling"][0]
    assert recompiling["warmup_blocks_compiling"] > 1 and recompiling["warmup_compile_time_s"] > 0
    summary = document["backends"]["xla"]["summary"]
    assert summary["warmup_recompiling"]["compilations"] == run["compilations_per_phase"]["warmup"]
    report = render(result_record(document))
    assert "The prediction agrees" not in report
    assert "**Recompiling** (run 1)" in report and "recompiling during warm-up" in report
    assert "RECOMPILING in warm-up" in report
    validate(document)
