"""The time budget, adaptive sampling, the ETA, the worker's memory per phase
and the 124 M-parameter built-in (issue 18).  Real workers, real torch."""
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest
import torch

from conftest import load_result
from torchport.budget import BudgetPlan, parse_duration, parse_precision, precision_of
from torchport.errors import UserError
from torchport.launch import run_worker
from torchport.progress import Progress
from torchport.protocol import Block, ProtocolConfig
from torchport.document import load_schema
from torchport.records import ErrorKind, RunRecord, RunStatus, Summary
from torchport.sampling import BudgetedSampling, BudgetTooSmall, median_interval_ranks, relative_half_width

APPS = Path(__file__).parent / "apps"


def stage_costs(script_mode: bool = False) -> dict:
    """The cost models of an evaluation's stages, by name, as the evaluation hands them to its plan."""
    from torchport import stages

    return {stage.name: stage.cost_model() for stage in stages.for_evaluation(script_mode, set())}


def run_stages_with(options, plan):
    """The options the stages run with under ``plan``; the evaluation's own are left as they were."""
    import dataclasses

    from torchport.evaluate import planned

    before = dataclasses.replace(options)
    stage_options = planned(options, plan)
    assert options == before  # a plan is a value: nothing is set on the caller's options
    return stage_options


def test_durations_and_precisions():
    assert parse_duration("10m") == 600 and parse_duration("90s") == 90 and parse_duration("1h30m") == 5400
    assert parse_duration("2.5m") == 150 and parse_duration("600") == 600 and parse_duration("none") is None
    for bad in ("", "ten", "10x", "-5m", "0.2s"):
        with pytest.raises(UserError, match="invalid duration"):
            parse_duration(bad)
    assert parse_precision("2%") == pytest.approx(0.02) and parse_precision("0.05") == 0.05
    for bad in ("0", "150%", "x"):
        with pytest.raises(UserError, match="invalid precision"):
            parse_precision(bad)


def test_median_interval_ranks_hold_the_coverage():
    assert median_interval_ranks(5) is None  # five values cannot bound the median at 95%
    for count in range(6, 80):
        low, high = median_interval_ranks(count)
        assert high == count - 1 - low
        # P(B <= low) <= 2.5% for B ~ Binomial(count, 1/2), and low is the largest such rank.
        below = sum(math.comb(count, k) for k in range(low + 1)) / 2**count
        assert below <= 0.025 < below + math.comb(count, low + 1) / 2**count
    assert relative_half_width([1.0] * 10) == 0.0
    assert relative_half_width([0.98, 1.02, 1.0, 1.0, 0.99, 1.01, 1.0, 1.0, 1.0, 1.0]) == pytest.approx(0.01)


def _blocks(times, steps=2):
    return [Block(seconds=t * steps, steps=steps, data_wait_s=0.0, samples=steps, tokens=None, losses=None,
                  compilations=0) for t in times]


