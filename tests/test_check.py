"""`torchport check` end to end: real worker processes, real torch.compile,
a real SIGKILL, a real torchrun over gloo.

What is not verified here: CUDA/ROCm (nccl), TPU, Trainium; the xla tests
run on XLA's CPU client (tests/test_check_xla.py)."""
from __future__ import annotations

import json
import socket

import jsonschema
import pytest

from conftest import ranks_match_one_process
from torchport.check.runner import CheckOptions, check_section
from torchport.document import load_schema

pytestmark = pytest.mark.slow


def check(torchport_cli, tmp_path, app: str, *args: str, timeout: float = 600):
    out = tmp_path / "checks.json"
    done = torchport_cli("check", app, *args, "--json", str(out), timeout=timeout)
    section = json.loads(out.read_text()) if out.exists() else None
    if section is not None:
        jsonschema.validate(section, load_schema()["$defs"]["checks"])
    return done, section


def by_name(section: dict, name: str) -> list[dict]:
    return [c for c in section["checks"] if c["name"] == name]


@pytest.mark.alone
def test_builtin_passes_parity_checkpoint_and_pipeline_on_cpu_and_cpu_compile(torchport_cli, tmp_path):
    done, section = check(torchport_cli, tmp_path, "builtin:classifier", "-b", "cpu,cpu-compile",
                          "--only", "parity,checkpoint,pipeline", "--steps", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["status"] for c in section["checks"]] == ["pass"] * len(section["checks"])
    (determinism,) = by_name(section, "determinism")
    assert determinism["figures"]["bit_exact"]
    (parity,) = by_name(section, "parity")
    assert parity["backend"] == "cpu-compile" and parity["figures"]["worst_ratio"] < 8
    assert parity["figures"]["output_source"].startswith("predict")
    pairs = {c["pair"]: c for c in by_name(section, "checkpoint")}
    assert set(pairs) == {"cpu -> cpu", "cpu -> cpu-compile", "cpu-compile -> cpu", "cpu-compile -> cpu-compile"}
    assert pairs["cpu -> cpu"]["figures"]["bit_exact"]  # a deterministic backend resumes bit for bit
    assert pairs["cpu -> cpu"]["figures"]["not_restored"] == []
    assert {c["backend"] for c in by_name(section, "pipeline")} == {"cpu", "cpu-compile"}
    for check_ in by_name(section, "pipeline"):  # each from its own run: data and compute in one process
        assert check_["figures"]["verdict"] == "keeps up" and check_["figures"]["rounds"] == 5
    assert "torchport check builtin:classifier" in done.stdout
    # cpu-compile's worker made the eager reference runs and every pair: one process, not three.
    assert section["config"]["reference_worker"] == "cpu-compile"


def test_bug_only_under_compile_fails_parity_and_names_the_module(torchport_cli, tmp_path, apps_dir):
    done, section = check(torchport_cli, tmp_path, str(apps_dir / "check_compile_bug.py"), "-b", "cpu-compile",
                          "--only", "parity", "--steps", "3")
    assert done.returncode == 1, done.stderr
    (parity,) = by_name(section, "parity")
    assert parity["status"] == "fail"
    assert parity["figures"]["diverging_module"]["module"] == "0.1"
    assert parity["figures"]["diverging_module"]["type"] == "ScaledResidual"
    assert parity["reason"].startswith("first diverging module: 0.1 (ScaledResidual)")
    # The reference runs were made eagerly inside the cpu-compile worker: had they
    # been compiled, they would carry the bug too and parity would pass.
    assert by_name(section, "determinism")[0]["status"] == "pass"
    assert section["config"]["reference_worker"] == "cpu-compile"


