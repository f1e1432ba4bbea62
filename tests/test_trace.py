"""torchport trace on purpose-built apps: one app per finding kind, each asserting
the exact finding, its count and the user line that caused it; a clean app
and the built-in apps yield no false findings.

Every test traces a real app in a real worker process (torch on the CPU,
TorchDispatchMode).  Op support comes from the shipped tables here
(``allow_live=False``) so the expectations do not depend on which backend
environments this machine has; the live lookup has its own test.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from torchport.trace.analysis import trace_app

APPS = Path(__file__).resolve().parent / "apps"


def marked_line(app: str, marker: str) -> str:
    """``file:line`` of the line in a test app that carries ``# the <marker>``."""
    path = APPS / app
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if f"# the {marker}" in text:
            return f"{path}:{number}"
    raise AssertionError(f"no '# the {marker}' line in {app}")


def trace(app: str, **options) -> dict:
    section = trace_app(str(APPS / app), allow_live=False, **options).to_dict()
    assert section["status"] == "complete", section["reason"]
    return section


def only_finding(section: dict) -> dict:
    found = section["findings"]
    assert len(found) == 1, [(f["id"], f["location"], f["detail"]) for f in found]
    return found[0]


def test_clean_app_has_no_findings_and_runs_where_support_was_looked_up():
    section = trace("trace_clean.py")
    assert section["findings"] == []
    assert section["verdicts"]["xla"] == {**section["verdicts"]["xla"], "status": "runs", "text": "runs as is"}
    assert section["verdicts"]["cuda"]["status"] == "runs"
    # TorchTPU: the shipped table read from torch_tpu 0.2.0 (tests/test_tpu_ops.py).
    assert section["verdicts"]["tpu"]["text"] == (
        "runs as is [op support from torch_tpu 0.2.0 dispatcher registrations, shipped table of "
        f"{section['op_support']['tpu']['retrieved']}]")
    assert section["op_support"]["tpu"]["kind"] == "table"
    # Not installed, no published op list: never "runs as is".
    for target in ("neuron", "rocm", "mps"):
        assert section["verdicts"][target]["status"] == "unknown"
        assert section["op_support"][target]["kind"] == "none"
    assert section["steps_traced"] == 3
    # Every op of a step is recorded with phase, location and shapes.
    phases = {record["phase"] for record in section["ops"]}
    assert phases == {"forward", "loss", "backward", "optimizer"}  # a list of batches issues no data ops
    addmm = [r for r in section["ops"] if r["op"] == "aten::addmm" and r["phase"] == "forward"]
    assert {r["module"] for r in addmm} == {"0", "2"}
    assert all(r["count"] == 3 and r["flops"] == 3 * 2 * 8 * 128 * 128 for r in addmm)
    assert addmm[0]["inputs"] == ["float32[128]", "float32[8,128]", "float32[128,128]"]
    # Backward ops point at the user line of the forward call that made them.
    backward_mm = [r for r in section["ops"] if r["op"] == "aten::mm" and r["phase"] == "backward"]
    assert backward_mm and {r["location"] for r in backward_mm} == {str(APPS / "trace_clean.py") + ":9"}


def test_host_sync():
    finding = only_finding(trace("trace_host_sync.py"))
    assert (finding["id"], finding["location"], finding["count"]) == ("TR101", marked_line("trace_host_sync.py", "host sync"), 3)
    assert finding["calls"] == ["Tensor.item()"]
    assert finding["targets"]["xla"] == "slow" and finding["targets"]["cuda"] == "minor"


def test_dynamic_output_shape():
    section = trace("trace_dynamic_shape.py")
    finding = only_finding(section)
    assert (finding["id"], finding["location"], finding["count"]) == (
        "TR102", marked_line("trace_dynamic_shape.py", "data-dependent shape"), 3)
    assert finding["ops"] == ["aten::index.Tensor[bool]"]
    # torch_xla runs the boolean mask through a CPU nonzero (measured by the table's probe run).
    assert section["op_support"]["xla"]["ops"]["aten::index.Tensor[bool]"]["falls_back_as"] == ["aten::nonzero"]
    assert section["verdicts"]["xla"]["text"] == "runs with 1 fallback; op whose output shape depends on the data (slow)"