def test_budgeted_sampling_stops_at_precision_or_deadline():
    import time

    config = ProtocolConfig(steps=20, blocks=10)
    precise = BudgetedSampling(config, deadline=time.time() + 3600, precision=0.05)
    assert precise.stop(_blocks([1.0] * 5)) is None  # too few blocks for an interval
    assert precise.stop(_blocks([1.0, 1.01, 0.99, 1.0, 1.0, 1.02])) == "precision"
    assert precise.stop(_blocks([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])) is None  # too wide: keep sampling
    late = BudgetedSampling(config, deadline=time.time() + 0.5, precision=0.05)
    assert late.stop(_blocks([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])) == "budget"  # the next block would pass the deadline
    fixed_count = BudgetedSampling(config, deadline=time.time() + 3600, precision=None)
    assert fixed_count.stop(_blocks([1.0, 2.0] * 5)) == "blocks"
    # The block length shrinks so that the fewest blocks an interval needs fit before the deadline.
    short = BudgetedSampling(config, deadline=time.time() + 0.6, precision=None)
    assert short.block_steps(_blocks([0.01]), first_step_s=5.0) == 2  # configured: 20 // 10
    tight = BudgetedSampling(config, deadline=time.time() + 0.07, precision=None)
    assert tight.block_steps(_blocks([0.01]), first_step_s=5.0) == 1
    # No room for one sustained step: the run ends with what it would have needed.
    late_start = BudgetedSampling(config, deadline=time.time() + 0.5, precision=None, backend="cpu", budget_s=60,
                                  share_s=20, started=time.time() - 30)
    with pytest.raises(BudgetTooSmall, match=r"^budget too small: needs at least 31 s for one sustained block on "
                                             r"cpu .*its share of the budget was 20 s; a budget of at least 1.6 min"):
        late_start.block_steps(_blocks([1.0]), first_step_s=5.0)
    # The worker's start-up (forked 2 s ago, its share begun 6 s ago) and the inference reserve count too:
    # what it needs is always more than its share (a message once read "needs 3 s ... share was 9 s").
    now = time.time()
    reserved = BudgetedSampling(config, deadline=now, precision=None, backend="cpu", budget_s=60, share_s=9,
                                started=now - 2, share_started=now - 6, reserved_s=3)
    with pytest.raises(BudgetTooSmall, match=r"^budget too small: needs at least 10 s for one sustained block on "
                                             r"cpu \(6 s to reach the sustained phase, then 1 s a step, and 3 s kept "
                                             r"for inference\), its share of the budget was 9 s"):
        reserved.block_steps(_blocks([1.0]), first_step_s=5.0)


def test_plan_shares_the_time_and_the_eta_counts_down():
    clock = {"now": 1000.0}
    plan = BudgetPlan(600, ["cpu", "cpu-compile"], rounds=3, stages=True, precision=0.02, explicit=True,
                      clock=lambda: clock["now"], started=1000.0)
    entry = plan.job_entry("cpu", 0, remaining_this_round=2)
    # 25% for the stages, 3% for the results; round 1 shares the rest over 2 runs + 2 later half-weight runs.
    assert entry.deadline == pytest.approx(1000 + (600 * 0.75 - 18) / 3)
    assert entry.precision == 0.02
    overall, per_backend = plan.eta(["cpu", "cpu-compile"])
    assert 0 < overall <= 582 and set(per_backend) == {"cpu", "cpu-compile"}
    clock["now"] += 100
    plan.record_run("cpu", RunRecord.from_dict({"status": "ok", "wall_s": 100, "phases": {"import_s": 5, "init_s": 1},
                            "training": {"first_step_s": 2, "sustained": {"blocks": [{"seconds": 1, "steps": 1}]}}}))
    later, _ = plan.eta(["cpu", "cpu-compile"])
    assert later < overall
    assert plan.minimum_run_s("cpu") == pytest.approx(8 + 6 * 1.0)
    summary = Summary.from_dict({"step_time_s": {"median": 1.0, "ci95": [0.99, 1.01]}})
    assert precision_of(summary) == pytest.approx(0.01)


def test_a_later_run_too_short_to_measure_is_left_to_the_backend_after_it():
    """35 s of timing left in the last round, two backends to go, each needing
    24 s (start-up and six 2 s blocks): the first is not started on a 17 s
    share it could not use; the second then gets the whole 35 s."""
    clock = {"now": 0.0}
    plan = BudgetPlan(600, ["cpu", "cpu-compile"], rounds=2, stages=False, precision=0.02, explicit=True,
                      clock=lambda: clock["now"], started=0.0)
    for name in ("cpu", "cpu-compile"):
        plan.record_run(name, RunRecord.from_dict({"status": "ok", "wall_s": 100, "phases": {"import_s": 9, "init_s": 1},
                               "training": {"first_step_s": 2, "sustained": {"blocks": [{"seconds": 2, "steps": 1}]}}}))
    assert plan.minimum_run_s("cpu") == pytest.approx(24.0)
    clock["now"] = plan.timing_end - 35.0
    assert not plan.wants_run("cpu", 1, None, remaining_this_round=2)
    (line,) = plan.record({}).could_not
    assert line.startswith("cpu: 1 process only") and "its part of the timing share left was 18 s" in line
    assert plan.wants_run("cpu-compile", 1, None, remaining_this_round=1)
    assert plan.job_entry("cpu-compile", 1, remaining_this_round=1).share_s == pytest.approx(35.0)


