"""The CLI conventions, through the real CLI (``python -m torchport`` in a
subprocess): ``torchport info``; one output convention (``--format``, ``-o FILE``,
``--out-dir DIR``) with the old spellings kept; ``-q``/``-v``; progress lines when
stderr is not a terminal; defaults from ``[tool.torchport]`` / ``torchport.toml``;
no warnings on install or on first use of torch."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import APPS, ROOT, run_torchport

QUICK = ["--steps", "4", "--blocks", "2", "--max-warmup", "4", "--no-inference", "--no-trace", "--no-checks"]


def torchport(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300,
              python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *python_flags, "-m", "torchport", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "COLUMNS": "160", **(env or {})})


def one_error_line(completed: subprocess.CompletedProcess, status: int = 2) -> str:
    assert completed.returncode == status, (completed.returncode, completed.stderr)
    assert "Traceback" not in completed.stderr, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("torchport: error: "), completed.stderr
    return lines[0]


# --- torchport info ----------------------------------------------------------------------------


def test_info_prints_versions_hardware_backends_and_environments():
    from importlib import metadata

    from torchport import __version__, envs

    completed = torchport("info")
    assert completed.returncode == 0, completed.stderr
    text = completed.stdout
    backends = json.loads(torchport("backends", "--json").stdout)
    assert f"torchport     {__version__}" in text
    assert f"python        {sys.version.split()[0]}" in text
    assert metadata.version("torch") in text
    for heading in ("os ", "cpu ", "memory ", "accelerators ", "driver ", "packages ", "config "):
        assert f"\n{heading}" in text, heading
    # One line per backend; a long reason folds onto indented lines below it (the width is COLUMNS).
    listed = [line for line in text.split("\nbackends\n")[1].split("\nenvironments\n")[0].splitlines()
              if not line.startswith("    ")]
    assert len(listed) == len(backends)
    for row in backends:  # every backend, with its availability as `backends` reports it
        line = next(line for line in listed if line.split()[:1] == [row["name"]])
        assert ("available" if row["available"] else "unavailable") == line.split()[1].rstrip(":"), line
    for name in envs.SPECS:
        assert f"\n  {name}: " in text
    assert completed.stderr == ""


def test_info_json_matches_its_old_spelling_and_the_file_output(tmp_path):
    as_json = json.loads(torchport("info", "--format", "json").stdout)
    old = json.loads(torchport("info", "--json").stdout)
    written = torchport("info", "--format", "json", "-o", str(tmp_path / "info.json"))
    assert written.returncode == 0 and written.stdout == ""
    from_file = json.loads((tmp_path / "info.json").read_text())
    for document in (old, from_file):
        assert document.keys() == as_json.keys()
        assert [row["name"] for row in document["backends"]] == [row["name"] for row in as_json["backends"]]
    assert {"torchport", "python", "torch", "platform", "cpu", "cpu_count", "memory_bytes", "accelerators",
            "packages", "backends", "environments", "config"} <= as_json.keys()
    assert "hostname" not in as_json  # reports are pasted in public
    assert as_json["packages"]["numpy"]  # a dependency now (see test_no_numpy_warning_on_first_use)


def test_info_does_not_import_torch_in_the_parent_with_a_cpu_only_wheel():
    from torchport.backends import cpu_only_torch

    if not cpu_only_torch():
        pytest.skip("torch here is not a +cpu wheel: info asks torch for its accelerators")
    completed = torchport("info", python_flags=("-X", "importtime"))
    assert completed.returncode == 0, completed.stderr
    imported = {line.split("|")[-1].strip() for line in completed.stderr.splitlines() if line.startswith("import time:")}
    assert {"torchport.backends", "torchport.envs"} <= imported  # the log works: info read both
    assert "torch" not in imported


# --- one output convention ---------------------------------------------------------------------


def _stable(document):
    rows = document["backends"] if isinstance(document, dict) else document
    keys = sorted(document) if isinstance(document, dict) else None
    return keys, [(row["name"], row.get("available", row.get("ready"))) for row in rows]


@pytest.mark.parametrize("command", [("backends",), ("env", "list"), ("info",)])
def test_json_flag_is_the_old_spelling_of_format_json(command, tmp_path):
    new = torchport(*command, "--format", "json")
    old = torchport(*command, "--json")
    assert new.returncode == old.returncode == 0
    # the same document (availability reasons may carry a probe's timing, so compare what is stable)
    assert _stable(json.loads(new.stdout)) == _stable(json.loads(old.stdout))
    to_file = torchport(*command, "--format", "json", "-o", str(tmp_path / "out.json"))
    assert to_file.returncode == 0 and to_file.stdout == ""
    json.loads((tmp_path / "out.json").read_text())


def test_rules_md_and_its_old_name_markdown(tmp_path):
    md = torchport("rules", "--format", "md")
    old = torchport("rules", "--format", "markdown")
    assert md.returncode == old.returncode == 0
    assert md.stdout == old.stdout and md.stdout.startswith("| id |")
    assert torchport("rules", "--format", "md", "-o", str(tmp_path / "rules.md")).stdout == ""
    assert (tmp_path / "rules.md").read_text() == md.stdout


@pytest.mark.parametrize("command", [("backends",), ("info",), ("rules",), ("schema",), ("scan", str(APPS))])
def test_output_is_always_a_file_and_a_folder_is_refused(command, tmp_path):
    line = one_error_line(torchport(*command, "-o", str(tmp_path)))
    assert str(tmp_path) in line and "names a file" in line


def test_fix_writes_its_diff_to_the_output_file(tmp_path):
    source = tmp_path / "train.py"
    source.write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    to_stdout = torchport("fix", str(source), "--force")
    to_file = torchport("fix", str(source), "--force", "-o", str(tmp_path / "fix.diff"))
    assert to_stdout.returncode == to_file.returncode == 0, to_file.stderr
    assert "+++" in to_stdout.stdout and to_file.stdout == ""
    assert (tmp_path / "fix.diff").read_text() == to_stdout.stdout
    assert source.read_text().endswith(".cuda()\n")  # a diff, not a rewrite


# --- -q / -v, progress, --format on evaluate ---------------------------------------------------


def test_verbose_evaluate_shows_phases_progress_lines_and_prints_json(tmp_path):
    out = tmp_path / "out"
    completed = torchport("evaluate", str(APPS / "spine_tiny.py"), "-b", "cpu", "--repeats", "2", *QUICK,
                          "--out-dir", str(out), "--format", "json", "-v",
                          env={"TORCHPORT_PROGRESS_INTERVAL": "1"})
    assert completed.returncode == 0, completed.stderr
    # --format json: stdout is result.json itself
    assert json.loads(completed.stdout) == json.loads((out / "result.json").read_text())
    lines = completed.stderr.splitlines()
    # stderr is a pipe here: plain lines, with counts and elapsed time, at each run's end...
    assert any(line.startswith("torchport evaluate: 1/2 runs done, ") and line.endswith("cpu round 1/2: ok")
               for line in lines), completed.stderr
    assert any(line.startswith("torchport evaluate: 2/2 runs done, ") and line.endswith("cpu round 2/2: ok")
               for line in lines), completed.stderr
    # ...and every interval while a run goes on (1 s here; runs take several seconds)
    periodic = [line for line in lines if line.startswith("torchport evaluate: 0/2 runs done, ")]
    assert any(" elapsed - cpu round 1/2: " in line for line in periodic), completed.stderr
    # -v: each worker phase on its own line, in order
    phases = [line.split("cpu round 1/2: ")[1] for line in lines
              if line.startswith("[") and "] cpu round 1/2: " in line]
    assert "init" in phases and any(phase.endswith(":sustained") for phase in phases), completed.stderr
    assert phases.index("init") < [i for i, p in enumerate(phases) if p.endswith(":sustained")][0]
    assert "\x1b[" not in completed.stderr  # no terminal codes in a pipe
    # compare follows the same convention: --format json on stdout is its --json FILE document
    result = str(out / "result.json")
    as_json = torchport("compare", result, "--format", "json")
    old = torchport("compare", result, "--json", str(tmp_path / "compare.json"))
    assert as_json.returncode == old.returncode == 0, as_json.stderr
    # two runs of compare: the same document but for the time each was made
    from_stdout, from_file = json.loads(as_json.stdout), json.loads((tmp_path / "compare.json").read_text())
    assert from_stdout.pop("created") and from_file.pop("created")
    assert from_stdout == from_file
    as_md = torchport("compare", result, "--format", "md", "-o", str(tmp_path / "compare.md"))
    assert as_md.returncode == 0 and as_md.stdout == ""
    assert (tmp_path / "compare.md").read_text().strip()
    line = one_error_line(torchport("compare", result, "-o", str(tmp_path)))
    assert "names a file" in line


def test_quiet_evaluate_with_defaults_from_pyproject_where_flags_win(tmp_path):
    """[tool.torchport] sets the app, backend, repeats and prices; --steps on the
    command line wins over the config's absurd 100000; -q leaves stderr empty."""
    (tmp_path / ".git").mkdir()  # the search for a config stops at the repository root
    shutil.copy(APPS / "spine_tiny.py", tmp_path / "spine_tiny.py")
    shutil.copy(APPS / "spine_common.py", tmp_path / "spine_common.py")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "user-app"\n\n'
        '[tool.torchport]\napp = "spine_tiny.py"\nbackends = ["cpu"]\n\n'
        '[tool.torchport.evaluate]\nrepeats = 1\nsteps = 100000\nblocks = 2\nmax-warmup = 4\n'
        'no-inference = true\nno-trace = true\nno-checks = true\nprices = { cpu = 0.25 }\n')
    subfolder = tmp_path / "runs"
    subfolder.mkdir()
    completed = torchport("-q", "evaluate", "--steps", "4", "-o", "out", cwd=subfolder)  # -o: old spelling of --out-dir
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    document = json.loads((subfolder / "out" / "result.json").read_text())
    assert document["app"]["spec"].endswith("spine_tiny.py")
    assert document["app"]["file"] == str((tmp_path / "spine_tiny.py").resolve())  # beside the config
    assert list(document["backends"]) == ["cpu"]
    assert document["config"]["repeats"] == 1 and document["config"]["steps"] == 4
    assert document["prices"] == {"cpu": 0.25}
    assert "result: " in completed.stdout  # -q hides progress and notes, not the output


