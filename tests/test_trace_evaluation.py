"""Evaluation and sampling inside the traced iterations are kept out of the
training step and reported apart: in process on the tracer itself, and end to
end on a realistic script (tests/scripts/eval_and_sample.py) in script mode's
real tracing worker, against the same script run without evaluating."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from torchport.records import TracedEvaluation, TraceSection
from torchport.trace.analysis import trace_section, evaluation_summary, validate_targets
from torchport.trace.report import markdown, terminal_lines
from torchport.trace.tracer import OpTracer

SCRIPT = Path(__file__).resolve().parent / "scripts" / "eval_and_sample.py"
HERE = Path(__file__).resolve()


def _line(path: Path, marker: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if marker in text)


def _lines_of(records: list[dict]) -> set[int]:
    return {int(str(r["location"]).rsplit(":", 1)[1]) for r in records if r["location"] and r["location"].startswith(str(HERE))}


def test_the_models_forward_under_no_grad_is_evaluation_and_clipping_is_the_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    average = [p.detach().clone() for p in model.parameters()]
    tracer = OpTracer(model)
    for index in (1, 2):
        # As in script mode, everything outside backward and the optimizer step is the "loss" phase.
        with tracer.step(index), tracer.in_phase("loss"):
            if index == 1:
                with torch.no_grad():
                    model.eval()
                    held_out = model(torch.randn(4, 8)).pow(2).mean()  # marker: evaluation
                    model.train()
                print(f"{held_out:.3f}")  # marker: evaluation read
            loss = model(torch.randn(4, 8)).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            with tracer.in_phase("backward"):
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # marker: clipping
            with tracer.in_phase("optimizer"):
                optimizer.step()
            with torch.no_grad():
                for kept, parameter in zip(average, model.parameters()):
                    kept.lerp_(parameter, 0.1)  # marker: moving average
    snapshot = tracer.snapshot().to_dict()
    step_lines = _lines_of(snapshot["ops"])
    evaluation_lines = _lines_of(snapshot["evaluation"]["ops"]) | _lines_of(snapshot["evaluation"]["host_syncs"])
    assert evaluation_lines == {_line(HERE, "# marker: evaluation"), _line(HERE, "# marker: evaluation read")}
    assert {_line(HERE, "# marker: clipping"), _line(HERE, "# marker: moving average")} <= step_lines
    assert not step_lines & evaluation_lines
    assert not _lines_of(snapshot["host_syncs"])  # the read of the evaluation's loss is the evaluation's
    assert {record["steps"][0] for record in snapshot["evaluation"]["ops"]} == {1}
    # Both steps ran the same graph: the evaluation is not part of step 1's.
    assert len({graph["graph"] for graph in snapshot["step_graphs"]}) == 1, snapshot["step_graphs"]
    summary = evaluation_summary(TracedEvaluation.from_dict(snapshot["evaluation"])).to_dict()
    assert summary["steps"] == [1] and summary["host_syncs"] == 1
    assert summary["model_calls"] == [{"location": f"{HERE}:{_line(HERE, '# marker: evaluation')}", "count": 1}]


def test_a_model_that_trains_in_eval_mode_is_still_the_step():
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 1)).eval()  # frozen dropout, trained
    tracer = OpTracer(model)
    with tracer.step(1):
        with tracer.in_phase("loss"):
            loss = model(torch.randn(4, 8)).pow(2).mean()
        with tracer.in_phase("backward"):
            loss.backward()
    snapshot = tracer.snapshot().to_dict()
    assert snapshot["ops"] and not snapshot["evaluation"]["ops"]
    assert snapshot["step_graphs"][0]["ops"] > 0


def _trace_script(*script_args: str) -> dict:
    from torchport.launch import run_worker

    run = run_worker("cpu", "torchport.script.job:script_trace_job", config={"steps": 3, "seed": 0},
                     extra={"script": str(SCRIPT), "script_args": list(script_args), "redirect_cuda": False,
                            "cwd": str(Path.cwd())}, timeout=300)
    return trace_section(run, f"script:{SCRIPT}", validate_targets(None)).to_dict()


def test_a_scripts_evaluation_and_sampling_at_iteration_0_are_reported_apart():
    evaluating = _trace_script("--eval-interval", "100")
    training_only = _trace_script("--eval-interval", "0")
    assert evaluating["status"] == training_only["status"] == "complete", (evaluating["reason"], training_only["reason"])
    evaluation = evaluating["evaluation"]
    assert training_only["evaluation"] is None
    lines = {int(e["location"].rsplit(":", 1)[1]) for e in evaluation["locations"]}
    for marker in ("# evaluation read", "# sampling step", "# evaluation print", "# sample decode",
                   "hidden, _ = self.mix"):
        assert _line(SCRIPT, marker) in lines, marker
    # The lines that called the model: 2 held-out batches, 8 sampled tokens.
    assert {(c["location"], c["count"]) for c in evaluation["model_calls"]} == {
        (f"{SCRIPT}:{_line(SCRIPT, '# evaluation forward')}", 2), (f"{SCRIPT}:{_line(SCRIPT, '# sampling forward')}", 8)}
    assert evaluation["steps"] == [1] and evaluation["host_syncs"] >= 4  # 2 loss reads, a print, a decode
    # The step is the same with and without the evaluation: its findings, op counts and graphs.
    assert [(f["id"], f["location"], f["count"]) for f in evaluating["findings"]] == \
        [(f["id"], f["location"], f["count"]) for f in training_only["findings"]]
    assert evaluating["totals"] == training_only["totals"]
    assert evaluating["shapes"]["distinct_step_graphs"] == training_only["shapes"]["distinct_step_graphs"]
    assert [s for s in evaluating["host_syncs"]] == [s for s in training_only["host_syncs"]]
    step_lines = {int(r["location"].rsplit(":", 1)[1]) for r in evaluating["ops"] if r["location"]}
    assert _line(SCRIPT, "# gradient clipping") in step_lines
    only_evaluation = {_line(SCRIPT, m) for m in ("# evaluation read", "# sampling step", "# evaluation print",
                                                  "# sample decode")}
    assert not step_lines & only_evaluation
    assert {f["location"] for f in evaluating["findings"] if f["id"] == "TR101"} == {
        f"{SCRIPT}:{_line(SCRIPT, '# training log read')}"}
    text = "\n".join(terminal_lines(TraceSection.from_dict(evaluating)))
    assert f"evaluation/sampling in the first iterations: {evaluation['op_calls']} ops" in text
    assert "not counted in the step" in markdown(TraceSection.from_dict(evaluating))
