"""Typed records against the JSON Schema of the result document, and the one vocabulary.

Every record's ``to_dict`` validates against its part of the schema; records
survive ``from_dict(to_dict(x))``; a real result.json (a real evaluation:
worker processes, trace and checks stages) is read into records and written
back unchanged, key order included.
"""
from __future__ import annotations

import copy
import dataclasses
import json

import jsonschema
import pytest

from torchport import document as result_document
from torchport import failures, glossary, summary
from torchport.backends import registry
from torchport.records import (
    BackendComparison,
    BackendEntry,
    BudgetSection,
    BackendStatus,
    Check,
    CheckStatus,
    ConfigConsistency,
    Cost,
    CounterRow,
    DeviceMemory,
    DocumentStatus,
    ErrorKind,
    ErrorRecord,
    FailureDigest,
    Finding,
    OpSupportRow,
    RunRecord,
    RunSeries,
    ResultDocument,
    RunStatus,
    SampleBlock,
    ScenarioSamples,
    ScenarioSummary,
    ScriptSection,
    StageError,
    Stat,
    Summary,
    SustainedSamples,
    TargetVerdict,
    TraceSection,
    TraceSeverity,
    TraceVerdictStatus,
    WarmupRecompiling,
    WarmupSamples,
)


@pytest.fixture(scope="module")
def schema() -> dict:
    return result_document.load_schema()


def validator(schema: dict, part: str, defs_of: dict | None = None) -> jsonschema.Draft202012Validator:
    """A validator of one ``$defs`` entry, resolving references inside the whole schema."""
    whole = defs_of or schema
    return jsonschema.Draft202012Validator({"$defs": whole["$defs"], "$ref": f"#/$defs/{part}"})


@pytest.fixture(scope="module")
def document(builtin_evaluation) -> dict:
    return json.loads((builtin_evaluation / "result.json").read_text())


# --- the vocabulary --------------------------------------------------------------------------------

def test_the_schema_and_the_code_share_one_vocabulary(schema):
    defs = schema["$defs"]
    assert defs["error"]["properties"]["kind"]["enum"] == [kind.value for kind in ErrorKind]
    assert list(failures.KINDS) == [kind.value for kind in ErrorKind]
    assert defs["run"]["properties"]["status"]["enum"] == [status.value for status in RunStatus]
    assert defs["backend"]["properties"]["status"]["enum"] == [status.value for status in BackendStatus]
    assert schema["properties"]["status"]["enum"] == [status.value for status in DocumentStatus]
    checks = defs["checks"]["properties"]["checks"]["items"]["properties"]
    assert checks["status"]["enum"] == [status.value for status in CheckStatus]
    assert set(defs["trace"]["$defs"]["severity"]["enum"]) == {severity.value for severity in TraceSeverity}
    assert RunStatus.OK == "ok" and str(ErrorKind.OUT_OF_MEMORY) == "out-of-memory"


# The worker -> launch -> evaluate path and the stages' planning read and write statuses and error kinds
# through the vocabulary, never as words typed again.
VOCABULARY_USERS = ("launch.py", "evaluate.py", "budget.py", "summary.py", "commands/evaluate.py", "check/stage.py",
                    "check/budget.py", "trace/analysis.py", "trace/compile_check.py", "planning.py", "prices.py")


def _typed_words(tree) -> list[tuple[int, str]]:
    """(line, word) of each status or error-kind word written as a string in a comparison or an assignment."""
    import ast

    words = {str(member) for vocabulary in (RunStatus, BackendStatus, DocumentStatus, ErrorKind, CheckStatus)
             for member in vocabulary}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Assign) and any(isinstance(target, ast.Subscript) for target in node.targets):
            operands = [node.value]
        else:
            continue
        for operand in operands:
            for inner in ([operand] + list(getattr(operand, "elts", []))):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and inner.value in words:
                    found.append((inner.lineno, inner.value))
    return found


def test_the_run_path_uses_the_vocabulary_not_its_words():
    import ast
    from pathlib import Path

    source = Path(summary.__file__).resolve().parent
    typed = {name: _typed_words(ast.parse((source / name).read_text())) for name in VOCABULARY_USERS}
    assert not any(typed.values()), {name: found for name, found in typed.items() if found}
    assert _typed_words(ast.parse('if run["status"] == "ok": run["status"] = "timed_out"')) == [(1, "ok"), (1, "timed_out")]