def test_progress_line_shows_the_plans_eta():
    progress = Progress("evaluate", unit="runs")
    progress.plan(6)
    progress.eta(125.0, {"cpu": 50.0, "cpu-compile": 75.0})
    line = progress.line("cpu round 1/3: warmup")
    assert re.search(r"about 0:02:0[45] left, cpu 0:00:[45]\d, cpu-compile 0:01:1[45]\)", line), line


def test_gpt_124m_is_gpt2_small_and_built_on_meta():
    from torchport.app import load_app
    from torchport.builtin.gpt import Shape, TinyGPT

    with torch.device("meta"):
        model = TinyGPT(Shape.named("124m"), tie_embeddings=True)
    assert sum(p.numel() for p in model.parameters()) == 124_439_808  # GPT-2 small, embeddings tied
    with torch.device("meta"):
        assert sum(p.numel() for p in TinyGPT().parameters()) == 470_528  # the demo's tiny model, unchanged
    assert load_app("builtin:gpt?size=124m").name == "gpt-124m"


@pytest.mark.parametrize("args, message", [
    (["builtin:gpt?size=1b"], "builtin:gpt?size=1b: built-in app 'gpt': size='1b' is not one of tiny, 124m"),
    (["builtin:gpt?depth=2"], "has no option 'depth' (its options: size)"),
    (["--budget", "10x"], "--budget: invalid duration '10x'"),
    (["--precision", "200%"], "--precision: invalid precision '200%'"),
])
def test_bad_budget_and_builtin_options_are_one_line(torchport_cli, tmp_path, args, message):
    done = torchport_cli("evaluate", *args, "-b", "cpu", "--no-trace", "--no-checks", "-o", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if "error" in line]) == 1


@pytest.mark.alone
def test_budget_too_small_for_one_backend_the_other_still_runs(budget_too_small_evaluation):
    """cpu-compile's first step outlasts any share of a 60 s budget: that
    backend gets 'budget too small: needs at least ...', cpu runs and samples
    until its precision target or its share is spent (the run: conftest)."""
    out, done = budget_too_small_evaluation
    assert done.returncode == 0, done.stderr
    document = load_result(out)
    jsonschema.validate(document, load_schema())
    compiled = document["backends"]["cpu-compile"]
    assert compiled["status"] == "error" and compiled["error"]["kind"] == "budget-too-small"
    assert compiled["error"]["message"].startswith("budget too small: needs at least ")
    assert "a budget of " in compiled["error"]["message"]
    assert "budget too small: needs at least" in done.stderr
    cpu = document["backends"]["cpu"]
    assert cpu["status"] == "ok" and cpu["summary"]
    for run in cpu["runs"]:
        sustained = run["training"]["sustained"]
        assert sustained["stopped_by"] in ("precision", "budget", "max_blocks")
        if sustained["stopped_by"] == "precision":
            assert sustained["precision"] <= 0.5 and len(sustained["blocks"]) >= 6
        assert sustained["plan"]["precision_target"] == 0.5
    budget = document["budget"]
    assert budget["budget_s"] == 60 and budget["adaptive"] and budget["precision_target"] == 0.5
    assert budget["backends"]["cpu"]["precision_reached"] == pytest.approx(precision_of(Summary.from_dict(cpu["summary"])))
    # The budget, +25%: the fixed costs of a worker (imports 5-10 s on the loaded 2-core machine) weigh
    # heavily in a 60 s budget; the 10-minute benchmark shows the +-10% of the issue.
    assert budget["elapsed_s"] <= 75
    # Plain progress lines (stderr is not a terminal) carry the plan's ETA.
    assert re.search(r"\(about \d:\d\d:\d\d left", done.stderr)
    # The report says what the budget bought and could not; a budget too small is not "does not run here".
    report = (out / "report.md").read_text()
    assert "## Time budget and precision" in report and "## Does not run here" not in report
    assert "- cpu-compile: budget too small: needs at least" in report
    assert "## Host memory per phase" in report and "training:sustained" in report
    assert "precision reached (95% interval of the median step time, target ±50.0%): cpu ±" in done.stdout


