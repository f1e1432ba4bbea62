"""Device-typed APIs seen at run time get findings at the user's line under
scan's rule ids: the recorder in process (every spelling, originals restored,
results unchanged, torch's own calls not the user's), a planted app through
the real tracing worker merged with the real scan of its files, and a
CUDA-written script through script mode's tracing worker."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from conftest import APPS
from torchport.records import AppScan, DeviceApiCall
from torchport.trace.device_apis import DeviceApiRecorder, merge_with_scan

HERE = Path(__file__).resolve()
SCRIPTS = HERE.parent / "scripts"


def _line(path: Path, marker: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if marker in text)


def _here(marker: str) -> str:
    return f"{HERE}:{_line(HERE, marker)}"


def test_every_spelling_is_recorded_at_its_line_and_every_original_restored():
    originals = (torch.amp.autocast_mode.autocast.__init__, torch.amp.GradScaler.__init__, torch.cuda.device_count,
                 vars(torch.cuda.Stream)["__new__"], vars(type(torch.backends.cudnn))["benchmark"],
                 torch.Tensor.pin_memory, DataLoader.__init__)
    recorder = DeviceApiRecorder(is_user_file=lambda name: name == str(HERE))
    benchmark = torch.backends.cudnn.benchmark
    with warnings.catch_warnings(), recorder.recording():
        warnings.simplefilter("ignore")
        with torch.autocast(device_type="cuda", dtype=torch.float16):  # spelling: keyword
            pass
        with torch.amp.autocast("cuda"):  # spelling: positional
            pass
        with torch.cuda.amp.autocast():  # spelling: cuda.amp
            pass
        with torch.autocast("cpu", dtype=torch.bfloat16):  # spelling: cpu is no finding
            pass
        scalers = [torch.amp.GradScaler(), torch.cuda.amp.GradScaler()]  # spelling: scalers
        torch.backends.cudnn.benchmark = True  # spelling: cudnn flag
        torch.backends.cuda.matmul.allow_tf32 = True  # spelling: tf32 flag
        count = torch.cuda.device_count()  # spelling: device count
        DataLoader(TensorDataset(torch.zeros(4)), pin_memory=True)  # spelling: pinned loader
        with pytest.raises(RuntimeError):
            torch.cuda.Stream()  # spelling: stream
        with pytest.raises(RuntimeError):
            torch.cuda.Event(enable_timing=True)  # spelling: event
        torch.cuda.manual_seed_all(0)  # torch asks for the device count itself: not the user's call
        torch.backends.cudnn.benchmark = benchmark  # spelling: restore flag
    found = {(call["id"], call["location"]): call["count"] for call in recorder.calls}
    assert found == {
        ("TP201", _here("# spelling: keyword")): 1, ("TP201", _here("# spelling: positional")): 1,
        ("TP201", _here("# spelling: cuda.amp")): 1, ("TP202", _here("# spelling: scalers")): 2,
        ("TP301", _here("# spelling: cudnn flag")): 1, ("TP302", _here("# spelling: tf32 flag")): 1,
        ("TP004", _here("# spelling: device count")): 1, ("TP402", _here("# spelling: pinned loader")): 1,
        ("TP107", _here("# spelling: stream")): 1, ("TP106", _here("# spelling: event")): 1,
        ("TP301", _here("# spelling: restore flag")): 1,
    }
    assert all(isinstance(scaler, torch.amp.GradScaler) for scaler in scalers) and count == torch.cuda.device_count()
    assert originals == (torch.amp.autocast_mode.autocast.__init__, torch.amp.GradScaler.__init__,
                         torch.cuda.device_count, vars(torch.cuda.Stream)["__new__"],
                         vars(type(torch.backends.cudnn))["benchmark"], torch.Tensor.pin_memory, DataLoader.__init__)
    assert torch.backends.cudnn.benchmark == benchmark


def test_recording_changes_nothing_the_app_computes():
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(8, 8), torch.randn(4, 8)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return layer(x)

    plain = run()
    with DeviceApiRecorder().recording():
        recorded = run()
    assert recorded.dtype == plain.dtype == torch.bfloat16 and torch.equal(recorded, plain)


def test_merge_keeps_one_finding_per_line_and_rule():
    scanned = {"files": ["app.py"], "total": 1, "suppressed": 0, "findings": [
        {"id": "TP201", "title": "CUDA autocast", "location": "/x/app.py:3", "detail": "d", "severity": {}}]}
    calls = [DeviceApiCall(id="TP201", title="CUDA autocast", location="/x/app.py:3", call="torch.autocast(...)",
                           count=2),
             DeviceApiCall(id="TP004", title="CUDA device index management", location="/x/app.py:9",
                           call="torch.cuda.device_count()", count=1)]
    merged = merge_with_scan(AppScan.from_dict(scanned), calls).to_dict()
    assert [(f["id"], f["location"], f["seen_at_run_time"]["count"]) for f in merged["findings"]] == [
        ("TP201", "/x/app.py:3", 2), ("TP004", "/x/app.py:9", 1)]
    assert "not found by the scan" in merged["findings"][1]["detail"]
    assert "seen_at_run_time" not in scanned["findings"][0]  # the scan's own result is left as it was


def test_a_planted_apps_device_apis_are_found_at_run_time_and_merged_with_scan():
    from torchport.trace.analysis import trace_app
    from torchport.trace.report import markdown, terminal_lines
    from torchport.records import TraceSection
    from torchport.trace.stage import attach_scan

    app = APPS / "planted_device_apis.py"
    section = trace_app(str(app), steps=2).to_dict()
    assert section["status"] == "complete", section["reason"]
    planted = {("TP301", "cudnn flag"), ("TP202", "scaler"), ("TP004", "device count"), ("TP201", "autocast"),
               ("TP402", "pinned")}
    expected = {(rule, f"{app}:{_line(app, f'# planted: {marker}')}") for rule, marker in planted}
    assert {(call["id"], call["location"]) for call in section["device_apis"]} == expected
    # Without evaluate's scan, the run-time findings alone keep every non-CUDA target from "runs as is".
    assert all("runs as is" not in section["verdicts"][t]["text"] for t in ("tpu", "xla", "mps"))
    assert "TP201 CUDA autocast at" in "\n".join(terminal_lines(TraceSection.from_dict(section)))
    assert "Device-typed APIs seen at run time" in markdown(TraceSection.from_dict(section))
    typed = TraceSection.from_dict(section)  # evaluate attaches scan to the section's record
    attach_scan(typed, app)
    section = typed.to_dict()
    findings = section["app_scan"]["findings"]
    places = [(f["id"], f["location"]) for f in findings]
    assert len(places) == len(set(places))  # one finding per line and rule
    seen = {(f["id"], f["location"]) for f in findings if f.get("seen_at_run_time")}
    assert seen == expected
    scanned_too = {(f["id"], f["location"]) for f in findings if "not found by the scan" not in f["detail"]}
    assert expected <= scanned_too, "scan finds every planted line statically too"
    assert "seen at run time" in section["verdicts"]["xla"]["text"]


APP_WITH_GUARD = """\
import torch