def test_state_outside_the_state_dict_fails_checkpoint_portability(torchport_cli, tmp_path, apps_dir):
    done, section = check(torchport_cli, tmp_path, str(apps_dir / "check_unrestorable.py"), "-b", "cpu",
                          "--only", "checkpoint", "--steps", "4")
    assert done.returncode == 1
    (pair,) = by_name(section, "checkpoint")
    assert pair["status"] == "fail" and pair["figures"]["parameter_error"] > 1e-3
    assert "0.scale" in pair["reason"] and "outside state_dict" in pair["reason"]
    assert section["config"]["reference_worker"] == "cpu"


@pytest.mark.alone
def test_nondeterministic_app_is_reported_first_and_nothing_is_widened(torchport_cli, tmp_path, apps_dir):
    done, section = check(torchport_cli, tmp_path, str(apps_dir / "check_nondeterministic.py"), "-b", "cpu",
                          "--only", "parity,pipeline", "--steps", "3")
    assert done.returncode == 1
    first = section["checks"][0]
    assert first["name"] == "determinism" and first["status"] == "fail"
    assert first["reason"].startswith("nondeterministic app: two identical cpu runs")
    assert "not widened" in first["reason"]
    assert by_name(section, "pipeline")[0]["status"] == "pass"  # the other checks still ran


def test_unloadable_state_fails_checkpoint_and_recovery_but_parity_runs(torchport_cli, tmp_path, apps_dir):
    done, section = check(torchport_cli, tmp_path, str(apps_dir / "check_unsaveable.py"), "-b", "cpu",
                          "--only", "parity,checkpoint,recovery", "--steps", "3", "--recovery-steps", "12",
                          "--checkpoint-every", "3", "--kill-seed", "1")
    assert done.returncode == 1
    assert by_name(section, "determinism")[0]["status"] == "pass"
    (pair,) = by_name(section, "checkpoint")
    assert pair["status"] == "fail" and "weights_only=True) refused" in pair["reason"]
    assert "Vocabulary" in pair["reason"]
    (recovery,) = by_name(section, "recovery")
    assert recovery["status"] == "fail" and "restarting from the last checkpoint failed" in recovery["reason"]


def test_sigkill_mid_training_then_resume_is_bit_exact_on_cpu(tmp_path):
    section = check_section(CheckOptions(app="builtin:classifier", backends=["cpu"], only=("recovery",),
                                      recovery_steps=40, recovery_every=5, kill_seed=3, work_dir=tmp_path)).to_dict()
    (recovery,) = section["checks"]
    figures = recovery["figures"]
    assert recovery["status"] == "pass", recovery["reason"]
    assert "SIGKILL" in figures["worker_exit"]  # the worker really died of the signal
    assert figures["kill_step"] <= figures["died_after_step"] < 40
    assert figures["resumed_from_step"] == figures["died_after_step"] // 5 * 5
    assert figures["work_lost_steps"] == figures["died_after_step"] - figures["resumed_from_step"]
    assert figures["bit_exact"] and figures["restart_s"] > 0