def test_worker_records_peak_memory_per_phase_and_drops_inference_outputs():
    config = ProtocolConfig(steps=16, blocks=2, max_warmup_steps=0).as_dict()
    # Large allocations mapped and unmapped one by one (not from the heap, whose holes make the resident
    # size depend on the order of frees): the resident size then follows what the worker holds.
    allocator = {"MALLOC_MMAP_THRESHOLD_": str(2**20), "MALLOC_TRIM_THRESHOLD_": str(2**20)}
    run = run_worker("cpu", "torchport.protocol:evaluate_job", app=f"{APPS / 'budget_app.py'}:big_outputs",
                     config=config, timeout=240, env=allocator)
    assert run.status == RunStatus.OK, run.error
    memory = run.host_memory
    assert memory is not None and memory.phases is not None
    phases = memory.phases
    for name in ("import", "init", "training:first_step", "training:sustained", "inference:first_step",
                 "inference:sustained"):
        assert 0 < phases[name] <= memory.peak_bytes, name
    # The process's peak is the kernel's (ru_maxrss): it also keeps the mark a thread leaves when it exits,
    # which no phase reset clears, so it may exceed the largest phase by a brief spike across a boundary.
    assert run.host_peak_rss_bytes is not None and run.host_peak_rss_bytes <= memory.peak_bytes
    assert 0.9 * memory.peak_bytes <= max(phases.values()) <= memory.peak_bytes, (phases, memory)
    # 8 steps a block, 64 MiB an output (and 64 MiB more while it is made): a block of kept outputs
    # would add about 512 MiB over the first step; as in a plain loop, only the previous output is
    # alive while the next is computed (+64 MiB).
    assert phases["inference:sustained"] - phases["inference:first_step"] < 160 * 2**20, phases


def test_stages_are_sized_by_the_time_left_or_left_out():
    from torchport.check.stage import evaluate_stage as check_stage
    from torchport.evaluate import EvaluationOptions
    from torchport.trace.stage import evaluate_stage as trace_stage

    clock = {"now": 0.0}
    plan = BudgetPlan(600, ["cpu"], rounds=1, stages=True, explicit=True, clock=lambda: clock["now"], started=0.0,
                      stage_costs=stage_costs())
    plan.record_run("cpu", RunRecord.from_dict({"status": "ok", "wall_s": 60, "phases": {"import_s": 5, "init_s": 3},
                            "training": {"first_step_s": 2, "sustained": {"blocks": [{"seconds": 2.0, "steps": 1}]}}}))
    document = {"reference": "cpu", "backends": {"cpu": {}}}
    options = EvaluationOptions(stages=[trace_stage, check_stage], timeout_s=600.0)
    clock["now"] = 300.0  # 282 s left before the results are written
    roomy = run_stages_with(options, plan.plan_stages(document["reference"], document["backends"], options.timeout_s))
    assert roomy.trace_steps == 12 and roomy.check_steps == 6 and len(roomy.stages) == 2
    assert roomy.timeout_s == pytest.approx(282 * 1.25 + 10) and roomy.check_budget_s == roomy.timeout_s
    clock["now"] = 560.0  # 22 s left: the trace's minimum (10 s start-up, 3 steps at 4 s) takes them all
    tight = run_stages_with(options, plan.plan_stages(document["reference"], document["backends"], options.timeout_s))
    assert tight.trace_steps == 3 and tight.stages == [trace_stage]
    # The checks' minimum: 2 runs' start-ups + 2 + 5 pipeline + 1 resumed steps of 2 s, and the reference's
    # repeat and float64 runs (2 start-ups, 2 steps x 3.5): 70 s.
    assert any(line.startswith("checks: not run: even 2 steps, with 1 timed pipeline step a round, need about "
                               "70 s, and 0 s were left") for line in plan.could_not), plan.could_not


