"""One vocabulary of targets: trace and scan accept each other's names and the
common aliases (trainium/neuron, tpu/torchtpu, rocm/amd), through the real CLI."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_torchport
from torchport import glossary


@pytest.mark.parametrize("alias, trace_name, scan_name", [
    ("trainium", "neuron", "trainium"), ("neuron", "neuron", "trainium"), ("TorchTPU", "tpu", "tpu"),
    ("amd", "rocm", "rocm"), ("torch_xla", "xla", "xla"), ("apple", "mps", "mps")])
def test_aliases_name_one_family(alias, trace_name, scan_name):
    assert glossary.canonical_target(alias, "trace") == trace_name
    assert glossary.canonical_target(alias, "scan") == scan_name


def test_scan_takes_the_trace_names(tmp_path):
    completed = run_torchport("scan", str(ROOT / "examples" / "cuda_training"), "--target", "neuron,torchtpu,amd",
                              "--format", "json")
    assert completed.returncode in (0, 1), completed.stderr
    document = json.loads(completed.stdout)
    assert set(document["targets"]) == {"trainium", "tpu", "rocm"}, document["targets"]


def test_an_unknown_target_is_one_line_naming_it():
    completed = run_torchport("scan", str(ROOT / "examples" / "cuda_training"), "--target", "gaudi")
    assert completed.returncode == 2 and "unknown target 'gaudi'" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_trace_takes_the_scan_names():
    completed = run_torchport("trace", "builtin:classifier", "--steps", "1", "--target", "trainium,amd",
                              "--format", "json", timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    section = json.loads(completed.stdout)
    assert set(section["targets"]) == {"neuron", "rocm"}, section["targets"]


def test_the_cache_follows_xdg_cache_home(tmp_path):
    # `env list` names each environment's folder: under $XDG_CACHE_HOME/torchport, unless TORCHPORT_CACHE says otherwise.
    environment = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TORCHPORT_CACHE": ""}
    completed = run_torchport("env", "list", "--format", "json", env=environment)
    assert completed.returncode == 0, completed.stderr
    assert str(tmp_path / "xdg" / "torchport" / "envs") in completed.stdout