def test_one_glossary_names_every_device_and_one_severity_direction():
    from torchport.scan import rules
    from torchport.trace import findings

    assert {f.trace_target for f in glossary.FAMILIES if f.trace_target} == set(findings.TARGETS)
    assert {f.scan_target for f in glossary.FAMILIES if f.scan_target} == set(rules.TARGETS)
    assert glossary.by_trace_target("neuron").scan_target == "trainium"
    backends = registry()
    assert backends["neuron"].trace_target() == "neuron" and backends["neuron"].scan_target() == "trainium"
    assert backends["xla"].dispatch_key() == "XLA" and backends["tpu-compile"].dispatch_key() == "PrivateUse1"
    assert all(cls.family is not None for name, cls in backends.items() if cls.__module__.startswith("torchport."))
    # Listing order is each class's `order`: the reference first, vendor plugins last.
    assert [cls.order for cls in backends.values()] == sorted(cls.order for cls in backends.values())
    # Both rankings grow with how bad a severity is.
    assert findings.SEVERITY_RANK["blocker"] > findings.SEVERITY_RANK["slow"] > findings.SEVERITY_RANK["minor"]
    assert rules.SEVERITY_RANK["error"] > rules.SEVERITY_RANK["silent"] > rules.SEVERITY_RANK["perf"] > rules.SEVERITY_RANK["info"]


# --- one shape, declared twice: the records and the schema ------------------------------------------

def _schema_parts(schema: dict) -> dict[str, dict]:
    """The schema's object for each record, by the record's name."""
    defs = schema["$defs"]
    summary = defs["summary"]["properties"]
    return {
        "BackendEntry": defs["backend"], "Cost": defs["backend"]["properties"]["cost"],
        "FailureDigest": defs["backend"]["properties"]["failures"], "RunRecord": defs["run"], "ErrorRecord": defs["error"],
        "Summary": defs["summary"], "Stat": defs["stat"], "DeviceMemory": defs["device_memory"],
        "CounterRow": summary["counters"]["items"], "RunSeries": summary["runs_series"]["items"],
        "Check": defs["checks"]["properties"]["checks"]["items"],
        "Finding": defs["trace"]["$defs"]["finding"], "TargetVerdict": defs["trace"]["$defs"]["verdict"],
        "OpSupportRow": defs["trace"]["$defs"]["op_support"]["properties"]["ops"]["additionalProperties"],
    }


@pytest.mark.parametrize("record_class", [BackendEntry, Cost, FailureDigest, RunRecord, ErrorRecord, Summary, Stat,
                                          DeviceMemory, CounterRow, RunSeries, Check, Finding, TargetVerdict,
                                          OpSupportRow], ids=lambda cls: cls.__name__)
def test_each_record_declares_exactly_the_fields_its_schema_declares(schema, record_class):
    part = _schema_parts(schema)[record_class.__name__]
    declared = [f.name for f in dataclasses.fields(record_class) if f.name not in ("extra", "key_order")]
    # RunSeries: the schema names what every series has; the first run's losses come on top.
    in_schema = list(part.get("properties") or {}) or [*part["required"], "losses"]
    assert sorted(declared) == sorted(in_schema), (
        f"only in {record_class.__name__}: {sorted(set(declared) - set(in_schema))}; "
        f"only in the schema: {sorted(set(in_schema) - set(declared))}")
    assert set(part.get("required") or []) <= set(declared)


def test_the_summary_schema_describes_the_scenario_and_warmup_records(schema):
    """A summary starts with one scenario's figures (its inference is one too), in the order written."""
    summary_fields = [f.name for f in dataclasses.fields(Summary) if f.name not in ("extra", "key_order")]
    scenario = [f.name for f in dataclasses.fields(ScenarioSummary) if f.name not in ("extra", "key_order")]
    assert summary_fields[:len(scenario)] == scenario
    description = schema["$defs"]["summary"]["properties"]["warmup_recompiling"]["description"]
    assert description.endswith(": " + ", ".join(f.name for f in dataclasses.fields(WarmupRecompiling)
                                                 if f.name not in ("extra", "key_order")))


