"""`torchport scan` end to end: outputs, exit status, configuration, suppression,
bad input, and the project's own examples and built-in apps scanning clean."""
from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from torchport.cli import main
from torchport.scan.report import REACH_COMMAND, REACH_NOTE

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())

CUDA_SCRIPT = """\
import torch

model = torch.nn.Linear(4, 4).cuda()
torch.cuda.manual_seed(0)
torch.backends.cudnn.benchmark = True
"""


def _scan(capsys, *args) -> tuple[int, str, str]:
    import os
    from unittest import mock

    # These tests read whole lines; text folded to a width is tests/test_output_widths.py's subject.
    with mock.patch.dict(os.environ, {"COLUMNS": "1000"}):
        status = main(["scan", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    return tmp_path


def test_text_output_has_excerpt_consequence_and_summary(project, capsys):
    status, out, _ = _scan(capsys, project)
    assert status == 1
    # At the offending token (the `cuda` of `.cuda()`), not at the receiver.
    assert "train.py:3:31: TP002 [*] `.cuda()` moves a tensor or module to CUDA" in out
    assert " 3 | model = torch.nn.Linear(4, 4).cuda()" in out
    assert "   | " + " " * 30 + "^^^^^^\n" in out
    assert "= error on tpu, xla, trainium, xpu, mps, cpu; fine on rocm" in out
    assert "target     error  silent  perf  info  effort  score" in out
    rocm = next(line for line in out.splitlines() if line.startswith("rocm"))
    assert rocm.split()[-2:] == ["none", "100"]  # ROCm reuses "cuda"; cudnn flag is only info
    # what the levels do not say, and where a script's own evidence comes from, last
    assert out.rstrip().splitlines()[-1] == REACH_NOTE


def test_the_reach_note_recommends_a_command_the_cli_accepts():
    from torchport.cli import build_parser

    assert " ".join(REACH_COMMAND) in REACH_NOTE
    words = list(REACH_COMMAND[1:])
    args = build_parser().parse_args(words[:words.index("--")])
    assert (args.command, str(args.script), args.redirect_cuda) == ("evaluate", "FILE", True)
    assert "cpu" in str(args.backend)


def test_no_reach_note_without_error_or_silent_findings(tmp_path, capsys):
    (tmp_path / "clean.py").write_text("import torch\n\nmodel = torch.nn.Linear(4, 4).to('cpu')\n")
    status, out, _ = _scan(capsys, tmp_path)
    assert status == 0
    assert REACH_NOTE not in out and "target     error" in out


def test_json_output_summary_and_score(project, capsys):
    status, out, _ = _scan(capsys, project, "--format", "json")
    data = json.loads(out)
    assert status == 1
    assert {f["rule"] for f in data["findings"]} == {"TP002", "TP102", "TP301"}
    tpu = data["summary"]["targets"]["tpu"]
    # error + silent, both auto-fixable (0.5 each); the cudnn flag is info (0)
    assert (tpu["error"], tpu["silent"], tpu["info"]) == (1, 1, 1)
    assert tpu["effort"] == "none" and tpu["score"] == round(100 * 20 / 21)


def test_sarif_output_validates_against_the_official_schema(project, capsys):
    (project / "broken.py").write_text("import torch\nx = torch.cuda.synchronize(\n")
    (project / "requirements.txt").write_text("flash-attn>=2\n")
    status, out, _ = _scan(capsys, project, "--format", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    run = log["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert {r["ruleId"] for r in run["results"]} == {"TP002", "TP102", "TP301", "TP601"}
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert "syntax error" in notes[0]["message"]["text"]


def test_sarif_schema_rejects_a_broken_log():
    """The validation above can fail: the shipped schema is strict."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"version": "2.1.0", "runs": [{"results": []}]}, SCHEMA)


@pytest.mark.parametrize("fail_on, status", [("error", 1), ("silent", 1), ("info", 1), ("never", 0)])
def test_fail_on(project, capsys, fail_on, status):
    assert _scan(capsys, project, "--fail-on", fail_on)[0] == status


def test_fail_on_threshold_ignores_lower_severities(tmp_path, capsys):
    (tmp_path / "a.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    assert _scan(capsys, tmp_path, "--fail-on", "silent")[0] == 0
    assert _scan(capsys, tmp_path, "--fail-on", "info")[0] == 1


def test_targets_narrow_the_report(project, capsys):
    status, out, _ = _scan(capsys, project, "--target", "rocm", "--format", "json")
    data = json.loads(out)
    assert {f["rule"] for f in data["findings"]} == {"TP301"}  # info on ROCm
    assert status == 0


def test_select_and_ignore(project, capsys):
    data = json.loads(_scan(capsys, project, "--select", "TP1", "--format", "json")[1])
    assert {f["rule"] for f in data["findings"]} == {"TP102"}
    data = json.loads(_scan(capsys, project, "--ignore", "TP0,TP3", "--format", "json")[1])
    assert {f["rule"] for f in data["findings"]} == {"TP102"}


def test_suppression_comments(tmp_path, capsys):
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "a = torch.ones(1).cuda()  # torchport: ignore[TP002]\n"
        "b = torch.ones(1).cuda()  # torchport: ignore[TP101]\n"
        "torch.cuda.synchronize()  # torchport: ignore\n")
    data = json.loads(_scan(capsys, tmp_path, "--format", "json")[1])
    assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TP002", 3)]
    assert data["summary"]["suppressed"] == 2


def test_pyproject_configuration(project, capsys):
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["torch>=2.10"]\n\n'
        '[tool.torchport.scan]\nignore = ["TP301"]\ntargets = ["mps"]\nexclude = ["vendor"]\n'
        'fail-on = "never"\n')
    (project / "vendor").mkdir()
    (project / "vendor" / "lib.py").write_text(CUDA_SCRIPT)
    status, out, _ = _scan(capsys, project, "--format", "json")
    data = json.loads(out)
    assert status == 0
    assert data["targets"] == ["mps"]
    assert {(f["path"].split("/")[-1], f["rule"]) for f in data["findings"]} == {
        ("train.py", "TP002"), ("train.py", "TP102")}
    assert data["summary"]["min_torch"] == "2.10"
    # An explicit path is scanned even when excluded.
    data = json.loads(_scan(capsys, project / "vendor", "--format", "json")[1])
    assert {f["rule"] for f in data["findings"]} == {"TP002", "TP102"}


def test_nested_torchport_toml_excludes_its_subtree(tmp_path, capsys):
    (tmp_path / "examples" / "gpu").mkdir(parents=True)
    (tmp_path / "examples" / "gpu" / "train.py").write_text(CUDA_SCRIPT)
    (tmp_path / "examples" / "torchport.toml").write_text('[scan]\nexclude = ["gpu"]\n')
    (tmp_path / "app.py").write_text("import torch\n")
    assert json.loads(_scan(capsys, tmp_path, "--format", "json")[1])["findings"] == []
    assert json.loads(_scan(capsys, tmp_path / "examples", "--format", "json")[1])["findings"] == []
    found = json.loads(_scan(capsys, tmp_path / "examples" / "gpu", "--format", "json")[1])
    assert found["findings"]


@pytest.mark.parametrize("config, message", [
    ('[tool.torchport.scan]\ntargets = ["tpu", "gpu"]\n', "unknown target 'gpu'"),
    ('[tool.torchport.scan]\nselct = ["TP1"]\n', "unknown key 'selct'"),
    ('[tool.torchport.scan]\nignore = "TP101"\n', "'ignore' must be a list of strings"),
    ('[tool.torchport.scan]\nmin-torch = 2.9\n', "'min-torch' must be a version string"),
    ('[tool.torchport.scan]\nselect = [\n', "invalid TOML"),
])
def test_invalid_configuration_is_one_clear_line(project, capsys, config, message):
    (project / "pyproject.toml").write_text(config)
    status, out, err = _scan(capsys, project)
    assert status == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchport: error: ")
    assert "pyproject.toml" in lines[0] and message in lines[0]


@pytest.mark.parametrize("config, message", [
    ('[tool.torchport.scan]\nselect = ["TP1"]\nfail-on = = 1\n', "pyproject.toml:3: invalid TOML"),
    ('[tool]\ntorchport = 3\n', "pyproject.toml:tool.torchport: [tool.torchport] must be a table"),
])
def test_scan_reads_its_config_file_as_the_other_commands_do(project, capsys, config, message):
    """One loader for [tool.torchport] and torchport.toml: a bad file is reported
    with the same location (its line, its key) by scan as by evaluate."""
    (project / "pyproject.toml").write_text(config)
    status, _, err = _scan(capsys, project)
    assert status == 2 and message in err.strip()


@pytest.mark.parametrize("args, message", [
    (["--target", "gpu"], "--target: unknown target 'gpu'"),
    (["--select", "XX9"], "--select: no rule matches 'XX9'"),
    (["--min-torch", "two"], "--min-torch: expected a version"),
])
def test_invalid_flags_are_one_clear_line(project, capsys, args, message):
    status, _, err = _scan(capsys, project, *args)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_missing_path_is_an_error(tmp_path, capsys):
    status, _, err = _scan(capsys, tmp_path / "nope")
    assert status == 2 and "no such file or folder" in err


def test_bad_input_is_skipped_with_a_reason(tmp_path, capsys):
    (tmp_path / "good.py").write_text(CUDA_SCRIPT)
    (tmp_path / "syntax.py").write_text("import torch\ndef broken(:\n    torch.cuda.synchronize()\n")
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\nimport torch\ntorch.cuda.synchronize()\n")
    (tmp_path / "binary.py").write_bytes(b"\x00\x01cuda\x02" * 100)
    (tmp_path / "huge.py").write_text("x = 'cuda'\n" * 500_000)  # about 5.5 MB
    (tmp_path / "loop").symlink_to(tmp_path)
    (tmp_path / "self.py").symlink_to(tmp_path / "self.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "deep.py").write_text("import torch\nx = " + "(" * 300 + "torch.cuda" + ")" * 300 + "\n")
    status, out, err = _scan(capsys, tmp_path, "--format", "json")
    assert err == ""
    data = json.loads(out)
    reasons = {Path(s["path"]).name: s["reason"] for s in data["skipped"]}
    assert reasons["syntax.py"].startswith("syntax error at line 2")
    assert reasons["latin1.py"].startswith("not UTF-8 text (byte 0xe9")
    assert reasons["binary.py"] == "binary file"
    assert reasons["huge.py"].startswith("larger than 4194304 bytes")
    assert reasons["loop"].startswith("symlink loop")
    assert reasons["self.py"] == "symlink loop"
    assert reasons["dangling.py"] == "broken symlink"
    assert reasons["pipe.py"] == "not a regular file"
    assert "deep.py" in reasons  # too deeply nested for the parser: skipped, not a crash
    # ... and the rest of the scan completed.
    assert {f["rule"] for f in data["findings"]} == {"TP002", "TP102", "TP301"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file_is_skipped(tmp_path, capsys):
    secret = tmp_path / "secret.py"
    secret.write_text(CUDA_SCRIPT)
    secret.chmod(0)
    data = json.loads(_scan(capsys, tmp_path, "--format", "json")[1])
    assert data["skipped"] == [{"path": str(secret.relative_to(Path.cwd())) if secret.is_relative_to(Path.cwd())
                                else str(secret), "reason": "permission denied"}]


def test_other_sources_are_read(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["xformers>=0.0.28", "numpy"]\n')
    (tmp_path / "setup.py").write_text('from setuptools import setup\nsetup(name="x", install_requires=["apex"])\n')
    (tmp_path / "launch.sh").write_text("#!/bin/sh\nexport CUDA_VISIBLE_DEVICES=0\nnvidia-smi\n")
    (tmp_path / "kernel.cuh").write_text("#pragma once\n")
    (tmp_path / "requirements-gpu.txt").write_text("torch==2.9.0+cu128\n--extra-index-url https://download.pytorch.org/whl/cu128\n")
    data = json.loads(_scan(capsys, tmp_path, "--format", "json")[1])
    found = sorted((f["path"].split("/")[-1], f["line"], f["rule"]) for f in data["findings"])
    assert found == [("kernel.cuh", 1, "TP502"), ("launch.sh", 2, "TP404"), ("launch.sh", 3, "TP109"),
                     ("pyproject.toml", 3, "TP601"), ("requirements-gpu.txt", 1, "TP601"),
                     ("requirements-gpu.txt", 2, "TP601"), ("setup.py", 2, "TP601")]


def test_parallel_and_serial_scans_agree(tmp_path, capsys):
    for i in range(250):
        (tmp_path / f"m{i}.py").write_text(CUDA_SCRIPT if i % 3 == 0 else "import torch\nx = 1\n")
    serial = json.loads(_scan(capsys, tmp_path, "--format", "json", "--jobs", "1")[1])
    parallel = json.loads(_scan(capsys, tmp_path, "--format", "json", "--jobs", "2")[1])
    assert serial["findings"] == parallel["findings"] and len(serial["findings"]) == 84 * 3


def test_project_examples_and_builtin_apps_scan_clean(capsys):
    status, out, _ = _scan(capsys, REPO / "examples", REPO / "src" / "torchport" / "builtin",
                           "--format", "json", "--fail-on", "info")
    data = json.loads(out)
    assert data["findings"] == [] and data["skipped"] == []
    assert data["summary"]["files_scanned"] >= 4
    assert status == 0


def test_text_output_counts_info_findings_and_lists_them_on_request(tmp_path, capsys):
    (tmp_path / "bench.py").write_text(
        "import torch\n\n\ndef step(model, batch):\n    out = model(batch.cuda())\n"
        "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
        "    torch.backends.cudnn.benchmark = True\n    return out\n")
    _, default, _ = _scan(capsys, tmp_path)
    _, everything, _ = _scan(capsys, tmp_path, "--show-info")
    _, errors_only, _ = _scan(capsys, tmp_path, "--min-severity", "error")
    _, as_json, _ = _scan(capsys, tmp_path, "--format", "json")
    findings = json.loads(as_json)["findings"]
    worst = {f["rule"]: set(f["severity"].values()) for f in findings}
    assert worst["TP101"] - {None} == {"info"} and "error" in worst["TP002"]
    assert ":7:9: TP101" not in default and "info finding(s) not listed (--show-info" in default
    assert ":7:9: TP101" in everything and "not listed" not in everything
    assert ":5:" in errors_only and ":7:9: TP101" not in errors_only and "below error" in errors_only
    # the summary table counts every finding whatever is listed
    table = [line for line in default.splitlines() if line.startswith("cpu ")]
    assert table == [line for line in everything.splitlines() if line.startswith("cpu ")]


def test_min_severity_and_show_info_exclude_each_other(tmp_path, capsys):
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["scan", str(tmp_path), "--show-info", "--min-severity", "error"])
    assert exit_info.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_scan_starts_without_importing_the_other_commands(project, tmp_path):
    """The CLI's fixed cost is paid on every scan: `torchport scan -o FILE` registers only its own
    command module, and writing the report does not import the result documents."""
    import subprocess
    import sys

    probe = ("import sys; from torchport.cli import main; "
             f"status = main(['scan', {str(project)!r}, '-o', {str(tmp_path / 'out.txt')!r}, '-q', '--fail-on', 'never']); "
             "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['torchport', 'check'], "
             "['torchport', 'records'], ['torchport', 'commands']))); sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, check=True)
    assert done.stdout.strip() == "['torchport.commands', 'torchport.commands.scan']"
    assert "train.py" in (tmp_path / "out.txt").read_text()
