"""`torchport fix`: expected output, idempotence, untouched formatting, still parses;
git safety; and the CUDA-written example really runs on the CPU once fixed."""
from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchport.cli import main
from torchport.scan.config import ScanConfig
from torchport.scan.fixer import fix_text, helper_lines

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "cuda_training"
DEVICE = 'ACCELERATOR_DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'
HELPER = "\n".join(helper_lines("torch"))

CASES = {
    "dot-cuda and literals keep comments and odd spacing": (
        'import torch  # the framework\n\n'
        'x = torch.ones( 2 ).cuda( )   # move it\n'
        'y = x.cuda(non_blocking = True)\n'
        'z = x.cuda(rank)\n'
        'w = torch.zeros(3, device = "cuda")  # keep me\n'
        'v = x.to("cuda:1")\n',
        'import torch  # the framework\n\n'
        f'{DEVICE}\n\n\n{HELPER}\n\n\n'
        'x = torch.ones( 2 ).to( ACCELERATOR_DEVICE)   # move it\n'
        'y = x.to(ACCELERATOR_DEVICE, non_blocking = True)\n'
        'z = x.to(accelerator_device(rank))\n'
        'w = torch.zeros(3, device = ACCELERATOR_DEVICE)  # keep me\n'
        'v = x.to(accelerator_device(1))\n'),
    "device selection idioms and string contexts": (
        '"""Module docstring."""\nimport argparse\nimport torch\n\n'
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        'name = "cuda" if torch.cuda.is_available() else "cpu"\n'
        'parser = argparse.ArgumentParser()\n'
        'parser.add_argument("--device", default="cuda")\n\n\n'
        'def run(model, device="cuda"):\n'
        '    return model.to(device)\n',
        '"""Module docstring."""\nimport argparse\nimport torch\n\n'
        f'{DEVICE}\n\n'
        'device = ACCELERATOR_DEVICE\n'
        'name = ACCELERATOR_DEVICE.type\n'
        'parser = argparse.ArgumentParser()\n'
        'parser.add_argument("--device", default=ACCELERATOR_DEVICE.type)\n\n\n'
        'def run(model, device=ACCELERATOR_DEVICE.type):\n'
        '    return model.to(device)\n'),
    "torch.cuda calls become torch.accelerator, guards follow": (
        'import torch as th\n'
        'from torch.cuda import synchronize as sync\n\n'
        'th.cuda.manual_seed_all(0)\n'
        'if th.cuda.is_available():\n'
        '    sync()\n'
        '    print(th.cuda.memory_allocated(), th.cuda.mem_get_info())\n'
        'th.cuda.set_device(1)\n'
        'with th.cuda.device(0):  # guarded\n'
        '    th.cuda.empty_cache()\n',
        'import torch as th\n'
        'from torch.cuda import synchronize as sync\n\n'
        'th.manual_seed(0)\n'
        'if th.accelerator.is_available():\n'
        '    th.accelerator.synchronize()\n'
        '    print(th.accelerator.memory_allocated(), th.accelerator.get_memory_info())\n'
        'if th.accelerator.is_available():\n'
        '    th.accelerator.set_device_index(1)\n'
        'with th.accelerator.device_index(0 if th.accelerator.is_available() else None):  # guarded\n'
        '    if th.accelerator.is_available():\n'
        '        th.accelerator.empty_cache()\n'),
    "amp: dtype made explicit, positional arguments named": (
        'import torch\nfrom torch.cuda.amp import autocast\n\n'
        'scaler = torch.cuda.amp.GradScaler(2.0 ** 16)\n'
        'plain = torch.amp.GradScaler()\n'
        'with torch.cuda.amp.autocast(True, torch.bfloat16):\n'
        '    pass\n'
        'with autocast(\n'
        '    enabled=False,  # a comment inside the call\n'
        '):\n'
        '    pass\n'
        'with torch.autocast(device_type="cuda"):\n'
        '    pass\n',
        'import torch\nfrom torch.cuda.amp import autocast\n\n'
        f'{DEVICE}\n\n'
        'scaler = torch.amp.GradScaler(ACCELERATOR_DEVICE.type, 2.0 ** 16)\n'
        'plain = torch.amp.GradScaler(ACCELERATOR_DEVICE.type)\n'
        'with torch.amp.autocast(ACCELERATOR_DEVICE.type, enabled=True, dtype=torch.bfloat16):\n'
        '    pass\n'
        'with torch.amp.autocast(\n'
        '    ACCELERATOR_DEVICE.type, enabled=False, dtype=torch.float16,  # a comment inside the call\n'
        '):\n'
        '    pass\n'
        'with torch.autocast(device_type=ACCELERATOR_DEVICE.type, dtype=torch.float16):\n'
        '    pass\n'),
    "nccl without torch imported adds the import; CRLF kept": (
        '#!/usr/bin/env python\r\nimport torch.distributed as dist\r\n\r\n'
        'dist.init_process_group("nccl")\r\n',
        '#!/usr/bin/env python\r\nimport torch.distributed as dist\r\nimport torch\r\n\r\n'
        f'{DEVICE}\r\n\r\n'
        'dist.init_process_group(torch.distributed.get_default_backend_for_device(ACCELERATOR_DEVICE))\r\n'),
    "non-ASCII text before the rewrite": (
        'import torch\n\nlabel = "température"; y = torch.ones(1).cuda()  # ünïcode\n',
        f'import torch\n\n{DEVICE}\n\n'
        'label = "température"; y = torch.ones(1).to(ACCELERATOR_DEVICE)  # ünïcode\n'),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_round_trip(name):
    source, expected = CASES[name]
    fixed, applied, _ = fix_text(source, "a.py", ScanConfig(), "2.13")
    assert fixed == expected
    assert applied
    ast.parse(fixed)
    again, applied_again, _ = fix_text(fixed, "a.py", ScanConfig(), "2.13")
    assert again == fixed and not applied_again


def test_unfixable_findings_stay_reported():
    source = ("import torch\nname = torch.cuda.get_device_name(0)\n"
              "torch.backends.cudnn.benchmark = True\nx = torch.ones(2).cuda()\n")
    fixed, applied, remaining = fix_text(source, "a.py", ScanConfig(), "2.13")
    assert [f.rule_id for f in applied] == ["TP002"]
    assert [f.rule_id for f in remaining] == ["TP005", "TP301"]
    assert "torch.cuda.get_device_name(0)" in fixed


def test_min_torch_is_respected():
    source = "import torch\nused = torch.cuda.memory_allocated()\nx = torch.ones(1).cuda()\n"
    fixed, applied, remaining = fix_text(source, "a.py", ScanConfig(), "2.6")
    assert "torch.cuda.memory_allocated()" in fixed  # needs 2.9
    assert [f.rule_id for f in applied] == ["TP002"]
    assert remaining[0].rule_id == "TP104" and "2.9" in remaining[0].fix_note
    # torch 2.6 has no check_available= yet
    assert "torch.accelerator.current_accelerator() if torch.accelerator.is_available()" in fixed


def test_fix_prints_a_diff_and_writes_nothing_without_write(tmp_path, capsys):
    path = tmp_path / "t.py"
    path.write_text("import torch\ntorch.cuda.synchronize()\n")
    assert main(["fix", str(path), "--min-torch", "2.6"]) == 0
    out = capsys.readouterr().out
    assert "-torch.cuda.synchronize()" in out and "+    torch.accelerator.synchronize()" in out
    assert path.read_text() == "import torch\ntorch.cuda.synchronize()\n"


def _git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def test_write_refuses_uncommitted_files_unless_forced(tmp_path, capsys):
    _git(tmp_path, "init", "-q")
    path = tmp_path / "t.py"
    path.write_text("import torch\ntorch.cuda.synchronize()\n")
    # untracked: refused
    assert main(["fix", str(path), "--write"]) == 2
    assert "uncommitted" in capsys.readouterr().err
    _git(tmp_path, "add", "t.py")
    _git(tmp_path, "commit", "-q", "-m", "add")
    path.write_text("import torch\ntorch.cuda.synchronize()\n# edited\n")
    assert main(["fix", str(path), "--write"]) == 2  # modified: refused
    assert path.read_text().startswith("import torch\ntorch.cuda.synchronize()")
    _git(tmp_path, "commit", "-q", "-am", "edit")
    assert main(["fix", str(path), "--write"]) == 0  # committed: written
    assert path.read_text() == "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n# edited\n"
    path.write_text("import torch\ntorch.cuda.synchronize()\n")
    assert main(["fix", str(path), "--write", "--force"]) == 0
    assert "torch.accelerator.synchronize()" in path.read_text()


EXPECTED_EXAMPLE_FINDINGS = {
    "TP601", "TP401", "TP004", "TP102", "TP301", "TP003", "TP005", "TP402", "TP002",
    "TP202", "TP201", "TP101", "TP104",
}
LEFT_AFTER_FIX = {"TP601", "TP301", "TP003", "TP005", "TP402"}


def _scan_json(path, capsys) -> dict:
    main(["scan", str(path), "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_cuda_example_is_found_fixed_and_runs_on_cpu(tmp_path, capsys):
    work = tmp_path / "cuda_training"
    shutil.copytree(EXAMPLE, work)
    before = _scan_json(work, capsys)
    assert {f["rule"] for f in before["findings"]} == EXPECTED_EXAMPLE_FINDINGS
    assert before["summary"]["min_torch"] == "2.9"  # from its requirements.txt

    assert main(["fix", str(work), "--write", "--force"]) == 0
    capsys.readouterr()
    after = _scan_json(work, capsys)
    assert {f["rule"] for f in after["findings"]} == LEFT_AFTER_FIX
    assert not any(f["fixable"] for f in after["findings"])
    fixed = (work / "train.py").read_text()
    assert main(["fix", str(work)]) == 0  # a second run proposes nothing
    assert capsys.readouterr().out == ""

    # One interpreter (one torch import) runs the original, which must fail on a
    # CPU-only machine, then the fixed copy, which must train.
    driver = (
        "import runpy, sys, torch\n"
        "sys.argv = ['train.py', '--epochs', '1', '--steps-per-epoch', '2', '--batch-size', '4',"
        " '--workers', '0', '--log-interval', '1']\n"
        "print('cuda available:', torch.cuda.is_available())\n"
        "try:\n"
        f"    runpy.run_path({str(EXAMPLE / 'train.py')!r}, run_name='__main__')\n"
        "except Exception as exc:\n"
        "    print('original failed:', exc)\n"
        "runpy.run_path('train.py', run_name='__main__')\n")
    run = subprocess.run([sys.executable, "-c", driver], cwd=work, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    if "cuda available: False" in run.stdout:
        assert "original failed: Torch not compiled with CUDA enabled" in run.stdout
    fixed_output = run.stdout.split("original failed:")[-1]
    assert "epoch 0 step    0 loss" in fixed_output and "epoch 0 done" in fixed_output
    assert (work / "train.py").read_text() == fixed


def test_fix_lists_what_needs_a_person_and_counts_info_findings(tmp_path, capsys):
    path = tmp_path / "t.py"
    path.write_text("import torch\n\nname = torch.cuda.get_device_name(0)\n"
                    "if torch.cuda.is_available():\n    torch.backends.cudnn.benchmark = True\n")
    assert main(["fix", str(path)]) == 0
    err = capsys.readouterr().err
    assert "1 info finding(s) left as they are" in err
    # the device-name query and the check (whose body is not fixable) need a person
    assert "2 finding(s) need a manual change:" in err and ":3:8: TP005" in err and ":4:4: TP003" in err
    assert "TP301" not in err  # inside the CUDA check: info, counted above