def test_a_computed_summary_writes_every_field_none_included():
    computed = ScenarioSummary(first_step_s=0.5).computed().to_dict()
    assert list(computed) == [f.name for f in dataclasses.fields(ScenarioSummary) if f.name not in ("extra", "key_order")]
    assert computed["samples_per_s"] is None and computed["first_step_s"] == 0.5


# --- records built in code -------------------------------------------------------------------------

def built_records() -> list[tuple[str, object]]:
    memory = DeviceMemory(peak_allocated_bytes=10, peak_reserved_bytes=20, source="torch.cuda.max_memory_allocated")
    error = ErrorRecord(kind=ErrorKind.OUT_OF_MEMORY, message="CUDA out of memory", more=True, location="app.py:3",
                        library_frame=None)
    block = {"seconds": 0.5, "steps": 5, "data_wait_s": 0.0, "samples": 80, "losses": [1.0] * 5, "compilations": 0}
    training = {"first_step_s": 0.2, "warmup": {"steps": 5, "seconds": 0.5, "steady": True, "blocks": [block]},
                "sustained": {"block_steps": 5, "blocks": [block, block]}, "steps_total": 16}
    run = RunRecord(round=0, status=RunStatus.OK, wall_s=3.0, phases={"import_s": 0.1},
                    training=ScenarioSamples.from_dict(training),
                    memory=memory, host_peak_rss_bytes=1 << 20)
    failed = RunRecord(round=1, status=RunStatus.ERROR, error=error, exit_code=1, stderr_tail=["boom"])
    stat = Stat(median=0.1, ci95=[0.09, 0.11], runs=1, samples=2, warnings=[])
    summary_record = Summary(step_time_s=stat, samples_per_s=160.0, samples_per_s_ci95=[150.0, 170.0],
                             first_step_s=0.2, steady=True, runs_ok=1, notes=["a note"],
                             peak_device_memory_bytes=memory.peak_bytes())
    entry = BackendEntry(name="cuda", title="CUDA", available=True, reason="1 GPU", verification="not verified",
                         status=BackendStatus.OK, runs=[run, failed], summary=summary_record)
    check = Check(name="parity", status=CheckStatus.PASS, reason="error ratio 1.2", figures={"ratio": 1.2},
                  backend="cpu-compile")
    finding = Finding(id="TR102", rule="dynamic-output-shape", title="data-dependent shape",
                      severity=TraceSeverity.SLOW, targets={"xla": TraceSeverity.SLOW, "cuda": TraceSeverity.MINOR},
                      location="app.py:9", count=3, per_step=1.0, detail="aten::nonzero", fix="pad it")
    verdict = TargetVerdict(fallbacks=1, fallback_ops=["aten::nonzero"], blockers=0, slow_findings=1, op_support="table",
                            status=TraceVerdictStatus.SLOW, text="runs with 1 fallback (slow)")
    return [("device_memory", memory), ("error", error), ("run", run), ("run", failed), ("stat", stat),
            ("summary", summary_record), ("backend", entry), ("check", check), ("finding", finding),
            ("verdict", verdict)]


@pytest.mark.parametrize("part, record", built_records(), ids=lambda value: value if isinstance(value, str) else "")
def test_each_record_validates_and_round_trips(schema, part, record):
    data = record.to_dict()
    json.dumps(data)  # plain JSON: the enums are written as their words
    if part == "check":
        item_schema = schema["$defs"]["checks"]["properties"]["checks"]["items"]
        jsonschema.validate(data, item_schema)
    elif part in ("finding", "verdict"):
        trace = schema["$defs"]["trace"]
        validator(schema, part, trace).validate(data)
    else:
        validator(schema, part).validate(data)
    again = type(record).from_dict(data)
    assert again == record
    assert again.to_dict() == data


def test_a_record_keeps_what_it_does_not_declare_and_the_key_order():
    raw = {"status": "ok", "round": 2, "added_by_a_newer_torchport": {"x": 1}, "memory": None}
    run = RunRecord.from_dict(raw)
    assert run.extra == {"added_by_a_newer_torchport": {"x": 1}} and run.status is RunStatus.OK
    assert list(run.to_dict().items()) == list(raw.items())


@pytest.mark.parametrize("record_class", [DeviceMemory, ErrorRecord, RunRecord, Stat, CounterRow, Summary,
                                          BackendEntry, Check, Finding, TargetVerdict])
