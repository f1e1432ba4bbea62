"""torchport memory on any app spec: a compact table, --format json|md, -o FILE."""
from __future__ import annotations

import json

from conftest import APPS


def _real_parameter_count(spec: str) -> int:
    from torchport.app import load_app

    return sum(p.numel() for p in load_app(spec).model().parameters())


def test_memory_of_a_builtin_app_is_a_compact_table(torchport_cli):
    done = torchport_cli("memory", "builtin:classifier", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) < 45, done.stdout  # two tables and a few notes, not pages of prose
    for word in ("weights", "optimizer state", "activations", "required", "capacity", "NVIDIA H100 SXM"):
        assert word in done.stdout
    assert f"parameters: {_real_parameter_count('builtin:classifier'):,} counted" in done.stdout
    # A 30 MiB step on a 16 GiB chip is under 1% full, and says so.
    assert "fits (<1%)" in done.stdout


def test_memory_of_an_app_file_as_json_counts_its_real_model(torchport_cli, tmp_path):
    spec = str(APPS / "compare_tiny.py")
    done = torchport_cli("memory", spec, "--format", "json", "--dtype", "float32", "--dtype", "bfloat16")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["family"] == "app" and result["parameters"] == _real_parameter_count(spec)
    float32, bfloat16 = result["passes"]
    assert float32["parameter_bytes"] == 4 * result["parameters"] == 2 * bfloat16["parameter_bytes"]
    assert float32["gradient_bytes"] == float32["parameter_bytes"]
    # The app's own optimizer decides the state formula when --optimizer is not given.
    row = float32["optimizers"][0]
    assert row["optimizer"] == result["app_optimizer"]
    assert row["required_bytes"] > row["peak_bytes"] >= float32["step_peak_bytes"]
    assert all(chip["fits_one"] for chip in row["chips"])


def test_memory_markdown_to_a_file(torchport_cli, tmp_path):
    out = tmp_path / "memory.md"
    done = torchport_cli("memory", "builtin:classifier", "--optimizer", "sgd", "--format", "md", "-o", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""
    text = out.read_text()
    assert text.startswith("# torchport memory `builtin:classifier`")
    assert "| float32 sgd |" in text and "| 0 B |" in text  # plain SGD keeps no state
    assert "## Fit per chip" in text


def test_memory_measure_is_for_hf_specs_only(torchport_cli):
    done = torchport_cli("memory", "builtin:classifier", "--measure")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--measure runs hf: specs only" in done.stderr