def test_input_shapes_vary_with_a_partial_last_batch():
    section = trace("trace_shapes.py")
    finding = only_finding(section)
    assert (finding["id"], finding["location"], finding["count"]) == ("TR103", marked_line("trace_shapes.py", "varying shapes"), 2)
    assert finding["last_partial_batch"] is True
    assert finding["varying"] == [{"input": "batch[0]", "dim": 0, "sizes": [3, 8], "what": "size"},
                                  {"input": "batch[1]", "dim": 0, "sizes": [3, 8], "what": "size"}]
    assert section["verdicts"]["xla"]["recompilations"] == 1
    assert section["verdicts"]["cuda"]["status"] == "runs"  # eager GPUs do not compile per shape


def test_graph_changes_between_steps():
    finding = only_finding(trace("trace_graph_varies.py"))
    assert (finding["id"], finding["location"], finding["count"]) == (
        "TR104", marked_line("trace_graph_varies.py", "changing graph"), 2)


def test_float64():
    section = trace("trace_float64.py")
    finding = only_finding(section)
    assert (finding["id"], finding["location"], finding["count"]) == ("TR105", marked_line("trace_float64.py", "float64"), 6)
    assert finding["ops"] == ["aten::ones", "aten::sum"]
    assert finding["targets"] == {"mps": "blocker", "xla": "slow", "tpu": "slow"}
    assert section["verdicts"]["mps"]["status"] == "blocked"


def test_tile_misaligned_dimensions():
    finding = only_finding(trace("trace_tile.py", targets=["tpu", "xla"]))
    # At the constructor line that fixed the sizes, seen at the loss line that ran them.
    assert (finding["id"], finding["location"], finding["count"]) == ("TR106", marked_line("trace_tile.py", "odd layers"), 6)
    assert finding["seen_at"] == [marked_line("trace_tile.py", "misaligned matmuls")]
    assert finding["modules"] == ["0", "2"]
    # 100 x 100 of a 128 x 128 tile is useful work: 1 - 10000 / 16384.
    assert finding["wasted_share_of_op"] == pytest.approx(1 - 100 * 100 / 128 / 128, abs=1e-4)
    assert finding["severity"] == "slow"


def test_sparse_tensor():
    finding = only_finding(trace("trace_sparse.py"))
    assert (finding["id"], finding["location"], finding["count"]) == ("TR107", marked_line("trace_sparse.py", "sparse tensor"), 9)
    assert finding["layouts"] == ["sparse_coo"] and finding["targets"] == {"tpu": "blocker", "xla": "blocker"}


def test_custom_op_with_a_cpu_kernel_only():
    section = trace("trace_custom_op.py")
    finding = only_finding(section)
    assert (finding["id"], finding["location"], finding["count"]) == ("TR108", marked_line("trace_custom_op.py", "custom op"), 3)
    assert finding["ops"] == ["torchport_test::halve"]
    assert finding["targets"]["cuda"] == "blocker" and finding["targets"]["xla"] == "slow"
    assert section["verdicts"]["cuda"]["status"] == "blocked"


@pytest.mark.parametrize("name, expected", [
    ("classifier", []),
    # True findings, kept: an RGB input has 3 channels (K = 3 x 3 x 3 = 27 in the
    # first convolution), and the tiny GPT's attention heads are 32 wide over a
    # 64-token context, both far from the TPU's 128-wide tiles.  The convolution's
    # sizes are fixed by its constructor (cnn.py:22); the attention's by the code that runs it.
    ("cnn", [("TR106", "cnn.py:22", "0")]),
    ("gpt", [("TR106", "gpt.py:{attention}", "blocks.0")]),
])
def test_builtin_apps_have_no_false_findings(name, expected):
    source = Path(__file__).parent.parent / "src" / "torchport" / "builtin" / f"{name}.py"
    attention = next((number for number, text in enumerate(source.read_text().splitlines(), 1)
                      if "scaled_dot_product_attention(" in text), None)
    expected = [(rule, where.format(attention=attention), module) for rule, where, module in expected]
    section = trace(f"../../src/torchport/builtin/{name}.py")
    got = [(f["id"], f["location"].rsplit("/", 1)[-1], f["modules"][0]) for f in section["findings"]]
    assert got == expected
    assert all(f["severity"] == "minor" for f in section["findings"])
    assert section["verdicts"]["xla"]["status"] == "runs"
    assert section["verdicts"]["cuda"]["status"] == "runs"
