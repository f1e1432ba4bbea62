"""torchport evaluate end to end: real CLI, real worker processes, real
torch.compile.  Bad input, crashes and hangs included."""
import os
import shutil
from pathlib import Path

import jsonschema
import pytest

from conftest import QUICK, QUICK_TIMING, load_result, run_torchport
from torchport.launch import STEADY_ALLOCATOR
from torchport.document import load_schema

APPS = Path(__file__).parent / "apps"


def assert_one_line_error(completed, *fragments):
    assert completed.returncode == 2, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    error_lines = [line for line in lines if line.startswith("torchport: error:")]
    assert len(error_lines) == 1, completed.stderr
    assert "Traceback" not in completed.stderr
    for fragment in fragments:
        assert fragment in error_lines[0], error_lines[0]
    return error_lines[0]


@pytest.mark.parametrize("app", ["builtin:classifier", "builtin:cnn", "builtin:gpt"])
def test_builtin_app_on_each_cpu_backend(app, tmp_path, request):
    if app == "builtin:classifier":
        # The classifier on cpu and cpu-compile is conftest's builtin_evaluation (every stage, two rounds):
        # the same checks on that run.
        out = request.getfixturevalue("builtin_evaluation")
    else:
        out = tmp_path
        completed = run_torchport("evaluate", app, "-b", "cpu,cpu-compile", "--repeats", "1", "--steps", "4",
                                  "--blocks", "2", "--max-warmup", "4", "--no-trace", "--no-checks", "-o", str(out))
        assert completed.returncode == 0, completed.stderr
    document = load_result(out)
    jsonschema.validate(document, load_schema())
    assert document["status"] == "complete"
    for name in ("cpu", "cpu-compile"):
        backend = document["backends"][name]
        assert backend["status"] == "ok", backend.get("error")
        summary = backend["summary"]
        assert summary["step_time_s"]["median"] > 0 and summary["samples_per_s"] > 0
        assert summary["inference"]["step_time_s"]["median"] > 0
        assert summary["metric"]["value"] >= 0
    assert document["config_consistency"]["consistent"]
    # Compilation (even from inductor's warm cache) lands in the first step, not in the sustained figures.
    compiled = document["backends"]["cpu-compile"]["summary"]
    assert compiled["first_step_s"] > compiled["step_time_s"]["median"]
    assert compiled["compile_overhead_s"] > 0
    if app == "builtin:gpt":
        assert document["backends"]["cpu"]["summary"]["tokens_per_s"] > 0
    report = (out / "report.md").read_text()
    assert "- cpu: runs; sustained" in report and "- cpu-compile: runs; sustained" in report