def test_a_partial_dictionary_is_written_back_as_it_was(record_class):
    """Fields the dictionary did not have stay out, whatever their defaults."""
    assert record_class.from_dict({}).to_dict() == {}
    assert record_class.from_dict({"notes": ["x"], "zzz": None}).to_dict() == {"notes": ["x"], "zzz": None}


def test_device_memory_reads_the_10_names_and_has_one_headline_figure():
    old_xla = DeviceMemory.from_dict({"peak_bytes": 123, "bytes_limit": 1000, "source": "torch_xla"})
    assert old_xla.peak_allocated_bytes == 123 and old_xla.limit_bytes == 1000 and old_xla.peak_bytes() == 123
    assert DeviceMemory(current_allocated_bytes=7, source="mps").peak_bytes() == 7
    assert DeviceMemory(peak_allocated_bytes=5, peak_reserved_bytes=8).peak_bytes() == 8
    assert DeviceMemory().peak_bytes() is None


# --- a real result.json ------------------------------------------------------------------------------

def test_a_real_result_round_trips_through_the_records(schema, document):
    result_document.validate(document)
    assert document["schema_version"] == result_document.SCHEMA_VERSION
    for name, raw in document["backends"].items():
        entry = BackendEntry.from_dict(raw)
        assert entry.name == name and entry.status is BackendStatus.OK
        assert all(isinstance(run, RunRecord) and run.status is RunStatus.OK for run in entry.runs)
        assert isinstance(entry.summary, Summary) and isinstance(entry.summary.step_time_s, Stat)
        # byte for byte, key order included
        assert json.dumps(entry.to_dict()) == json.dumps(raw)
        assert BackendEntry.from_dict(entry.to_dict()) == entry
        validator(schema, "backend").validate(entry.to_dict())
    assert document["checks"]["checks"]  # the cheap checks ran: real check records to read
    for raw in document["checks"]["checks"]:
        check = Check.from_dict(raw)
        assert json.dumps(check.to_dict()) == json.dumps(raw)
    # The classifier may have no trace findings; tests/test_trace_evaluate.py reads a real TR102 finding.
    for raw in document["trace"]["findings"]:
        assert json.dumps(Finding.from_dict(raw).to_dict()) == json.dumps(raw)
    assert document["trace"]["verdicts"]
    for raw in document["trace"]["verdicts"].values():
        assert json.dumps(TargetVerdict.from_dict(raw).to_dict()) == json.dumps(raw)


def test_the_summary_carries_what_the_renderers_draw(document):
    for name, backend in document["backends"].items():
        s = backend["summary"]
        assert [row["phase"] for row in s["counters"]] == (
            ["first_step", "warmup", "sustained"] if name == "cpu-compile" else [])
        assert len(s["runs_series"]) == s["runs_ok"] == 2
        assert s["runs_series"][0]["losses"] and s["runs_series"][1]["losses"] is None
        first = backend["runs"][0]["training"]
        assert s["runs_series"][0]["points"][0] == [1, first["first_step_s"]]
        assert s["config_hash"] == backend["runs"][0]["config_hash"]
    compiled = document["backends"]["cpu-compile"]["summary"]["counters"]
    assert all("torch_compile" in row["counters"] for row in compiled)
    rows = Summary.from_dict(document["backends"]["cpu-compile"]["summary"]).counters
    assert rows and all(isinstance(row, CounterRow) and not row.extra for row in rows)