def test_quiet_and_verbose_together_is_one_line_error():
    line = one_error_line(torchport("-q", "backends", "-v"))
    assert "-q/--quiet and -v/--verbose" in line


# --- [tool.torchport] / torchport.toml ---------------------------------------------------------


@pytest.mark.parametrize("table, body, where, fragment", [
    ("tool.torchport.evaluate", "repeats = 0", "tool.torchport.evaluate.repeats", "at least 1"),
    ("tool.torchport.evaluate", 'repeats = "three"', "tool.torchport.evaluate.repeats", "not an integer"),
    ("tool.torchport.evaluate", 'dtype = "float8"', "tool.torchport.evaluate.dtype", "float8"),
    ("tool.torchport.evaluate", "no-trace = 1", "tool.torchport.evaluate.no-trace", "true or false"),
    ("tool.torchport.evaluate", "prices = { cpu = -1 }", "tool.torchport.evaluate.prices.cpu", "positive"),
    ("tool.torchport.evaluate", "timeout = 0", "tool.torchport.evaluate.timeout", "positive"),
    ("tool.torchport.evaluate", "colour = true", "tool.torchport.evaluate.colour", "unknown key"),
    ("tool.torchport", 'backends = ["cdua"]', "tool.torchport.backends", "unknown backend 'cdua'"),
    ("tool.torchport", "repeat = 3", "tool.torchport.repeat", "unknown key"),
    ("tool.torchport.check", 'only = ["parity", "speed"]', "tool.torchport.check.only", "unknown check 'speed'"),
])
def test_a_bad_config_value_is_one_line_naming_file_and_key(tmp_path, table, body, where, fragment):
    (tmp_path / ".git").mkdir()
    config = tmp_path / "pyproject.toml"
    config.write_text(f"[{table}]\n{body}\n")
    command = "check" if ".check" in where else "evaluate"
    line = one_error_line(torchport(command, cwd=tmp_path))
    assert f"{config}:{where}: " in line and fragment in line, line


