"""The pre-commit hook definition and the GitHub Actions example run as they are
written: their torchport commands, on a small repository with one CUDA lock-in
line and one clean file."""
from __future__ import annotations

import json
import shlex

import pytest

from conftest import ROOT, run_torchport

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the hf extra) reads the hook and workflow files")

LOCKED = 'import torch\nmodel = torch.nn.Linear(2, 2).to("cuda")\n'
CLEAN = "import torch\nmodel = torch.nn.Linear(2, 2)\n"


@pytest.fixture
def repository(tmp_path):
    (tmp_path / "train.py").write_text(LOCKED)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_pre_commit_hook_fails_on_lock_in_and_passes_clean_files(repository):
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "torchport-scan" and hook["language"] == "python"
    entry = shlex.split(hook["entry"])
    assert entry[0] == "torchport"
    # pre-commit appends the changed files to the entry.
    locked = run_torchport(*entry[1:], "train.py", cwd=repository)
    assert locked.returncode == 1 and "TP001" in locked.stdout, locked.stdout + locked.stderr
    clean = run_torchport(*entry[1:], "clean.py", cwd=repository)
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_github_actions_example_writes_sarif_and_gates(repository):
    workflow = yaml.safe_load((ROOT / "docs" / "examples" / "github-actions-scan.yml").read_text())
    steps = workflow["jobs"]["scan"]["steps"]
    commands = [step["run"] for step in steps if str(step.get("run", "")).startswith("torchport ")]
    assert len(commands) == 2
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("github/codeql-action/upload-sarif"))
    statuses = []
    for command in commands:
        completed = run_torchport(*shlex.split(command)[1:], cwd=repository)
        statuses.append(completed.returncode)
    sarif = json.loads((repository / upload["with"]["sarif_file"]).read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]
    assert statuses == [0, 1]  # the SARIF step reports; the gate fails the job on the error-level finding
