"""``torchport trace`` as a user runs it: output, --json, bad input, timeout."""
from __future__ import annotations

import json
from pathlib import Path

from torchport.document import load_schema

APPS = Path(__file__).resolve().parent / "apps"


def test_prints_verdicts_and_findings_and_writes_the_section_as_json(torchport_cli, tmp_path):
    out = tmp_path / "trace.json"
    done = torchport_cli("trace", str(APPS / "trace_host_sync.py"), "--steps", "2", "--target", "xla,mps",
                         "--no-live", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "PyTorch/XLA (torch_xla): runs with 1 fallback; host synchronization inside the training step (slow)" in done.stdout
    assert "Apple MPS: no blocker found in the trace; op support unknown" in done.stdout
    assert "TR101 slow    tests/apps/trace_host_sync.py:10: host synchronization inside the training step" in done.stdout \
        or "trace_host_sync.py:10: host synchronization" in done.stdout
    section = json.loads(out.read_text())
    assert section["targets"] == ["xla", "mps"] and section["steps_traced"] == 2
    assert [(f["id"], f["count"]) for f in section["findings"]] == [("TR101", 2)]
    # The --json file is the section of the result document, valid against its schema.
    import jsonschema

    jsonschema.validate(section, load_schema()["$defs"]["trace"])


def test_failing_app_names_the_user_line_without_a_traceback(torchport_cli):
    done = torchport_cli("trace", str(APPS / "trace_raises.py"), "--no-live")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"torchport: error: {APPS / 'trace_raises.py'}:7: the app's loss raised: RuntimeError")
    assert "Traceback" not in done.stderr


def test_unparseable_app_and_unknown_target_are_one_line_errors(torchport_cli):
    done = torchport_cli("trace", str(APPS / "spine_syntax_error.py"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{APPS / 'spine_syntax_error.py'}:" in done.stderr and "syntax error" in done.stderr
    done = torchport_cli("trace", "builtin:classifier", "--target", "tpu,gaudi")
    assert done.returncode == 2
    assert done.stderr.strip() == "torchport: error: unknown target 'gaudi' (known: tpu, xla, neuron, rocm, mps, cuda)"


def test_timeout_stops_the_step_and_keeps_what_was_traced(torchport_cli, tmp_path):
    out = tmp_path / "trace.json"
    done = torchport_cli("trace", str(APPS / "trace_hang.py"), "--timeout", "30", "--no-live", "--json", str(out))
    assert done.returncode == 1, done.stderr
    assert "trace incomplete: timed out after 30 s (overall --timeout)" in done.stderr
    section = json.loads(out.read_text())
    assert section["status"] == "partial" and section["steps_traced"] == 1
    assert section["findings"] == [] and section["verdicts"]["xla"]["status"] == "runs"
    assert any(r["op"] == "aten::addmm" and r["steps"] == [1] for r in section["ops"])
