"""The TorchTPU adapters against the real torch_tpu 0.2.0, in the tpu environment.

The names the adapters call are read from src/torchport/backends/tpu.py and
accelerator.py (the code TorchTPU shares with TorchNeuron) themselves
(every ``torch.tpu.X`` / ``torch.accelerator.X`` it mentions), so a new call
there is checked here without editing this file.  tests/tpu_api_probe.py looks
them up in the real package statically (no TPU runtime is started: see its
docstring) and answers in JSON.  Nothing here has run on a TPU.
"""
from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from torchport.backends import tpu

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = [ROOT / "src/torchport/backends/tpu.py", ROOT / "src/torchport/backends/accelerator.py"]
PROBE = Path(__file__).resolve().parent / "tpu_api_probe.py"


def names_used(namespace: str) -> set[str]:
    """``X`` for every ``torch.<namespace>.X`` in the adapters' source."""
    found = set()
    trees = [ast.parse(path.read_text()) for path in ADAPTERS]
    for node in (node for tree in trees for node in ast.walk(tree)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == namespace and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "torch"):
            found.add(node.attr)
    # getattr(torch.tpu, "_get_cache_stats", None): a name given as a string.
    for node in (node for tree in trees for node in ast.walk(tree)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and ast.unparse(node.args[0]) == f"torch.{namespace}"):
            found.add(node.args[1].value)
    return found


@pytest.fixture(scope="module")
def probe(tpu_environment) -> dict:
    wanted = {"torch.tpu": sorted(names_used("tpu")), "torch.accelerator": sorted(names_used("accelerator"))}
    done = subprocess.run([tpu_environment["python"], str(PROBE), json.dumps(wanted)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_adapters_use_names_that_exist_in_torch_tpu(probe):
    used = probe["names"]
    assert set(used["torch.tpu"]) == {"eager_mode", "EagerMode", "get_device_name", "_get_cache_stats"}
    for namespace, names in used.items():
        for name, entry in names.items():
            assert entry["exists"], f"{namespace}.{name}: {entry}"
            if "binds_without_arguments" in entry:  # every adapter call passes no arguments
                assert entry["binds_without_arguments"] is not False, f"{namespace}.{name}() does not bind"
    # How 0.2.0 selects strict vs fused eager: a settable property on torch.tpu
    # that forwards to the C++ execution mode, with the enum members the
    # backends name (TORCH_TPU_DEFER_AND_FUSE, read once at start, also exists).
    assert used["torch.tpu"]["eager_mode"] == {"exists": True, "kind": "property", "settable": True,
                                              "stage": "Experimental"}
    assert {tpu.TPU.eager_mode, tpu.TPUFused.eager_mode} == {"DEFER_NEVER", "DEFER_AND_FUSE"}
    assert {tpu.TPU.eager_mode, tpu.TPUFused.eager_mode} <= set(probe["eager_modes"])
    assert probe["eager_mode_setter"] == "execution_mode_impl._set_eager_mode(_unwrap_eager_mode(value))"
    assert probe["fused_env_var_in_binary"]
    # A private name: it may go in any release, so counters() tolerates its absence.
    assert used["torch.tpu"]["_get_cache_stats"]["private"]


def test_internal_calls_raise_and_the_adapters_make_none(probe):
    assert set(probe["internal"]) == {"current_device", "current_stream", "device", "device_count",
                                      "get_rng_state", "initial_seed", "is_available", "set_device",
                                      "set_stream", "synchronize"}
    assert probe["is_available_from_user_code"] == (
        "RuntimeError: is_available is internal to TorchTPU and can only be called by the PyTorch framework "
        "(torch and torch_tpu). Use torch.accelerator.is_available instead.")
    assert not names_used("tpu") & set(probe["internal"])


def test_compile_backend_and_process_groups_are_torch_tpus(probe):
    assert "tpu" in probe["dynamo_backends"]
    assert tpu.TPUCompile.compile_backend == "tpu"
    assert probe["tpu_backend_class"] == "torch_tpu._internal.compile._backend.TpuBackend"
    # Registered by torch_tpu only when it initializes a device (read in its source here).
    assert tpu.TPU.process_group_backend in probe["init_device_source_registers"]


def test_nothing_was_initialized_by_looking(probe):
    assert probe["runtime"] == {"torch_tpu_loaded": False, "device_initialized": False,
                                "privateuse1_name": "privateuseone"}
    assert probe["versions"]["torch"] == "2.13.0+cpu"