def test_a_10_document_is_still_read_and_rendered(tmp_path, document):
    """A result written by the previous schema: its summaries are recomputed,
    XLA-style memory names are read, and report renders it."""
    from conftest import run_torchport

    old = copy.deepcopy(document)
    old["schema_version"] = "1.0"
    old["environment"].pop("backend_plugin_problems", None)
    for backend in old["backends"].values():
        for key in ("counters", "counter_runs", "phase_seconds", "runs_series", "config_hash", "config"):
            backend["summary"].pop(key)
    old["backends"]["cpu"]["runs"][0]["memory"] = {"peak_bytes": 4096, "bytes_limit": 8192, "source": "torch_xla"}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(old))
    refreshed = summary.refresh(result_document.result_record(result_document.read_document(path)))
    assert refreshed.backends["cpu"].measured().peak_device_memory_bytes == 4096
    assert refreshed.backends["cpu"].measured().runs_series
    done = run_torchport("report", str(path), "-o", str(tmp_path / "report.md"), "--html", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert "## Training throughput" in (tmp_path / "report.md").read_text()
    old["schema_version"] = "0.9"
    path.write_text(json.dumps(old))
    refused = run_torchport("report", str(path))
    assert refused.returncode == 2
    assert "result schema version '0.9' is not one this torchport reads ('1.0', '1.1', '1.2')" in refused.stderr


# --- the records of the report layer: the whole document, summaries, comparison, script mode ---------

def _report_schema_parts(schema: dict) -> dict[str, dict]:
    defs, top = schema["$defs"], schema["properties"]
    return {
        "ResultDocument": schema, "BudgetSection": top["budget"], "StageError": top["stage_errors"]["items"],
        "ConfigConsistency": top["config_consistency"], "ScenarioSamples": defs["scenario"],
        "SampleBlock": defs["block"], "WarmupSamples": defs["scenario"]["properties"]["warmup"],
        "SustainedSamples": defs["scenario"]["properties"]["sustained"],
    }


@pytest.mark.parametrize("record_class", [ResultDocument, BudgetSection, StageError, ConfigConsistency, ScenarioSamples,
                                          SampleBlock, WarmupSamples, SustainedSamples], ids=lambda cls: cls.__name__)
def test_each_report_record_declares_exactly_the_fields_its_schema_declares(schema, record_class):
    part = _report_schema_parts(schema)[record_class.__name__]
    declared = [f.name for f in dataclasses.fields(record_class) if f.name not in ("extra", "key_order")]
    assert sorted(declared) == sorted(part["properties"]), (
        f"only in {record_class.__name__}: {sorted(set(declared) - set(part['properties']))}; "
        f"only in the schema: {sorted(set(part['properties']) - set(declared))}")


def test_the_script_section_record_declares_what_its_schema_requires(schema):
    part = schema["properties"]["script"]
    declared = {f.name for f in dataclasses.fields(ScriptSection)}
    assert set(part["required"]) <= declared and set(part["properties"]) <= declared


def test_a_whole_real_document_round_trips_and_refresh_recomputes_it_unchanged(document):
    """The report layer reads the document once, as a record: written back it is the same JSON, key
    order included; recomputing every figure from the raw samples (summary.refresh) gives the
    figures the evaluation wrote, byte for byte."""
    record = result_document.result_record(document)
    assert isinstance(record.trace, TraceSection) and isinstance(record.config_consistency, ConfigConsistency)
    assert record.checks is not None and all(isinstance(check, Check) for check in record.check_records())
    assert all(isinstance(entry.comparison, BackendComparison) for name, entry in record.backends.items()
               if name != record.reference)
    assert json.dumps(record.to_dict()) == json.dumps(document)
    assert json.dumps(summary.refresh(result_document.result_record(copy.deepcopy(document))).to_dict()) == json.dumps(document)
    assert [check.to_dict() for check in record.check_records()] == document["checks"]["checks"]


# --- check (src/torchport/check/): the section and each check's figures -----------------------------

def _undeclared(value: object, path: str) -> list[str]:
    """Keys a record (or a record inside it) read from a dictionary does not declare."""
    from torchport.records import Record

    if isinstance(value, Record):
        found = [f"{path}: {sorted(value.extra)}"] if value.extra else []
        return found + [item for name in value._declared() for item in _undeclared(getattr(value, name), f"{path}.{name}")]
    if isinstance(value, dict):
        return [item for key, child in value.items() for item in _undeclared(child, f"{path}.{key}")]
    if isinstance(value, list):
        return [item for index, child in enumerate(value) for item in _undeclared(child, f"{path}[{index}]")]
    return []


def test_a_real_checks_section_reads_into_records_that_declare_every_figure(document):
    from torchport.records import CHECK_FIGURES, ChecksSection

    raw = document["checks"]
    section = ChecksSection.from_dict(raw)
    assert json.dumps(section.to_dict()) == json.dumps(raw)  # byte for byte, key order included
    assert {check.name for check in section.checks} >= {"determinism", "parity", "checkpoint", "pipeline"}
    for check, written in zip(section.checks, raw["checks"]):
        figures = check.figures_as(CHECK_FIGURES[check.name])
        assert _undeclared(figures, check.name) == []
        assert json.dumps(figures.to_dict()) == json.dumps(written["figures"])
    assert section.config.reference == "cpu" and section.config.steps is not None
