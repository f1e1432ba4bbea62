"""Adding a backend is one module; a broken one is reported, never dropped.

One real evaluation (real worker processes) with TORCHPORT_BACKEND_PATH naming
two test-only folders: tests/plugin_backend (a new backend, ``plugin-cpu``)
and tests/plugins_broken (a module that fails to import, and one that defines
a backend under a name a built-in backend has).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import QUICK, load_result, run_torchport

from torchport.document import validate

TESTS = Path(__file__).resolve().parent
PLUGIN = TESTS / "plugin_backend"
BROKEN = TESTS / "plugins_broken"
PLUGIN_PATH = {"TORCHPORT_BACKEND_PATH": os.pathsep.join([str(PLUGIN), str(BROKEN)])}


@pytest.fixture(scope="module")
def plugin_evaluation(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("plugin") / "run"
    done = run_torchport("evaluate", "builtin:classifier", "-b", "plugin-cpu", *QUICK, "-o", str(out),
                         env=PLUGIN_PATH, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return load_result(out)


def test_a_backend_module_in_a_plugin_folder_runs_on_the_cpu_under_its_own_name(plugin_evaluation):
    entry = plugin_evaluation["backends"]["plugin-cpu"]
    assert entry["status"] == "ok", entry.get("error")
    assert entry["title"] == "CPU, from a test-only plugin module"
    run = entry["runs"][0]
    assert run["status"] == "ok" and run["device"]["device"] == "cpu"
    assert entry["summary"]["step_time_s"]["median"] > 0
    # One module: the backend's name appears nowhere in torchport itself.
    assert [p.name for p in PLUGIN.glob("*.py")] == ["renamed_cpu.py"]
    source = TESTS.parent / "src" / "torchport"
    assert not [path for path in source.rglob("*.py") if "plugin-cpu" in path.read_text(encoding="utf-8")]


def test_broken_plugins_are_in_the_results_environment(plugin_evaluation):
    problems = plugin_evaluation["environment"]["backend_plugin_problems"]
    by_file = {Path(problem["source"]).name: problem["problem"] for problem in problems}
    assert by_file["broken_import.py"] == ("failed to import: ModuleNotFoundError: No module named "
                                           "'torchport_no_such_module'")
    assert by_file["bad_class.py"] == ("class SecondCPU: backend name 'cpu' is already torchport.backends.cpu.CPU")
    validate(plugin_evaluation)


def test_backends_command_reports_broken_plugins():
    text = run_torchport("backends", env=PLUGIN_PATH)
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    assert "backend plugins that could not be used:" in flat
    assert "broken_import.py: failed to import: ModuleNotFoundError" in flat
    assert "bad_class.py: class SecondCPU: backend name 'cpu' is already torchport.backends.cpu.CPU" in flat
    as_json = run_torchport("backends", "--format", "json", env=PLUGIN_PATH)
    assert as_json.returncode == 0
    rows = {row["name"]: row for row in json.loads(as_json.stdout)}
    assert rows["plugin-cpu"]["available"] and rows["cpu"]["title"] == "CPU, eager"  # the built-in cpu kept its name
    assert "broken_import.py: failed to import" in as_json.stderr and "class SecondCPU" in as_json.stderr


def test_without_plugins_there_is_nothing_to_report():
    done = run_torchport("backends", "--format", "json", env={"TORCHPORT_BACKEND_PATH": ""})
    assert done.returncode == 0 and done.stderr == ""
    assert "plugin-cpu" not in {row["name"] for row in json.loads(done.stdout)}