import ops

model = torch.nn.Linear(2, 2)
if torch.cuda.is_available():
    model = model.cuda()  # guarded: info
x = torch.zeros(2, device="cuda")
"""
OPS_WITH_AN_MPS_KERNEL = """\
from torch.library import Library, impl

lib = Library("appscan_demo", "DEF")
lib.define("twice(Tensor x) -> Tensor")


@impl(lib, "twice", "CUDA")  # fine on mps: the op has an MPS kernel
def twice_cuda(x):
    return x * 2


@impl(lib, "twice", "MPS")
def twice_mps(x):
    return x * 2
"""


def test_the_traces_scan_of_the_app_gives_each_finding_the_severities_scan_reports(tmp_path):
    """A guarded line's cap and a target a finding is fine on reach the
    trace's verdicts as they reach ``torchport scan``'s JSON."""
    import json
    import subprocess
    import sys

    from torchport.trace.stage import app_scan

    (tmp_path / "app.py").write_text(APP_WITH_GUARD)
    (tmp_path / "ops.py").write_text(OPS_WITH_AN_MPS_KERNEL)
    cli = subprocess.run([sys.executable, "-m", "torchport", "scan", str(tmp_path), "--format", "json"],
                         capture_output=True, text=True, check=False)
    reported = {(str(Path(f["path"]).resolve()), f["line"], f["rule"]): f["severity"]
                for f in json.loads(cli.stdout)["findings"]}
    scanned = app_scan(tmp_path / "app.py")
    assert scanned is not None
    in_trace = {}
    for finding in scanned.findings:
        path, line = finding.location.rsplit(":", 1)
        in_trace[(path, int(line), finding.id)] = finding.severity
    assert in_trace == reported
    guarded = in_trace[(str(tmp_path / "app.py"), _line(tmp_path / "app.py", "guarded"), "TP002")]
    assert set(guarded.values()) <= {"info", None}
    registration = in_trace[(str(tmp_path / "ops.py"), _line(tmp_path / "ops.py", "fine on mps"), "TP001")]
    assert registration["mps"] is None and registration["tpu"] == "error"


def test_script_mode_sees_a_cuda_written_scripts_device_apis():
    from torchport.launch import run_worker
    from torchport.trace.analysis import trace_section, validate_targets

    script = SCRIPTS / "amp_train.py"
    run = run_worker("cpu", "torchport.script.job:script_trace_job", config={"steps": 2, "seed": 0},
                     extra={"script": str(script), "script_args": ["--amp", "autocast-kw", "--workers", "0"],
                            "redirect_cuda": False, "cwd": str(Path.cwd())}, timeout=300)
    section = trace_section(run, f"script:{script}", validate_targets(None)).to_dict()
    assert section["status"] == "complete", section["reason"]
    found = {(call["id"], call["location"]) for call in section["device_apis"]}
    lines = {rule: _line(script, marker) for rule, marker in (("TP201", 'torch.autocast(device_type="cuda"'),
                                                              ("TP202", 'torch.amp.GradScaler(device="cuda")'),
                                                              ("TP402", "loader = DataLoader("))}
    assert found == {(rule, f"{script}:{line}") for rule, line in lines.items()}


def test_script_modes_redirects_still_answer_the_users_calls_under_the_recorder():
    from torchport import backends
    from torchport.script import redirect, usercode

    usercode.set_script(str(HERE))
    backend = backends.get("cpu")()
    backend.setup()
    redirects = redirect.Redirects(backend, str(HERE))
    recorder = DeviceApiRecorder(usercode.is_user_file)
    redirects.install()  # in the order script mode's trace uses: the recorder outside the redirects
    try:
        with warnings.catch_warnings(), recorder.recording():
            warnings.simplefilter("ignore")
            count = torch.cuda.device_count()  # redirected: count
            context = torch.autocast("cuda", dtype=torch.float16)  # redirected: autocast
    finally:
        redirects.uninstall()
    assert count == 1 and (context.device, context.fast_dtype) == ("cpu", torch.bfloat16)
    assert set(redirects.counts) == {("torch.cuda.device_count()", _here("# redirected: count")),
                                     (redirect.TABLE_AUTOCAST, _here("# redirected: autocast"))}
    assert {(call["id"], call["location"]) for call in recorder.calls} == {
        ("TP004", _here("# redirected: count")), ("TP201", _here("# redirected: autocast"))}
