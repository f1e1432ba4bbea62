"""The run path on typed records, written as the dictionaries were.

``launch.run_worker`` returns a RunRecord, the evaluation holds a BackendEntry
per backend and the summaries are Summary records; result.json is written from
them at one place (``Evaluation.save``).  These tests hold that document to
the one the run path wrote when it passed dictionaries: the same keys in the
same order, and every derived figure a function of the runs.  (That the schema
and the records declare the same fields is tests/test_records.py's.)
"""
from __future__ import annotations

import copy
import json

import pytest

from torchport import summary
from torchport.evaluate import EVALUATE_JOB
from torchport.launch import run_worker
from torchport.protocol import ProtocolConfig
from torchport.records import BackendEntry, BackendStatus, ErrorKind, ResultDocument, RunRecord, RunStatus, Summary

# The keys of a successful run and of a backend in result.json, in the order the dictionary run path
# wrote them (a builtin:classifier evaluation on cpu and cpu-compile, made by the CLI before the
# records): the worker's keys, then what the parent adds (launch: wall_s, exit_code, last_phase;
# evaluate: round), then what the summaries add.
RUN_KEYS = ["status", "phases", "worker", "device", "host_memory", "training", "memory", "config", "config_hash",
            "metric", "inference", "host_peak_rss_bytes", "wall_s", "exit_code", "last_phase", "round"]
BACKEND_KEYS = ["title", "device_type", "compiles", "environment", "proxy_for", "verification", "name", "available",
                "reason", "status", "error", "runs", "summary", "failures", "comparison", "cost"]


@pytest.fixture(scope="module")
def document(builtin_evaluation) -> dict:
    return json.loads((builtin_evaluation / "result.json").read_text())


def rebuilt_from_records(document: dict) -> dict:
    """The document with its backends read into records and refreshed from their runs, as
    ``Evaluation.save`` does before it writes."""
    rebuilt = ResultDocument.from_dict(copy.deepcopy(document))
    summary.refresh_backends(rebuilt.backends, rebuilt)
    return rebuilt.to_dict()


def test_the_cli_writes_runs_and_backends_in_the_dictionary_paths_order(document):
    assert list(document["backends"]) == ["cpu", "cpu-compile"]
    for raw in document["backends"].values():
        assert list(raw) == BACKEND_KEYS
        assert raw["runs"] and all(list(run) == RUN_KEYS for run in raw["runs"])
        assert [run["round"] for run in raw["runs"]] == [0, 1]


def test_the_evaluations_records_rebuild_the_document_the_cli_wrote(document):
    """Summaries, failure digests, comparisons, costs and config_consistency
    recomputed on the records from the runs alone: byte for byte what the CLI wrote."""
    assert json.dumps(rebuilt_from_records(document)) == json.dumps(document)
    entry = BackendEntry.from_dict(document["backends"]["cpu-compile"])
    assert entry.status is BackendStatus.OK and isinstance(entry.summary, Summary)
    assert all(isinstance(run, RunRecord) and run.ok for run in entry.runs)
    assert entry.comparison is not None and entry.failures is None


def test_a_real_runs_record_is_written_as_the_evaluation_writes_its_runs(document):
    """A worker run of the same configuration, numbered as the evaluation numbers it: the keys of
    the CLI's runs in their order, the same effective configuration, and the record survives JSON."""
    config = ProtocolConfig.from_dict(document["config"]).as_dict()
    run = run_worker("cpu", EVALUATE_JOB, app=document["app"]["spec"], config=config, timeout=600)
    assert isinstance(run, RunRecord) and run.status is RunStatus.OK and run.ok, run.error
    assert run.memory is None and run.wall_s and run.exit_code == 0 and run.phases  # the CPU counts no device memory
    run.put(round=0)
    written = run.to_dict()
    cli_run = document["backends"]["cpu"]["runs"][0]
    assert list(written) == list(cli_run) == RUN_KEYS
    assert list(written["training"]) == list(cli_run["training"])
    assert written["config_hash"] == cli_run["config_hash"]
    assert RunRecord.from_dict(json.loads(json.dumps(written))) == run


def test_a_failed_runs_record_keeps_the_order_of_what_the_parent_adds():
    """A worker that exits at once (its interpreter is /bin/false): what launch adds, in the order the
    dictionary had it."""
    run = run_worker("cpu", EVALUATE_JOB, app="builtin:classifier", python="/bin/false", timeout=60)
    assert run.status is RunStatus.CRASHED and run.error is not None and run.error.kind is ErrorKind.CRASH
    assert list(run.to_dict()) == ["phases", "wall_s", "exit_code", "last_phase", "status", "error", "stderr_tail"]


# alone: it reads the evaluation timed against a budget that tests/test_budget.py reads alone (made once)
@pytest.mark.alone
def test_a_budget_too_small_document_is_rebuilt_from_its_records(budget_too_small_evaluation):
    out, completed = budget_too_small_evaluation
    assert completed.returncode == 0, completed.stderr
    document = json.loads((out / "result.json").read_text())
    cut = BackendEntry.from_dict(document["backends"]["cpu-compile"])
    assert cut.error is not None and cut.error.kind is ErrorKind.BUDGET_TOO_SMALL and cut.summary is None
    assert cut.failures is not None and cut.failures.runs_failed >= 1
    assert json.dumps(rebuilt_from_records(document)) == json.dumps(document)
