"""The fix corpus (tests/fix_corpus/): each CUDA-written script really runs before and
after ``torchport fix --write`` on this CPU-only host, in a subprocess.

A script that ran before the fix runs after it and prints the same; a script that
needed CUDA fails before the fix for that reason and runs once fixed; a rescan of
the fixed script finds nothing at error or silent level on any target.  Where a CUDA
build of torch has a GPU, the fixed script also prints what the original printed there.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fix_corpus"
SCRIPTS = sorted(p.name for p in CORPUS.glob("*.py"))
# The corpus uses the memory statistics, whose torch.accelerator versions need 2.10.
MIN_TORCH = "2.10"
_RUNS_BEFORE = re.compile(r"Runs on the CPU before the fix: (yes|no)")


def _env(cpu_only: bool = True) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    if cpu_only:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.pop("TORCHPORT_DEBUG", None)
    return env


def _run(script: Path, cpu_only: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True,
                          text=True, timeout=300, env=_env(cpu_only))


@functools.cache
def _cuda_present() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=120)
    return probe.stdout.strip() == "True"


def _torchport(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchport", *args], capture_output=True, text=True,
                          timeout=300, env=_env())


def test_the_corpus_has_scripts_of_both_kinds():
    kinds = {_RUNS_BEFORE.search((CORPUS / name).read_text()).group(1) for name in SCRIPTS}
    assert kinds == {"yes", "no"} and len(SCRIPTS) >= 6


@pytest.mark.parametrize("name", SCRIPTS)
def test_fixed_script_runs_on_cpu(name, tmp_path):
    script = tmp_path / name
    shutil.copy(CORPUS / name, script)
    runs_before = _RUNS_BEFORE.search(script.read_text()).group(1) == "yes"
    before = _run(script)
    assert (before.returncode == 0) == runs_before, before.stderr[-2000:]
    if not runs_before:
        assert re.search(r"CUDA|NCCL", before.stderr), before.stderr[-2000:]

    fixed = _torchport("fix", str(script), "--write", "--force", "--min-torch", MIN_TORCH)
    assert fixed.returncode == 0, fixed.stderr
    assert script.read_text() != (CORPUS / name).read_text()

    after = _run(script)
    assert after.returncode == 0, after.stderr[-2000:]
    if runs_before:
        assert after.stdout == before.stdout

    rescan = _torchport("scan", str(script), "--format", "json", "--min-torch", MIN_TORCH)
    findings = json.loads(rescan.stdout)["findings"]
    left = [(f["rule"], f["line"], f["detail"]) for f in findings
            if {"error", "silent"} & set(f["severity"].values())]
    assert not left
    assert rescan.returncode == 0


@pytest.mark.parametrize("name", SCRIPTS)
def test_fixed_script_behaves_the_same_where_cuda_exists(name, tmp_path):
    if not _cuda_present():
        pytest.skip("needs a CUDA build of torch and a GPU (the CPU test above runs everywhere)")
    script = tmp_path / name
    shutil.copy(CORPUS / name, script)
    before = _run(script, cpu_only=False)
    assert before.returncode == 0, before.stderr[-2000:]
    fixed = _torchport("fix", str(script), "--write", "--force", "--min-torch", MIN_TORCH)
    assert fixed.returncode == 0, fixed.stderr
    after = _run(script, cpu_only=False)
    assert after.returncode == 0, after.stderr[-2000:]
    assert after.stdout == before.stdout
