"""The TorchTPU op table: read from torch_tpu 0.2.0's dispatcher, shipped, and
used by the trace.

The shipped table (src/torchport/data/op_support_tpu.json, written by
tools/gen_op_support.py tpu in the tpu environment) is what users without the
environment get; the first test reads the live table again in the tpu
environment and requires the same answer, so the shipped file cannot drift
from the package it names.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from torchport import envs
from torchport.trace import support
from torchport.trace.analysis import trace_app

APPS = Path(__file__).resolve().parent / "apps"
GROUPS = ("native", "composite_explicit", "composite_implicit", "without_kernel", "structured_delegates")


def shipped() -> dict:
    return json.loads((support.DATA / "op_support_tpu.json").read_text())


def test_shipped_table_is_what_torch_tpu_says_now(tpu_environment, tmp_path):
    request = tmp_path / "request.json"
    request.write_text(json.dumps(support.TPU_REQUEST))
    done = subprocess.run([tpu_environment["python"], "-m", "torchport.trace.registrations", str(request)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": envs.import_root(), **support.TPU_QUERY_ENV})
    assert done.returncode == 0, done.stderr[-2000:]
    live = json.loads(done.stdout.strip().splitlines()[-1])
    table = shipped()
    assert table["version"] == live["versions"] == {"torch": "2.13.0+cpu", "torch_tpu": "0.2.0", "libtpu": "0.0.52"}
    for group in GROUPS:
        assert table[group] == live["table"][group], group
    assert table["fallback"] == live["fallback"]


def test_the_table_says_where_each_answer_comes_from():
    table = shipped()
    assert table["source"].startswith("op support from torch_tpu 0.2.0 dispatcher registrations")
    assert table["retrieved"] and table["how_built"].endswith("tools/gen_op_support.py tpu")
    # What torch_tpu 0.2.0 does with an op it has no kernel for, as read from
    # the package: a PrivateUse1 backend fallback, registered in its
    # tpu_aten_kernels.cc; its CPU fallback is off, so the fallback raises
    # "... is not implemented for TPU. Please file a feature request".
    assert table["fallback"] == {
        "registered": True, "registered_at": "csrc/eager/tpu_aten_kernels.cc:1149", "cpu_fallback_enabled": False,
        "switch": "torch_tpu._internal.execution_mode.enable_cpu_fallback (internal; default False)",
        "messages_in_binary": {"binary": "torch_tpu/csrc/common/glue_2_13_0/libpywrap_2_13_0_common.so",
                               "' is not implemented for TPU. Please file a feature request": True,
                               "' is not implemented for TPU. Falling back to CPU": True}}
    assert table["runtime"]["torch_tpu_device_initialized"] is False
    assert "tpu" in table["registered_namespaces"]

    indexed = support.shipped_table("tpu")
    target = support.TARGETS["tpu"]
    classify = lambda op: support.classify(op, target, indexed)  # noqa: E731
    assert classify("aten::linear").to_dict() == {"status": "native", "why": "PrivateUse1 kernel"}
    # aten::mm has no PrivateUse1 kernel itself: its composite calls aten::mm.out, which is torch_tpu's.
    assert classify("aten::mm").to_dict() == {"status": "decomposed",
                                              "why": "composite calling aten::mm.out, a PrivateUse1 kernel"}
    assert classify("aten::median").status == "missing"
    assert "operator 'aten::median' is not implemented for TPU" in classify("aten::median").why
    assert classify("tpu::_ragged_dot").status == "custom"


def test_an_op_torch_tpu_lacks_is_flagged_at_the_users_line():
    section = trace_app(str(APPS / "trace_tpu_missing_op.py"), allow_live=False, targets=["tpu"]).to_dict()
    assert section["status"] == "complete", section["reason"]
    [finding] = section["findings"]
    line = next(number for number, text in enumerate((APPS / "trace_tpu_missing_op.py").read_text().splitlines(), 1)
                if "# the op TorchTPU lacks" in text)
    assert (finding["id"], finding["location"], finding["ops"]) == (
        "TR110", f"{APPS / 'trace_tpu_missing_op.py'}:{line}", ["aten::huber_loss"])
    assert finding["targets"] == {"tpu": "blocker"}
    assert ("torch_tpu's backend fallback raises \"operator 'aten::huber_loss' is not implemented for TPU. Please "
            "file a feature request\"") in finding["detail"]
    assert section["op_support"]["tpu"]["ops"]["aten::huber_loss"]["status"] == "missing"
    verdict = section["verdicts"]["tpu"]
    assert verdict["status"] == "blocked"
    assert verdict["text"] == (
        f"blocked by op has no kernel on the target ({APPS / 'trace_tpu_missing_op.py'}:{line}) "
        f"[op support from torch_tpu 0.2.0 dispatcher registrations, shipped table of {shipped()['retrieved']}]")