def test_a_large_models_checks_stage_is_sized_to_its_runs_and_checkpoints():
    """GPT-2 small's figures (2 s steps, 7 s before the first, 124 M
    parameters: 1.5 GB checkpoints) on cpu and cpu-compile: with 150 s left,
    6 steps and the full pipeline timing do not fit; the checks get the most
    that does, the trace what they leave."""
    from torchport.check.stage import evaluate_stage as check_stage
    from torchport.evaluate import EvaluationOptions
    from torchport.stages import STAGES

    trace_entry = next(stage for stage in STAGES if stage.name == "trace")
    clock = {"now": 0.0}
    plan = BudgetPlan(600, ["cpu", "cpu-compile"], rounds=1, stages=True, explicit=True,
                      clock=lambda: clock["now"], started=0.0, stage_costs=stage_costs())
    for name in ("cpu", "cpu-compile"):
        plan.record_run(name, RunRecord.from_dict({"status": "ok", "wall_s": 140, "phases": {"import_s": 1, "init_s": 3},
                               "config": {"parameters": 124_439_808},
                               "training": {"first_step_s": 3, "sustained": {"blocks": [{"seconds": 2.0, "steps": 1}]}}}))
    # 3 s a 1.5 GB checkpoint; at their minimum the checks need 136 s, the trace 19 s: more than their
    # usual share (150 s) is kept for them.
    assert plan.stage_reserve_s == pytest.approx(154.8, abs=0.1)
    document = {"reference": "cpu", "backends": {"cpu": {}, "cpu-compile": {}}}
    clock["now"] = plan.timing_end - 1.0  # the timing rounds ended a second early
    options = EvaluationOptions(stages=[trace_entry, check_stage], timeout_s=600.0)
    sized = run_stages_with(options, plan.plan_stages(document["reference"], document["backends"], options.timeout_s))
    sizes = plan.stage_sizes.to_dict()
    assert list(sizes) == ["time_left_s", "checks", "trace", "timeout_s"]  # planned in this order
    assert sizes["checks"]["fits"] and sizes["checks"]["needs_s"] == pytest.approx(135.8, abs=0.1)
    assert (sized.check_steps, sized.check_pipeline_per_round, sized.trace_steps) == (2, 1, 3)
    assert sized.stages == [trace_entry, check_stage]  # both stay: a registry entry is matched by name
    assert plan.could_not == []
    clock["now"] = plan.timing_end + 30.0  # the rounds overran: the checks no longer fit, the trace does
    sized = run_stages_with(options, plan.plan_stages(document["reference"], document["backends"], options.timeout_s))
    assert sized.stages == [trace_entry] and sized.trace_steps == 12


def test_only_the_budgets_own_limit_makes_a_timeout_budget_too_small():
    plan = BudgetPlan(120, ["cpu"], rounds=1, stages=False, started=0.0, clock=lambda: 0.0)
    entry = plan.job_entry("cpu", 0, remaining_this_round=1)
    limit = plan.run_timeout(entry, 600.0)
    by_phase_timeout = RunRecord.from_dict({"status": "timed_out", "wall_s": 30.0,
                                            "error": {"kind": "timeout", "message": "phase"}})
    plan.explain_overrun("cpu", by_phase_timeout, entry, 600.0)
    assert by_phase_timeout.error is not None and by_phase_timeout.error.kind == ErrorKind.TIMEOUT
    by_budget = RunRecord.from_dict({"status": "timed_out", "wall_s": limit + 0.5, "last_phase": "training:first_step",
                                     "error": {"kind": "timeout", "message": "run"}})
    plan.explain_overrun("cpu", by_budget, entry, 600.0)
    assert by_budget.status == RunStatus.ERROR and by_budget.error is not None
    assert by_budget.error.kind == ErrorKind.BUDGET_TOO_SMALL
    assert "still in phase 'training:first_step'" in by_budget.error.message
    # Written back in the order the worker's result had its keys, the new error included.
    assert list(by_budget.to_dict()) == ["status", "wall_s", "last_phase", "error"]