def test_torchport_toml_top_level_keys_and_invalid_toml(tmp_path):
    (tmp_path / ".git").mkdir()
    config = tmp_path / "torchport.toml"
    config.write_text('targets = ["tpu", "gpu"]\n')
    line = one_error_line(torchport("trace", cwd=tmp_path))
    assert f"{config}:targets: unknown target 'gpu'" in line
    config.write_text("[evaluate\nrepeats = 2\n")
    assert f"{config}:1: invalid TOML" in one_error_line(torchport("evaluate", cwd=tmp_path))
    # --config names the file explicitly; one that is missing is one line
    assert "config file not found" in one_error_line(torchport("evaluate", "--config", str(tmp_path / "no.toml")))


def test_trace_takes_its_app_and_targets_from_the_config_and_writes_each_format(tmp_path):
    (tmp_path / ".git").mkdir()
    shutil.copy(APPS / "spine_tiny.py", tmp_path / "spine_tiny.py")
    shutil.copy(APPS / "spine_common.py", tmp_path / "spine_common.py")
    (tmp_path / "torchport.toml").write_text('app = "spine_tiny.py"\n\n[trace]\nsteps = 1\ntargets = ["tpu"]\n')
    completed = torchport("trace", "--format", "md", "-o", "trace.md", "--json", "trace.json", cwd=tmp_path,
                          env={"TORCHPORT_PROGRESS_INTERVAL": "1"})
    assert completed.returncode == 0, completed.stderr
    assert f"defaults from {tmp_path / 'torchport.toml'}" in completed.stderr
    # stderr is a pipe: a plain line every interval while the worker traces, instead of silence
    assert any(line.startswith("torchport trace: 0:00:0") and " elapsed - tracing" in line
               for line in completed.stderr.splitlines()), completed.stderr
    section = json.loads((tmp_path / "trace.json").read_text())  # --json FILE: the old spelling, still written
    assert section["steps_traced"] == 1 and list(section["verdicts"]) == ["tpu"]
    assert section["app"].endswith("spine_tiny.py")
    assert (tmp_path / "trace.md").read_text().startswith("## Op trace: readiness per target")
    assert "trace.md" not in completed.stdout and "## Op trace" not in completed.stdout  # -o: not on stdout
    info = json.loads(torchport("info", "--json", cwd=tmp_path / "..").stdout)
    assert info["config"] != str(tmp_path / "torchport.toml")  # searched from the current folder upwards...
    assert json.loads(torchport("info", "--json", cwd=tmp_path).stdout)["config"] == str(tmp_path / "torchport.toml")


