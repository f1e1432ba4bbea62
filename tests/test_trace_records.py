"""The trace section's records (torchport.records.TraceSection and its parts)
declare what trace.schema.json declares, and read and write a real section
unchanged."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from torchport.records import ChipFit, ContractNote, MemoryFit, RunRecord, TargetOpSupport, TraceSection, TraceStatus
from torchport.trace.analysis import UNTRACED_KEYS, trace_section, validate_targets

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "src" / "torchport" / "schemas" / "trace.schema.json")
                    .read_text(encoding="utf-8"))


def _schema_parts() -> dict[str, dict]:
    memory = SCHEMA["properties"]["memory"]
    return {"TraceSection": SCHEMA, "TargetOpSupport": SCHEMA["$defs"]["op_support"], "MemoryFit": memory,
            "ChipFit": memory["properties"]["chips"]["items"], "ContractNote": SCHEMA["properties"]["contract"]["items"]}


@pytest.mark.parametrize("record_class", [TraceSection, TargetOpSupport, MemoryFit, ChipFit,
                                          ContractNote], ids=lambda c: c.__name__)
def test_each_trace_record_declares_exactly_the_fields_its_schema_declares(record_class):
    part = _schema_parts()[record_class.__name__]
    declared = [f.name for f in dataclasses.fields(record_class) if f.name not in ("extra", "key_order")]
    assert sorted(declared) == sorted(part["properties"]), (
        f"only in {record_class.__name__}: {sorted(set(declared) - set(part['properties']))}; "
        f"only in the schema: {sorted(set(part['properties']) - set(declared))}")
    assert set(part.get("required") or []) <= set(declared)


def test_a_worker_that_traced_nothing_gives_a_failed_section_with_its_keys_in_order():
    error = {"kind": "app-error", "message": "boom", "location": "app.py:3"}
    run = RunRecord.from_dict({"status": "error", "error": error, "trace": {}})
    section = trace_section(run, "app.py", validate_targets(None))
    written = section.to_dict()
    assert section.status == TraceStatus.FAILED and written["reason"] == "app.py:3: boom"
    assert tuple(written) == UNTRACED_KEYS
    jsonschema.Draft202012Validator(SCHEMA).validate(written)
    section.put(app_scan=None)  # attach_scan on a script without files: written, as null
    assert list(section.to_dict())[-1] == "app_scan" and section.to_dict()["app_scan"] is None


def test_a_real_section_reads_and_writes_unchanged(builtin_evaluation):
    written = json.loads((builtin_evaluation / "result.json").read_text(encoding="utf-8"))["trace"]
    assert written["findings"] or written["op_support"], "the builtin evaluation traced nothing"
    section = TraceSection.from_dict(written)
    assert json.dumps(section.to_dict()) == json.dumps(written)
    assert section.memory is not None and section.memory.chips and section.shapes is not None
    assert set(section.verdicts) == set(section.op_support) == set(written["targets"])
