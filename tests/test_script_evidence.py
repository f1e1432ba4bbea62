"""Script mode on training scripts shaped like real ones: "runs on X" only with
evidence from X, redirects confined to the user's code, every autocast and
GradScaler spelling, the unscaled loss, configuration differences at their
line, the cross-reference over a package, backends independent of a failed
reference, torchrun on a script without distributed code.  Real CLI, real
workers, real torch.compile, the real xla environment."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from test_script_mode import SCRIPTS, evaluate_script, only_run
from torchport.document import result_record
from torchport.records import DeviceEvidence, XlaEvidence
from torchport.script.bfloat16 import detect, emulation_note
from torchport.script.evidence import judge, unproven_verdicts


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _lineno(location: str) -> int:
    return int(location.rsplit(":", 1)[1])


def test_script_that_ignores_its_device_did_not_run_on_xla(tmp_path, xla_environment):
    completed, document = evaluate_script(tmp_path, SCRIPTS / "ignores_device.py", "cpu,cpu-compile,xla",
                                          "--device={device}", options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    verdicts = document["script"]["verdicts"]
    assert verdicts["cpu"]["verdict"] == "runs by configuration alone"
    assert verdicts["xla"]["text"] == "did not run on xla: the script placed its work on cpu; 0 XLA executions"
    assert verdicts["cpu-compile"]["verdict"] == "did not run on the device"
    assert "0 frames compiled by torch.compile" in verdicts["cpu-compile"]["text"]
    xla = only_run(document, "xla")
    evidence = xla["script"]["evidence"]
    assert evidence["parameter_devices"] == ["cpu"] and evidence["xla"]["executions"] == 0
    # What it measured is kept in the run, but no speed and no parity are reported as xla's.
    assert xla["training"]["sustained"]["blocks"]
    assert document["backends"]["xla"]["summary"] is None and document["backends"]["xla"]["comparison"] is None
    assert "xla" not in document["script"]["parity"].get("backends", {})
    assert "did not run on xla" in completed.stdout  # the terminal says so too
    html = (tmp_path / "report.html").read_text()
    assert "<h2>Script mode</h2>" in html and "did not run on xla" in html


@pytest.mark.parametrize("amp,optimizer", [("autocast-kw", "adamw"), ("autocast-pos", "adam"),
                                           ("amp", "adamw"), ("cuda-amp", "adam")])
def test_every_autocast_and_grad_scaler_spelling_is_redirected(amp, optimizer, tmp_path, xla_environment):
    """Adam/AdamW (their capturable check asks torch.cuda) and a pinned DataLoader with worker processes
    under --redirect-cuda on xla, whose torch is a CUDA build: torch's own questions get the truth."""
    script = SCRIPTS / "amp_train.py"
    completed, document = evaluate_script(tmp_path, script, "cpu,xla", "--amp", amp, "--optimizer", optimizer,
                                          "--workers", "2", redirect=True, options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    autocast_line = _line(script, {"autocast-kw": 'torch.autocast(device_type="cuda"',
                                   "autocast-pos": 'torch.autocast("cuda"', "amp": 'torch.amp.autocast("cuda")',
                                   "cuda-amp": "torch.cuda.amp.autocast()"}[amp])
    scaler_line = _line(script, {"autocast-kw": 'GradScaler(device="cuda")', "autocast-pos": 'GradScaler("cuda")',
                                 "amp": "torch.amp.GradScaler()", "cuda-amp": "torch.cuda.amp.GradScaler()"}[amp])
    for name in ("cpu", "xla"):
        run = only_run(document, name)
        assert run["status"] == "ok", run.get("error")
        assert run["script"]["evidence"]["ran_on_device"] is True
        fired = {(r["call"], _lineno(r["location"])): r for r in run["script"]["redirects"]}
        autocast = fired[("torch.cuda.amp.autocast(...) / torch.autocast('cuda', ...)", autocast_line)]
        # On the CPU the record adds what this CPU's lookup says of bfloat16 (test_script_bfloat16.py's subject).
        note = emulation_note(detect()) if name == "cpu" else None
        assert autocast["becomes"] == f"autocast('{name}', dtype=bfloat16), enabled" + (f"; {note}" if note else "")
        scaler = fired[("torch.cuda.amp.GradScaler(...) / torch.amp.GradScaler('cuda', ...)", scaler_line)]
        assert scaler["becomes"].startswith(f"GradScaler('{name}', enabled=False)")
        [region] = run["script"]["autocast"]
        assert (region["requested_device_type"], region["device_type"], region["dtype"]) == ("cuda", name, "bfloat16")
        assert _lineno(region["location"]) == autocast_line
        # Only the script's own lines: nothing inside torch (Adam, the DataLoader) was counted or redirected.
        assert all(location.startswith(str(SCRIPTS)) for _, location in
                   ((c, r["location"]) for (c, _), r in fired.items()))
    xla_evidence = only_run(document, "xla")["script"]["evidence"]["xla"]
    assert xla_evidence["executions"] > 0 and xla_evidence["compilations"] > 0
    parity = document["script"]["parity"]
    assert parity["backends"]["xla"]["status"] == "pass", parity
    assert f"amp_train.py:{autocast_line}" in (tmp_path / "report.md").read_text()


def test_script_without_cuda_runs_on_xla_with_redirect_cuda(tmp_path, xla_environment):
    """A script that never mentions CUDA, with Adam and a pinned DataLoader with workers: --redirect-cuda
    changes nothing for it (it failed on xla before the redirects were confined to the user's frames)."""
    completed, document = evaluate_script(tmp_path, SCRIPTS / "agnostic.py", "cpu,xla", "--device={device}",
                                          "--workers=2", "--optimizer=adam", redirect=True,
                                          options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name in ("cpu", "xla"):
        run = only_run(document, name)
        assert run["status"] == "ok", run.get("error")
        assert run["script"]["redirects"] == []
        assert document["script"]["verdicts"][name]["verdict"] == "runs by configuration alone"
    assert "XLA compilations" in document["script"]["verdicts"]["xla"]["text"]


def test_loss_is_the_unscaled_one_under_an_enabled_grad_scaler(tmp_path):
    """GradScaler('cpu') is enabled and multiplies the loss by 65536: the loss recorded is the script's own."""
    completed, document = evaluate_script(tmp_path, SCRIPTS / "amp_train.py", "cpu", "--amp", "device",
                                          "--device={device}", "--workers", "0", options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    run = only_run(document, "cpu")
    assert [s["enabled"] for s in run["script"]["grad_scalers"]] == [True]
    losses = [v for b in run["training"]["sustained"]["blocks"] for v in b["losses"]]
    # The regression's mean squared error is tens; scaled by 65536 it would be millions.
    assert losses and max(losses) < 1000, losses


def test_cuda_autocast_without_redirect_is_reported_as_float32(tmp_path):
    """Without --redirect-cuda, torch turns torch.amp.autocast('cuda') off on the CPU: the run is float32,
    and the report says so at the line instead of leaving it silent."""
    script = SCRIPTS / "amp_train.py"
    completed, document = evaluate_script(tmp_path, script, "cpu", "--amp", "amp", "--workers", "0",
                                          options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    [region] = only_run(document, "cpu")["script"]["autocast"]
    assert _lineno(region["location"]) == _line(script, 'torch.amp.autocast("cuda")')
    assert (region["requested_device_type"], region["enabled"], region["dtype"]) == ("cuda", False, "float32")
    assert f"autocast at {region['location']} asked for cuda, ran disabled: float32" in completed.stdout


def test_compile_placeholder_spellings_and_compile_evidence(tmp_path):
    script = SCRIPTS / "configurator.py"
    completed, document = evaluate_script(tmp_path / "py", script, "cpu-compile", "--device={device}",
                                          "--compile={compile:py}", options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    run = only_run(document, "cpu-compile")
    assert run["script"]["argv"][1] == "--compile=True"
    assert run["script"]["evidence"]["dynamo"]["frames_compiled"] > 0
    assert "frame(s) compiled by torch.compile" in document["script"]["verdicts"]["cpu-compile"]["text"]
    # The lowercase spelling is rejected by a Python-literal configurator: the error shows what was passed.
    completed, document = evaluate_script(tmp_path / "lower", script, "cpu", "--compile={compile}",
                                          options=("--no-trace", "--no-checks"))
    assert completed.returncode == 2
    assert "--compile=false" in only_run(document, "cpu")["error"]["message"] or \
        "--compile=false" in completed.stderr


def test_package_script_tied_weights_crossref_and_torchrun(tmp_path, xla_environment):
    """A trainer split over a package with CUDA calls in several modules, tied embedding and output
    weights, and no distributed code, with every stage."""
    root = SCRIPTS / "tiedlm"
    script = root / "train.py"
    completed, document = evaluate_script(tmp_path, script, "cpu,xla", redirect=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name in ("cpu", "xla"):
        assert only_run(document, name)["status"] == "ok"
        assert document["script"]["verdicts"][name]["verdict"] == "runs after redirects"
    # Moving the model to the XLA device untied the weights: a finding at the line that moved it.
    assert only_run(document, "cpu")["script"]["model"]["tied"] == [["embed.weight", "head.weight"]]
    assert only_run(document, "xla")["script"]["model"]["tied"] == []
    untied = [f for f in document["script"]["configuration"] if f["rule"] == "untied-after-move"]
    assert [(f["backend"], f["location"]) for f in untied] == [
        ("xla", f"{script}:{_line(script, 'model = TinyLM(vocab=64, width=32).to(device)')}")]
    # The cross-reference scanned the script's own files and matched each module's CUDA lines.
    scanned = document["script"]["files_scanned"]
    assert {Path(f).name for f in scanned} >= {"train.py", "data.py", "model.py", "utils.py"}
    statuses = {(Path(item["location"].rsplit(":", 1)[0]).name, _lineno(item["location"])): item["status"]
                for item in document["script"]["lines"]}
    data, utils = root / "lmkit" / "data.py", root / "lmkit" / "utils.py"
    for path, text in ((data, "if torch.cuda.is_available()"), (data, "tokens = tokens.pin_memory()"),
                       (utils, "if torch.cuda.is_available()"), (utils, "torch.cuda.manual_seed_all(seed)")):
        assert statuses[(path.name, _line(path, text))] == "confirmed at run time", (path.name, text, statuses)
    assert "coverage.py" in document["script"]["coverage_source"]
    assert all(status != "found statically, not executed" for status in statuses.values())
    ddp = document["script_distributed"]
    assert ddp["status"] == "not applicable" and "created no process group" in ddp["reason"]
    report = (tmp_path / "report.md").read_text()
    assert "untied-after-move" in report and "not applicable" in report
    assert "script under torchrun" in completed.stdout


def test_reference_that_cannot_parse_its_device_does_not_stop_the_others(tmp_path, xla_environment):
    completed, document = evaluate_script(tmp_path, SCRIPTS / "strict_device.py", "cpu,xla", "--device={device}",
                                          options=("--no-trace", "--no-checks", "--reference", "xla"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert document["backends"]["xla"]["status"] == "error"
    assert only_run(document, "cpu")["status"] == "ok"
    assert document["reference"] == "cpu"
    assert "the reference xla did not run the script" in document["reference_note"]
    assert "not run: not run:" not in (tmp_path / "report.md").read_text()


def test_unproven_verdicts_are_found():
    """The suite-wide check (conftest) itself: a 'runs' verdict without device evidence is caught."""
    document = {"backends": {"xla": {"runs": [{"status": "ok", "script": {"evidence": {"ran_on_device": False}}}]},
                             "cpu": {"runs": [{"status": "ok", "script": {"evidence": {"ran_on_device": True}}}]}},
                "script": {"verdicts": {"xla": {"verdict": "runs by configuration alone", "text": "runs"},
                                        "cpu": {"verdict": "runs by configuration alone", "text": "runs"}}}}
    assert [problem.split(":")[0] for problem in unproven_verdicts(result_record(document))] == ["xla"]
    assert judge(DeviceEvidence(backend="xla", device_type="xla", parameter_devices=["xla"],
                                xla=XlaEvidence(compilations=0, executions=0))).ran_on_device is False
    assert judge(DeviceEvidence(backend="cpu", device_type="cpu", parameter_devices=["cpu"])).ran_on_device is True


def test_every_result_the_tests_wrote_so_far_is_proven(tmp_path_factory):
    """Every result.json under this session's temporary folders: no 'runs' without evidence."""
    base = tmp_path_factory.getbasetemp()
    # os.walk, not rglob: the fault tests leave folders too deep to stat, which it skips.
    for path in (Path(folder) / "result.json" for folder, _, files in os.walk(base) if "result.json" in files):
        try:
            document = json.loads(path.read_text())
        except ValueError:
            continue
        assert not unproven_verdicts(result_record(document)), path


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_lines_run_only_in_dataloader_workers_count_as_executed(start_method, tmp_path):
    """The Dataset, collate_fn and worker_init_fn of a package run only in the DataLoader's worker
    processes: the untimed pass's coverage follows them, so their findings read executed, while a
    collate_fn the trainer never uses still reads "not executed"."""
    root = SCRIPTS / "workerfed"
    completed, document = evaluate_script(tmp_path, root / "train.py", "cpu", "--workers=2",
                                          f"--start-method={start_method}", options=("--no-checks",))
    assert completed.returncode == 0, completed.stderr[-3000:]
    coverage = document["script_coverage"]
    assert coverage["processes_measured"] >= 3, coverage["source"]  # the trace process and two workers
    assert "still running" not in coverage["source"]
    statuses = {(Path(item["location"].rsplit(":", 1)[0]).name, _lineno(item["location"])): item["status"]
                for item in document["script"]["lines"]}
    batching, dataset = root / "feeder" / "batching.py", root / "feeder" / "dataset.py"
    executed = [(batching, "if torch.cuda.is_available()"), (dataset, "if torch.cuda.is_available()"),
                (dataset, "torch.cuda.manual_seed_all(seed)")]
    for path, text in executed:
        assert statuses[(path.name, _line(path, text))] == "found statically, executed without a redirect", \
            (path.name, text, statuses)
    # pin_memory() is behind the CUDA check, which is False on this CPU torch: it never ran.
    for path, text in ((batching, "features.pin_memory(), targets.pin_memory()"),
                       (batching, "return features.cuda(non_blocking=True)"), (dataset, "features.pin_memory()")):
        assert statuses[(path.name, _line(path, text))] == "found statically, not executed", (path.name, text)


def test_accelerator_backends_and_a_cuda_script_on_a_cpu_only_torch(tmp_path):
    """What of the accelerator branch runs on a CPU-only torch, for real: a backend whose device this torch
    lacks is "not available" (never "runs"), and a script that asks for cuda itself fails on the cpu
    backend in one line at its own line, naming the argument it was given and the way out."""
    script = SCRIPTS / "strict_device.py"
    completed, document = evaluate_script(tmp_path, script, "cpu,cuda,mps", "--device=cuda",
                                          options=("--no-trace", "--no-checks"))
    assert completed.returncode != 0 and "Traceback" not in completed.stderr
    verdicts = document["script"]["verdicts"]
    assert verdicts["cuda"]["verdict"] == verdicts["mps"]["verdict"] == "not available"
    assert "without CUDA or ROCm support" in verdicts["cuda"]["text"]
    assert verdicts["cpu"]["verdict"] == "does not run"
    error = document["backends"]["cpu"]["error"]
    assert error["location"] == f"{script}:{_line(script, 'nn.Linear(16, 1)).to(args.device)')}"
    assert "Torch not compiled with CUDA enabled" in error["message"] and "--device=cuda" in error["message"]
    assert "--redirect-cuda" in error["message"]
    assert not unproven_verdicts(result_record(document))
    assert "script cuda: not available here" in completed.stdout


def test_accelerator_evidence_is_judged_from_parameters_or_device_memory():
    """The judgement of an accelerator run's record (the records a cuda, rocm or mps worker writes; no device
    is involved, and collect() on a real accelerator has not run in script mode: docs/limits.md)."""
    on_device = judge(DeviceEvidence(backend="cuda", device_type="cuda", parameter_devices=["cuda"]))
    assert (on_device.ran_on_device, on_device.proof, on_device.why) == (True, "its parameters are on cuda", None)
    on_host = judge(DeviceEvidence(backend="rocm", device_type="cuda", parameter_devices=["cpu"],
                                   device_memory_peak_bytes=4096))
    assert (on_host.ran_on_device, on_host.proof, on_host.why) == (
        False, None, "did not run on rocm: the script placed its work on cpu")
    memory_only = judge(DeviceEvidence(backend="mps", device_type="mps", parameter_devices=[],
                                       device_memory_peak_bytes=4096))
    assert (memory_only.ran_on_device, memory_only.proof) == (True, "4096 bytes of mps memory at its peak")
    nothing = judge(DeviceEvidence(backend="mps", device_type="mps", parameter_devices=[], device_memory_peak_bytes=0))
    assert nothing.why == "did not run on mps: no parameter and no memory on mps was seen"


def test_heavy_load_is_one_threshold_for_script_mode_and_check():
    from torchport.check import pipeline
    from torchport.limits import HEAVY_LOAD_PER_CPU
    from torchport.records import HostLoad, RunRecord
    from torchport.script.report import heavy_load

    assert pipeline.HEAVY_LOAD_PER_CPU is HEAVY_LOAD_PER_CPU
    cpus = 2
    busy, idle = HEAVY_LOAD_PER_CPU * cpus + 0.1, HEAVY_LOAD_PER_CPU * cpus - 0.1
    assert heavy_load(RunRecord.from_dict({"script": {"machine_load": {"start": 0.5, "end": busy, "cpus": cpus}}})) == \
        f"1-minute load {busy:.1f} on 2 CPU(s)"
    assert heavy_load(RunRecord.from_dict({"script": {"machine_load": {"start": idle, "end": idle, "cpus": cpus}}})) is None
    assert pipeline.load_uncertainty(HostLoad(before=[busy], after=[0.5], cpus=cpus)) is not None
    assert pipeline.load_uncertainty(HostLoad(before=[idle], after=[idle], cpus=cpus)) is None