def test_default_app_lists_unavailable_backends_with_reasons(tmp_path):
    completed = run_torchport("evaluate", "-b", "cpu,cuda,cuda-compile,mps", *QUICK_TIMING, "--repeats", "2",
                              "--price", "cpu=0.50", "-o", str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    document = load_result(tmp_path)
    jsonschema.validate(document, load_schema())
    assert document["app"]["spec"] == "builtin:classifier"
    for name in ("cuda", "cuda-compile", "mps"):
        backend = document["backends"][name]
        assert backend["status"] == "unavailable" and backend["reason"]
        assert backend["reason"] in completed.stdout
    cpu = document["backends"]["cpu"]
    assert [run["round"] for run in cpu["runs"]] == [0, 1]
    cost = cpu["cost"]
    expected = 0.50 / 3600 * 1e6 / cpu["summary"]["samples_per_s"]
    assert cost["usd_per_million_samples"] == pytest.approx(expected)
    assert cost["usd_per_epoch"] == pytest.approx(0.50 / 3600 * cpu["summary"]["epoch_s"])
    report = (tmp_path / "report.md").read_text()
    assert "per 1M samples" in report
    # The trace and checks stages ran and rendered their sections.
    assert document["trace"]["targets"] and document["checks"]["checks"]
    assert "## " in report.split("## What was verified")[0]
    assert "torchport evaluate builtin:classifier" in completed.stdout


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """spine_tiny.py on cpu (QUICK): one run for the tests that read what a plain evaluation recorded."""
    out = tmp_path_factory.mktemp("tiny") / "run"
    completed = run_torchport("evaluate", str(APPS / "spine_tiny.py"), "-b", "cpu", *QUICK, "-o", str(out))
    assert completed.returncode == 0, completed.stderr
    return out


def test_environment_and_raw_samples_are_recorded(tiny_run):
    document = load_result(tiny_run)
    environment = document["environment"]
    assert environment["torch"].startswith("2.") and environment["cpu_count"] >= 1
    assert document["command"][:2] == ["torchport", "evaluate"]
    assert document["app"]["file"].endswith("spine_tiny.py")
    run = document["backends"]["cpu"]["runs"][0]
    assert run["worker"]["torch"] == environment["torch"]
    # The worker ran with the fixed malloc thresholds (or the ones set by the user) and says so.
    assert run["worker"]["allocator"] == {name: os.environ.get(name, value) for name, value in STEADY_ALLOCATOR.items()}
    assert len(run["training"]["sustained"]["blocks"]) == 2
    assert run["config_hash"] and run["config"]["optimizer"] == "SGD"


@pytest.mark.parametrize("app, fragments", [
    ("no/such/app.py", ["app file not found"]),
    ("spine_syntax_error.py", ["spine_syntax_error.py:4", "syntax error"]),
    ("spine_factory_raises.py", ["spine_factory_raises.py:3", "KeyError"]),
    ("spine_model_raises.py", ["spine_model_raises.py:7", "model factory raised"]),
    ("spine_loss_not_scalar.py", ["spine_loss_not_scalar.py:6", "scalar tensor, got shape (16, 1)"]),
    ("spine_nan_loss.py", ["spine_nan_loss.py:8", "the loss is nan at training step 3"]),
])
def test_bad_app_gives_one_located_line(app, fragments, tmp_path):
    path = app if app.startswith("no/") else str(APPS / app)
    completed = run_torchport("evaluate", path, "-b", "cpu", *QUICK, "-o", str(tmp_path))
    assert_one_line_error(completed, *fragments)
    if app not in ("no/such/app.py", "spine_syntax_error.py"):
        # Caught inside a worker: what was measured (here: the environment and the failed run) stays on disk.
        document = load_result(tmp_path)
        assert document["status"] == "failed" and fragments[0] in document["status_reason"]
        jsonschema.validate(document, load_schema())
    else:
        # Caught before any worker started: nothing was measured, nothing written.
        assert not (tmp_path / "result.json").exists()


def test_debug_shows_the_traceback(tmp_path):
    completed = run_torchport("--debug", "evaluate", "no/such/app.py", "-o", str(tmp_path))
    assert completed.returncode != 0 and "Traceback" in completed.stderr


@pytest.mark.parametrize("args, fragment", [
    (["-b", "tpu-v9"], "unknown backend 'tpu-v9'"),
    (["--price", "cpu=cheap"], "invalid price 'cheap'"),
    (["--price", "cpu=-1"], "must be a positive number"),
    (["--price", "cpu"], "expected BACKEND=USD_PER_HOUR"),
    (["--price", "gpu9=1"], "unknown backend 'gpu9'"),
    (["--repeats", "0"], "--repeats: must be at least 1"),
])
def test_bad_flags(args, fragment, tmp_path):
    completed = run_torchport("evaluate", *args, "-o", str(tmp_path))
    assert_one_line_error(completed, fragment)
    assert not (tmp_path / "result.json").exists()


def test_price_file(tmp_path):
    bad = tmp_path / "prices.toml"
    bad.write_text("[prices]\ncpu = 0.2\ncuda = \n")
    assert_one_line_error(run_torchport("evaluate", "--prices", str(bad), "-o", str(tmp_path / "out")),
                          f"{bad}:3", "invalid TOML")
    good = tmp_path / "good.toml"
    good.write_text("[prices]\ncpu = 0.2\n")
    completed = run_torchport("evaluate", str(APPS / "spine_tiny.py"), "-b", "cpu", *QUICK,
                              "--prices", str(good), "-o", str(tmp_path / "out"))
    assert completed.returncode == 0, completed.stderr
    assert load_result(tmp_path / "out")["backends"]["cpu"]["cost"]["usd_per_hour"] == 0.2


def test_killed_worker_is_reported_and_others_complete(tmp_path):
    completed = run_torchport("evaluate", str(APPS / "spine_kill_when_compiled.py"), "-b", "cpu,cpu-compile",
                              "--repeats", "2", "--steps", "4", "--blocks", "2", "--max-warmup", "4",
                              "--no-inference", "--no-trace", "--no-checks", "-o", str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    document = load_result(tmp_path)
    jsonschema.validate(document, load_schema())
    compiled = document["backends"]["cpu-compile"]
    assert compiled["status"] == "crashed"
    assert "SIGKILL" in compiled["error"]["message"] and "training" in compiled["error"]["message"]
    assert len(compiled["runs"]) == 1  # a crashed backend is not retried in later rounds
    eager = document["backends"]["cpu"]
    assert eager["status"] == "ok" and len(eager["runs"]) == 2
    assert "cpu-compile: does not run: crashed" in (tmp_path / "report.md").read_text()


def test_hanging_worker_times_out(tmp_path):
    completed = run_torchport("evaluate", str(APPS / "spine_hang.py"), "-b", "cpu", *QUICK,
                              "--timeout", "15", "-o", str(tmp_path))
    # Reported as that backend's result; exit 1 because no backend produced figures.
    assert completed.returncode == 1, completed.stderr
    backend = load_result(tmp_path)["backends"]["cpu"]
    assert backend["status"] == "timed_out"
    assert "timed out after 15 s" in backend["error"]["message"]
    assert "training:warmup" in backend["error"]["message"]
    # What the worker measured before it hung is kept.
    assert backend["runs"][0]["training"]["first_step_s"] > 0


def test_phase_timeout(tmp_path):
    completed = run_torchport("evaluate", str(APPS / "spine_hang.py"), "-b", "cpu", *QUICK,
                              "--phase-timeout", "15", "-o", str(tmp_path))
    assert completed.returncode == 1
    error = load_result(tmp_path)["backends"]["cpu"]["error"]
    assert "phase 'training:warmup' ran over 15 s" in error["message"]


def test_report_rerenders_and_validates(tiny_run, tmp_path):
    run = shutil.copytree(tiny_run, tmp_path / "run")  # a copy: the shared run keeps its report
    (run / "report.md").unlink()
    completed = run_torchport("report", str(run / "result.json"), "--validate")
    assert completed.returncode == 0, completed.stderr
    assert "- cpu: runs; sustained" in (run / "report.md").read_text()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert_one_line_error(run_torchport("report", str(broken)), f"{broken}:1")


def test_backends_command_lists_every_backend_with_reasons():
    completed = run_torchport("backends", "--json")
    assert completed.returncode == 0
    import json

    rows = {row["name"]: row for row in json.loads(completed.stdout)}
    assert {"cpu", "cpu-compile", "cuda", "cuda-compile", "mps"} <= set(rows)
    assert rows["cpu"]["available"] and rows["cpu-compile"]["available"]
    for name, row in rows.items():
        assert row["verification"]
        if not row["available"]:
            assert row["reason"], name


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(load_schema())


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    import signal
    import subprocess
    import sys
    import threading

    # -v: a line per worker phase on stderr, read as it comes.
    process = subprocess.Popen(
        [sys.executable, "-m", "torchport.cli", "evaluate", str(APPS / "spine_hang.py"), "-b", "cpu", *QUICK, "-v",
         "-o", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    warming_up = threading.Event()

    def read_stderr():
        for line in process.stderr:
            lines.append(line)
            if ": training:warmup" in line:
                warming_up.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # The app hangs from its third step on: once the worker is warming up, it has saved its first step.
        assert warming_up.wait(timeout=180), "no warm-up phase in 180 s:\n" + "".join(lines)[-3000:]
        process.send_signal(signal.SIGINT)
        process.stdout.read()
        process.wait(timeout=60)
        reader.join(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = "".join(lines)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    document = load_result(tmp_path)
    assert document["status"] == "interrupted"
    run = document["backends"]["cpu"]["runs"][0]
    assert run["status"] == "interrupted"
    assert run["training"]["first_step_s"] > 0
    assert os.path.exists(tmp_path / "report.md")