# --- check --budget ---------------------------------------------------------------------------

def test_check_budget_sizes_recovery_and_skips_what_cannot_fit():
    """The plan from measured figures (1 s steps, 2 s start-ups): recovery is
    cut to what its share holds, never below its minimum; a check whose
    minimum does not fit the time left is skipped with what it needed."""
    from torchport.check.budget import CheckBudget
    from torchport.check.runner import CheckOptions

    options = CheckOptions(recovery_steps=24, recovery_every=5, distributed_steps=8, timeout_s=600.0)
    budget = CheckBudget(60.0)
    budget.step_s["cpu"], budget.startup_s["cpu"] = 1.0, 2.0
    sized, skip = budget.size("recovery", options, "cpu", checks_left=2)
    assert skip is None
    # share 30 s: 3 start-ups (6 s) + steps x 1 s x 2 runs x 1.3 -> 9 steps, a checkpoint every 3
    assert (sized.recovery_steps, sized.recovery_every) == (9, 3)
    assert sized.timeout_s <= 60.0
    assert budget.sized == ["recovery on cpu: 9 steps, a checkpoint every 3 (asked 24, every 5)"]
    budget.started -= 55.0  # 5 s left: distributed needs 3 x 2 s + 3 steps x 3.9 s
    _, skip = budget.size("distributed", options, "cpu", checks_left=1)
    assert skip is not None and skip.startswith("budget too small: distributed on cpu needs about ")
    assert budget.record().skipped == [skip]


@pytest.mark.alone
def test_check_budget_that_ends_a_worker_says_budget_too_small(torchport_cli, tmp_path):
    """A budget shorter than one worker's start-up: the training checks' worker
    is ended at the budget's end and the checks say 'budget too small', not a
    timeout of the backend; the check exits 1 (a check could not run)."""
    out = tmp_path / "check.json"
    done = torchport_cli("check", "-b", "cpu", "--only", "parity", "--budget", "1s", "--format", "json",
                         "-o", str(out))
    assert done.returncode == 1, done.stderr[-2000:]
    section = json.loads(out.read_text())
    assert section["config"]["budget"]["budget_s"] == 1.0
    reasons = [check["reason"] for check in section["checks"]]
    assert reasons and all(reason.startswith("budget too small: the time budget ended the cpu worker after 1 s")
                           for reason in reasons), reasons
    jsonschema.validate(section, load_schema()["$defs"]["checks"])


def test_bad_check_budget_is_one_line(torchport_cli):
    done = torchport_cli("check", "-b", "cpu", "--budget", "soon")
    assert done.returncode == 2 and "--budget: invalid duration 'soon'" in done.stderr
    assert "Traceback" not in done.stderr


def test_script_mode_stages_run_whole_or_are_left_out():
    """Script mode's stages have fixed step counts: the reserve holds them,
    and one that the time left cannot hold is left out with what it needed."""
    from torchport.evaluate import EvaluationOptions
    from torchport.stages import STAGES

    script_stages = [stage for stage in STAGES if stage.mode == "script"]
    clock = {"now": 0.0}
    plan = BudgetPlan(100, ["cpu"], rounds=1, stages=True, explicit=True, clock=lambda: clock["now"], started=0.0,
                      stage_costs=stage_costs(script_mode=True))
    plan.record_run("cpu", RunRecord.from_dict({"status": "ok", "wall_s": 20, "phases": {"import_s": 2, "init_s": 1},
                            "training": {"first_step_s": 1, "sustained": {"blocks": [{"seconds": 1.0, "steps": 1}]}}}))
    # 4 s before the steps: the trace 4 + 3 x 2 x 1 s = 10 s; two ranks of 7 steps (first, 2 warm-up,
    # 4 sustained), 2 x (4 + 7) = 22 s
    assert plan.stage_reserve_s == pytest.approx(32.0)
    clock["now"] = plan.end - 20.0
    options = EvaluationOptions(stages=list(script_stages), timeout_s=600.0)
    sized = run_stages_with(options, plan.plan_stages("cpu", ["cpu"], 600.0))
    assert [stage.name for stage in sized.stages] == ["script-trace"]
    assert plan.could_not == ["script-distributed: not run: it needs about 22 s at the measured 1.00 s a step, "
                              "10 s were left"]


