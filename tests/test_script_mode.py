"""Script mode end to end: unmodified training scripts through the real CLI,
in real workers, with real torch.compile and the real xla environment."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import jsonschema
import pytest

from conftest import run_torchport
from torchport import processes
from torchport.document import load_schema

TESTS = Path(__file__).resolve().parent
SCRIPTS = TESTS / "scripts"
CUDA_SCRIPT = TESTS.parent / "examples" / "cuda_training" / "train.py"
SMALL = ["--repeats", "1", "--steps", "6", "--blocks", "2", "--max-warmup", "6"]


def evaluate_script(out: Path, script: Path, backends: str, *script_args: str, redirect: bool = False,
                    env: dict | None = None, options: tuple[str, ...] = ()):
    flags = (["--redirect-cuda"] if redirect else []) + list(options)
    completed = run_torchport("evaluate", "--script", str(script), *flags, "-b", backends, *SMALL, "-o", str(out),
                              "--", *script_args, env=env)
    document = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else None
    if document is not None:
        jsonschema.validate(document, load_schema())
    return completed, document


def only_run(document: dict, backend: str) -> dict:
    runs = document["backends"][backend]["runs"]
    assert len(runs) == 1
    return runs[0]


def test_device_agnostic_script_runs_by_configuration_alone(tmp_path, xla_environment):
    marker = uuid.uuid4().hex
    completed, document = evaluate_script(tmp_path, SCRIPTS / "agnostic.py", "cpu,cpu-compile,xla",
                                          "--device={device}", "--compile={compile}", "--workers=2",
                                          env={"SCRIPT_TEST_MARKER": marker})
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name in ("cpu", "cpu-compile", "xla"):
        run = only_run(document, name)
        assert run["status"] == "ok", run.get("error")
        assert run["script"]["stopped_by_torchport"] is True
        assert "redirects" not in run["script"]  # nothing was redirected: configuration alone
        assert run["script"]["optimizers"] == ["AdamW"]
        assert document["backends"][name]["summary"]["step_time_s"]["median"] > 0
        assert document["script"]["verdicts"][name]["verdict"] == "runs by configuration alone"
    # The placeholders were filled per backend, and the script compiled itself where told to.
    assert only_run(document, "cpu")["script"]["argv"][:2] == ["--device=cpu", "--compile=false"]
    assert only_run(document, "cpu-compile")["script"]["argv"][1] == "--compile=true"
    assert only_run(document, "cpu-compile")["script"]["compiled_by_script"]
    assert not only_run(document, "cpu")["script"]["compiled_by_script"]
    assert only_run(document, "xla")["script"]["argv"][0].startswith("--device=xla")
    # DataLoader worker processes ended with the run.
    assert not processes.marked("SCRIPT_TEST_MARKER", marker)
    parity = document["script"]["parity"]
    assert parity["status"] == "compared" and parity["steps"] == 5
    assert {name: v["status"] for name, v in parity["backends"].items()} == {"cpu-compile": "pass", "xla": "pass"}
    assert "## Script mode" in (tmp_path / "report.md").read_text()


def test_cuda_script_runs_with_redirects_and_matches_the_scan(tmp_path, xla_environment):
    # --no-amp: the redirected autocast is bfloat16 on these backends, which a CPU without native
    # bfloat16 (AVX2 only) emulates about 25x slower than float32; the redirects still fire with it off.
    completed, document = evaluate_script(tmp_path, CUDA_SCRIPT, "cpu,cpu-compile,xla", "--workers", "0",
                                          "--steps-per-epoch", "20", "--no-amp", redirect=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    source = CUDA_SCRIPT.read_text().splitlines()

    def line_of(text: str) -> int:
        return next(number for number, line in enumerate(source, 1) if text in line)

    # The script never compiles its model: cpu-compile measured eager, and says so instead of "runs".
    compile_run = only_run(document, "cpu-compile")
    assert compile_run["status"] == "error" and compile_run["error"]["kind"] == "not-on-device"
    assert "0 frames compiled by torch.compile" in document["script"]["verdicts"]["cpu-compile"]["text"]
    assert document["backends"]["cpu-compile"]["summary"] is None  # no speed reported as cpu-compile's
    for name in ("cpu", "xla"):
        run = only_run(document, name)
        assert run["status"] == "ok", run.get("error")
        assert run["script"]["evidence"]["ran_on_device"] is True
        fired = {(r["call"], int(r["location"].rsplit(":", 1)[1])) for r in run["script"]["redirects"]}
        assert ("Tensor.cuda() / Module.cuda()", line_of("model = ResNetSmall().cuda()")) in fired
        assert ("Tensor.cuda() / Module.cuda()", line_of("images = images.cuda(")) in fired
        assert ("torch.cuda.amp.GradScaler(...) / torch.amp.GradScaler('cuda', ...)",
                line_of("scaler = torch.cuda.amp.GradScaler")) in fired
        assert ("torch.cuda.manual_seed() / manual_seed_all()", line_of("torch.cuda.manual_seed_all(")) in fired
        # torch.manual_seed calls torch.cuda.manual_seed_all inside torch: not the script's CUDA use.
        assert all(where != line_of("torch.manual_seed(args.seed)") for _, where in fired)
        verdict = document["script"]["verdicts"][name]
        assert verdict["verdict"] == "runs after redirects"
    statuses = {int(item["location"].rsplit(":", 1)[1]): item for item in document["script"]["lines"]}
    model_line = statuses[line_of("model = ResNetSmall().cuda()")]
    assert model_line["status"] == "confirmed at run time" and model_line["rules"]
    # The DDP branch runs only under torchrun (the distributed stage): nccl became gloo there, DDP's device_ids None.
    ddp = document["script_distributed"]
    assert ddp["status"] == "pass", ddp
    assert set(ddp["ranks"]) == {"0", "1"} and all(r["status"] == "ok" for r in ddp["ranks"].values())
    init_line = statuses[line_of('dist.init_process_group("nccl")')]
    assert init_line["status"] == "confirmed at run time"
    assert init_line["backends"] == ["torchrun rank 0", "torchrun rank 1"]
    ddp_line = statuses[line_of("model = DistributedDataParallel(model")]
    assert "DistributedDataParallel(..., device_ids=[N]) of a model not on CUDA" in ddp_line["redirects"]
    # Lines the script never runs here stay static-only (the pynvml logging needs a GPU).
    assert statuses[line_of("if pynvml is not None and torch.cuda.is_available()")]["status"] == \
        "found statically, not executed"


def test_two_optimizer_script(tmp_path, xla_environment):
    completed, document = evaluate_script(tmp_path, SCRIPTS / "gan.py", "cpu,cpu-compile,xla", "--device={device}",
                                          "--compile={compile:01}", options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name in ("cpu", "cpu-compile", "xla"):
        run = only_run(document, name)
        assert run["status"] == "ok"
        assert run["script"]["optimizers"] == ["Adam"]
        # One step is one iteration of both optimizers: the budget counts iterations.
        training = run["training"]
        steps = 1 + training["warmup"]["steps"] + sum(b["steps"] for b in training["sustained"]["blocks"])
        assert run["script"]["steps_seen"] == steps


@pytest.mark.parametrize("case,status,fragment", [
    ("no-step", 2, "no optimizer step was seen"),
    ("short", 2, "after 3 optimizer step(s), before torchport's budget"),
    ("exit", 2, "the script called sys.exit(0) after 6 optimizer step(s)"),
    ("cuda", 1, "--redirect-cuda"),
    ("bogus", 2, "argument parser refused its arguments: edge.py: error: argument --case: invalid choice"),
])
def test_script_edge_cases(case, status, fragment, tmp_path):
    completed, document = evaluate_script(tmp_path, SCRIPTS / "edge.py", "cpu", "--case", case,
                                          options=("--no-trace", "--no-checks"))
    assert completed.returncode == status, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr
    assert fragment in completed.stderr
    run = only_run(document, "cpu")
    assert run["status"] == "error"
    if case == "bogus":  # the script's own argparse message is kept for the user
        assert any("invalid choice" in line for line in run["stderr_tail"])
    if case == "cuda":
        assert run["error"]["kind"] == "unsupported-op"
        assert run["error"]["location"].endswith(f"edge.py:{_line(SCRIPTS / 'edge.py', 'model = model.cuda()')}")
    if case == "exit":  # what was measured before the script left is kept
        assert run["training"]["first_step_s"] > 0


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_script_mode_bad_input(tmp_path):
    for args, fragment in ((["--script", str(tmp_path / "missing.py")], "script file not found"),
                           (["builtin:classifier", "--script", str(SCRIPTS / "gan.py")], "not both"),
                           (["builtin:classifier", "-b", "cpu", "--", "--device=cpu"], "for --script only")):
        completed = run_torchport("evaluate", *args, "-o", str(tmp_path / "out"))
        assert completed.returncode == 2, completed.stderr
        errors = [line for line in completed.stderr.splitlines() if line.startswith("torchport: error:")]
        assert len(errors) == 1 and fragment in errors[0], completed.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    completed = run_torchport("evaluate", "--script", str(bad), "-o", str(tmp_path / "out2"))
    assert completed.returncode == 2 and f"{bad}:1" in completed.stderr
    assert os.path.exists(tmp_path) and not (tmp_path / "out2" / "result.json").exists()


def test_trace_of_a_script_points_at_its_lines(tmp_path):
    script = SCRIPTS / "host_sync.py"
    completed, document = evaluate_script(tmp_path, script, "cpu", options=("--no-checks",))
    assert completed.returncode == 0, completed.stderr[-3000:]
    trace = document["trace"]
    assert trace["status"] == "complete" and trace["steps_traced"] == 3
    syncs = [f for f in trace["findings"] if f["rule"] == "host-sync"]
    assert [f["location"] for f in syncs] == [f"{script}:{_line(script, 'if loss.item() > 1e6')}"]
    # torch.optim's own step-counter reads are not the script's syncs.
    assert all(_line(script, "optimizer.step()") != int(f["location"].rsplit(":", 1)[1]) for f in trace["findings"])


def test_script_that_compiles_itself_stays_compiled_on_an_eager_backend(tmp_path):
    script = SCRIPTS / "agnostic.py"
    completed, document = evaluate_script(tmp_path, script, "cpu", "--device={device}", "--compile=true",
                                          options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert only_run(document, "cpu")["script"]["compiled_by_script"] == [
        f"{script}:{_line(script, 'model = torch.compile(model)')}"]
    assert "On cpu the script called `torch.compile` itself" in (tmp_path / "report.md").read_text()


def test_script_mode_keeps_a_time_budget(tmp_path):
    """``--budget`` reaches the script's runs (adaptive sampling to a deadline,
    the precision reached) and sizes script mode's stages, which run or are
    left out with what they needed."""
    completed, document = evaluate_script(tmp_path, SCRIPTS / "agnostic.py", "cpu",
                                          options=("--budget", "90s", "--precision", "5%"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    budget = document["budget"]
    assert budget["budget_s"] == 90.0 and budget["adaptive"] is True
    cpu = budget["backends"]["cpu"]
    assert cpu["runs"] == 1 and cpu["precision_reached"] is not None
    sustained = only_run(document, "cpu")["training"]["sustained"]
    assert sustained["stopped_by"] in ("precision", "budget", "max_blocks")
    assert len(sustained["blocks"]) <= 2  # never more than the configured blocks: the script's loop holds them
    stages = budget["stages"]
    for stage in ("script-trace", "script-distributed"):
        assert stages[stage]["needs_s"] > 0
        ran = document.get("trace" if stage == "script-trace" else "script_distributed") is not None
        assert ran == stages[stage]["fits"], (stage, stages[stage], budget["could_not"])
