"""Backend environments: finding, refusing and reporting them.  Everything here
runs without the real xla environment, in a private TORCHPORT_CACHE."""
from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import QUICK, load_result
from torchport import envs
from torchport.errors import UserError


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TORCHPORT_CACHE", str(folder))
    return folder


def write_manifest(folder: Path, requirements=envs.SPECS["xla"].requirements) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / envs.MANIFEST).write_text(json.dumps({"name": "xla", "requirements": list(requirements),
                                                    "installed": {"torch": "2.9.0", "torch_xla": "2.9.0"}}))


def make_broken_xla_env(cache: Path) -> Path:
    """A real environment whose interpreter starts and imports this torch, but
    has no torch_xla: what a half-finished or damaged install looks like."""
    folder = cache / "envs" / "xla"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next(folder.glob("lib/python*/site-packages"))
    (site / "borrowed-torch.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    write_manifest(folder)
    return folder


def test_missing_environment_names_the_command_that_creates_it(cache):
    record = envs.status("xla")
    assert not record["ready"]
    assert "does not exist" in record["problem"]
    with pytest.raises(envs.EnvironmentMissing) as raised:
        envs.python_for("xla")
    assert raised.value.message.endswith("run: torchport env create xla")
    assert raised.value.kind == "environment"


def test_incomplete_or_outdated_environment_is_not_used(cache):
    folder = cache / "envs" / "xla"
    (folder / "bin").mkdir(parents=True)
    assert "incomplete" in envs.status("xla")["problem"]
    write_manifest(folder, requirements=("torch==2.8.0", "torch_xla==2.8.0"))
    (folder / "bin" / "python").symlink_to(sys.executable)
    problem = envs.status("xla")["problem"]
    assert "was made for torch==2.8.0 torch_xla==2.8.0" in problem and "torch==2.9.0" in problem
    write_manifest(folder)
    assert envs.status("xla")["ready"]
    assert envs.python_for("xla") == folder / "bin" / "python"


def test_unknown_environment_is_a_user_error(cache, torchport_cli):
    with pytest.raises(UserError, match="unknown environment 'nope'"):
        envs.status("nope")
    done = torchport_cli("env", "create", "nope", env={"TORCHPORT_CACHE": str(cache)})
    assert done.returncode == 2
    assert done.stderr.strip() == "torchport: error: unknown environment 'nope' (known: xla, tpu)"


def test_env_list_and_backends_say_how_to_create_it(cache, torchport_cli):
    listed = torchport_cli("env", "list", env={"TORCHPORT_CACHE": str(cache)})
    assert listed.returncode == 0
    words = " ".join(listed.stdout.split())  # a long line folds at the width (COLUMNS)
    assert "xla: not usable: the xla environment does not exist" in words
    assert "run: torchport env create xla" in words
    rows = json.loads(torchport_cli("backends", "--json", env={"TORCHPORT_CACHE": str(cache)}).stdout)
    xla = next(row for row in rows if row["name"] == "xla")
    assert not xla["available"]
    assert xla["reason"].endswith("run: torchport env create xla")
    assert xla["environment"] == "xla"


def test_failed_creation_leaves_no_usable_environment(cache, monkeypatch):
    spec = envs.EnvSpec("broken", "test", requirements=(str(cache / "no-such-project"),), recorded=())
    monkeypatch.setitem(envs.SPECS, "broken", spec)
    lines: list[str] = []
    with pytest.raises(UserError, match=r"pip install .*no-such-project failed \(exit status 1\)"):
        envs.create("broken", lines.append)
    assert any("creating a virtual environment" in line for line in lines)
    record = envs.status("broken")
    assert not record["ready"] and "incomplete" in record["problem"]
    assert envs.remove("broken") and not envs.remove("broken")


def test_missing_environment_leaves_other_backends_measured(cache, torchport_cli, tmp_path):
    out = tmp_path / "out"
    done = torchport_cli("evaluate", "builtin:classifier", "-b", "cpu,xla", *QUICK, "-o", str(out),
                         env={"TORCHPORT_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    document = load_result(out)
    assert document["backends"]["cpu"]["status"] == "ok"
    xla = document["backends"]["xla"]
    assert xla["status"] == "unavailable"
    assert xla["reason"].endswith("run: torchport env create xla")
    assert "xla \\[proxy for TPU" in (out / "report.md").read_text()  # brackets escaped: report text is literal


def test_broken_environment_is_that_backends_error(cache, torchport_cli, tmp_path):
    make_broken_xla_env(cache)
    out = tmp_path / "out"
    done = torchport_cli("evaluate", "builtin:classifier", "-b", "cpu,xla", *QUICK, "-o", str(out),
                         env={"TORCHPORT_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    document = load_result(out)
    assert document["backends"]["cpu"]["status"] == "ok"
    xla = document["backends"]["xla"]
    assert xla["status"] == "error"
    assert xla["error"]["kind"] == "environment"
    assert xla["error"]["message"].startswith("torch_xla failed to import in ")
    assert "No module named 'torch_xla'" in xla["error"]["message"]
    assert xla["error"]["message"].endswith("recreate it: torchport env create xla --force")
    report = (out / "report.md").read_text()
    assert "| xla | environment |" in report and "torch\\_xla failed to import" in report  # markdown-escaped


def test_an_installed_copy_gives_workers_a_root_with_only_torchport(tmp_path):
    """Installed in site-packages, the folder above torchport holds torch too; put on an xla worker's
    PYTHONPATH it would shadow that environment's torch.  Workers get a folder holding only a link."""
    import shutil

    site = tmp_path / "site-packages"
    shutil.copytree(Path(envs.__file__).parent, site / "torchport", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "torch").mkdir()  # what a real site-packages holds beside it
    probe = "from torchport import envs; print(envs.import_root())"
    cache = tmp_path / "cache"
    roots = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120,
                            cwd=tmp_path, env={"PYTHONPATH": str(site), "TORCHPORT_CACHE": str(cache),
                                               "PATH": "/usr/bin:/bin"}).stdout.strip() for _ in range(2)]
    assert roots[0] == roots[1] and Path(roots[0]).is_relative_to(cache), roots  # made once, then reused
    root = Path(roots[0])
    assert [entry.name for entry in root.iterdir()] == ["torchport"]
    assert (root / "torchport").resolve() == (site / "torchport").resolve()
    checkout = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120,
                              env={"PYTHONPATH": str(Path(envs.__file__).parents[1]), "PATH": "/usr/bin:/bin"})
    assert checkout.stdout.strip() == str(Path(envs.__file__).resolve().parents[1])  # a checkout's src/ as it is