def test_the_checks_reference_runs_are_counted_when_cpu_was_not_evaluated():
    """The checks' reference is always cpu: evaluated only on another backend,
    the stage still makes the reference's own run (and its pipeline timing),
    a repeat and a float64 run, counted at the slowest measured step."""
    from torchport.check.stage import stage_seconds

    # One backend, 1 s steps, nothing before them, no checkpoint bytes: its run 2 steps, 5 pipeline steps
    # (5 rounds of 1), 1 resumed step = 8 s; the reference's repeat and float64 runs 2 x (1 + 2.5) = 7 s.
    assert stage_seconds(2, 1, {"cpu": (1.0, 0.0)}, "cpu", None) == pytest.approx(15.0)
    # Not evaluated: its own run (2 + 5 steps) comes on top.
    assert stage_seconds(2, 1, {"cuda": (1.0, 0.0)}, "cpu", None) == pytest.approx(22.0)


def test_the_eta_counts_the_stages_that_will_run():
    """Once the stages are sized, the ETA is their expected time (checks and trace
    one after the other), not 0 while they still run."""
    from torchport import stages as stage_registry
    from torchport.evaluate import EvaluationOptions

    clock = {"now": 0.0}
    plan = BudgetPlan(900, ["cpu", "cpu-compile"], rounds=1, stages=True, precision=0.02, explicit=False,
                      clock=lambda: clock["now"], started=0.0, stage_costs=stage_costs())
    for name in ("cpu", "cpu-compile"):
        plan.record_run(name, RunRecord.from_dict({"status": "ok", "wall_s": 20, "phases": {"import_s": 3, "init_s": 1},
                               "training": {"first_step_s": 1, "sustained": {"blocks": [{"seconds": 0.05, "steps": 1}]}}}))
    clock["now"] = 60.0
    options = EvaluationOptions(app="builtin:classifier", backends=["cpu", "cpu-compile"],
                                stages=[stage for stage in stage_registry.for_evaluation(False, set())
                                        if stage_registry.name_of(stage) in ("trace", "checks")])
    document = {"reference": "cpu", "backends": {"cpu": {}, "cpu-compile": {}}}
    plan.plan_stages(document["reference"], document["backends"], options.timeout_s)
    sizes = plan.stage_sizes.sized()
    assert set(sizes) == {"checks", "trace"}  # both fit
    overall, _ = plan.eta([])
    assert overall == pytest.approx(plan.stage_estimate_s) and overall >= (sizes["checks"].needs_s or 0.0) > 0
    clock["now"] += 10
    assert plan.eta([])[0] == pytest.approx(overall)  # an estimate, counted down by the display from when it was given



def test_an_in_process_caller_gets_the_whole_budget():
    """The budget counts from the process's start only when the process is the
    torchport command; a test session or notebook calling the CLI in process
    may be older than the budget (CI ran this suite for 40 minutes, then an
    in-process evaluation found its 15-minute budget spent)."""
    import subprocess
    import sys
    import time

    from torchport.budget import started_as_command

    assert not started_as_command()  # pytest is the process here
    assert time.time() - BudgetPlan(900, ["cpu"], rounds=1, stages=False).started < 5
    probe = ("import sys; sys.argv = ['/usr/local/bin/torchport']; "
             "from torchport.budget import started_as_command; print(started_as_command())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "True", done.stderr