# --- no warnings greet a new user --------------------------------------------------------------


def test_no_numpy_warning_on_first_use_of_torch():
    completed = subprocess.run([sys.executable, "-W", "error", "-c", "import torch; torch.zeros(2).numpy()"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert "NumPy" not in completed.stderr


def test_building_the_package_gives_no_licence_warning(tmp_path):
    """The metadata build that `pip install` runs, with the setuptools the test
    extra pins: the SPDX licence string, and the LICENSE file shipped."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    script = (
        "import warnings, setuptools.build_meta as backend\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    name = backend.prepare_metadata_for_build_wheel({str(tmp_path / 'meta')!r})\n"
        "print('NAME', name)\n"
        "for warning in caught: print('WARNING', warning.category.__name__, warning.message)\n")
    (tmp_path / "meta").mkdir()
    completed = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    name = next(line.split()[1] for line in completed.stdout.splitlines() if line.startswith("NAME "))
    caught = [line for line in completed.stdout.splitlines() if line.startswith("WARNING")]
    assert not [line for line in caught if "license" in line.lower()], caught
    metadata = (tmp_path / "meta" / name / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata


def test_report_without_a_result_takes_the_newest_and_a_folder_names_its_result(machine_results, tmp_path):
    nothing = run_torchport("report", cwd=tmp_path)
    assert nothing.returncode == 2 and "none under ./torchport-results/" in nothing.stderr
    assert "Traceback" not in nothing.stderr and len(nothing.stderr.strip().splitlines()) == 1
    root = tmp_path / "torchport-results"
    for stamp, name in ((100, "laptop"), (200, "slow")):  # slow is the newer one
        shutil.copytree(machine_results[name].parent, root / name)
        os.utime(root / name / "result.json", (1_700_000_000 + stamp,) * 2)
    newest = run_torchport("report", cwd=tmp_path)
    assert newest.returncode == 0, newest.stderr[-2000:]
    assert "the newest result, torchport-results/slow/result.json" in newest.stderr
    written = {name: (root / name / "report.md").stat().st_mtime_ns for name in ("laptop", "slow")}
    assert written["slow"] > written["laptop"]  # re-rendered now; the older one's copy left as it was
    folder = run_torchport("report", str(root / "laptop"), "-o", str(tmp_path / "laptop.md"), cwd=tmp_path)
    assert folder.returncode == 0 and (tmp_path / "laptop.md").read_text().startswith("#"), folder.stderr[-2000:]