def test_ddp_over_gloo_with_two_processes_matches_one_process(torchport_cli, tmp_path):
    done, section = check(torchport_cli, tmp_path, "builtin:classifier", "-b", "cpu", "--only", "distributed",
                          "--distributed-steps", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    (ddp,) = section["checks"]
    figures = ddp["figures"]
    # Pass or borderline by the efficiency alone: the ranks match one process either way.
    assert ranks_match_one_process(ddp) and figures["process_group_backend"] == "gloo", ddp["reason"]
    assert figures["world_size"] == 2 and set(figures["rank_step_s"]) == {"0", "1"}
    # The slowest rank is taken per step (AlgoPerf), so its median is at least every rank's own median.
    assert figures["slowest_rank_step_s"] >= max(figures["rank_step_s"].values())
    assert figures["parameter_error"] <= figures["bound"]
    assert figures["scaling_efficiency"] > 0


def test_rendezvous_that_cannot_complete_fails_with_a_reason(torchport_cli, tmp_path):
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    done, section = check(torchport_cli, tmp_path, "builtin:classifier", "-b", "cpu", "--only", "distributed",
                          "--nnodes", "2", "--rdzv-endpoint", f"localhost:{port}", "--rdzv-conf", "join_timeout=5",
                          "--timeout", "120")
    assert done.returncode == 1
    (ddp,) = section["checks"]
    assert ddp["status"] == "fail"
    assert ddp["reason"].startswith("rendezvous failed (2 node(s) expected)") or "did not finish" in ddp["reason"]


def test_bad_input_is_one_line_and_exit_2(torchport_cli, tmp_path, apps_dir):
    for args, message in [
        (["builtin:nope"], "unknown built-in app 'nope'"),
        (["--only", "parity,speed"], "--only: unknown check 'speed'"),
        (["-b", "quantum"], "unknown backend 'quantum'"),
        (["--steps", "1"], "--steps: must be at least 2"),
        ([str(apps_dir / "spine_syntax_error.py")], "syntax error in app"),
    ]:
        done = torchport_cli("check", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_app_failing_in_its_loss_exits_2_with_its_location(torchport_cli, tmp_path, apps_dir):
    done, section = check(torchport_cli, tmp_path, str(apps_dir / "spine_loss_not_scalar.py"), "-b", "cpu",
                          "--only", "parity")
    assert done.returncode == 2
    assert "spine_loss_not_scalar.py" in done.stderr and "Traceback" not in done.stderr
    assert section["app_error"]["message"]  # written before exiting: nothing measured is lost


@pytest.mark.alone
def test_evaluate_stage_puts_the_checks_in_the_document_and_the_report(tmp_path):
    from torchport.document import result_record, validate
    from torchport.check.stage import evaluate_stage
    from torchport.evaluate import Evaluation, EvaluationOptions
    from torchport.protocol import ProtocolConfig
    from torchport.report.markdown import render

    options = EvaluationOptions(app="builtin:classifier", backends=["cpu"], repeats=1, out_dir=tmp_path,
                                protocol=ProtocolConfig(steps=4, blocks=2, max_warmup_steps=4, inference=False),
                                stages=[evaluate_stage])
    document = Evaluation(options).run().to_dict()
    validate(document)
    names = [(c["name"], c.get("backend") or c.get("pair"), c["status"]) for c in document["checks"]["checks"]]
    assert names == [("determinism", "cpu", "pass"), ("checkpoint", "cpu -> cpu", "pass"), ("pipeline", "cpu", "pass")]
    pipeline_figures = document["checks"]["checks"][2]["figures"]
    # Measured in the backend's own worker as `torchport check` does; the evaluation's figure beside it.
    assert pipeline_figures["step_time_source"].startswith("5 rounds of 4 compute-only steps in this backend's worker")
    assert pipeline_figures["evaluation_step_s"] > 0 and pipeline_figures["verdict"] == "keeps up"
    report = render(result_record(document))
    assert "## Checks: parity, checkpoints, recovery, distributed, input pipeline" in report
    assert "| checkpoint | cpu -> cpu | pass | bit-exact |" in report


def test_a_host_that_crashes_leaves_the_reference_to_its_own_worker(tmp_path, apps_dir):
    section = check_section(CheckOptions(app=str(apps_dir / "check_compile_crash.py"), backends=["cpu", "cpu-compile"],
                                      only=("parity", "checkpoint", "pipeline"), steps=4, work_dir=tmp_path)).to_dict()
    assert section["config"]["reference_worker"] == "cpu"
    assert section["app_error"] is None  # the crash is cpu-compile's, not the app's everywhere
    statuses = {(c["name"], c.get("backend") or c.get("pair")): c["status"] for c in section["checks"]}
    assert statuses[("determinism", "cpu")] == "pass"
    assert statuses[("checkpoint", "cpu -> cpu")] == "pass"
    assert statuses[("pipeline", "cpu")] == "pass"
    assert statuses[("parity", "cpu-compile")] == "error"
    (parity,) = [c for c in section["checks"] if c["name"] == "parity"]
    assert "cpu-compile worker" in parity["reason"] and "planted" in parity["reason"]
