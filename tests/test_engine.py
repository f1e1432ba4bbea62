"""The one step engine (torchport.engine): every job builds the app in the
same order, so the same app starts from the same parameters and data.

Real worker processes on the CPU: evaluate's job, the checks' training job
(two runs in one worker, the second built after the first trained) and the
trace job each record, from inside the app, the initial parameters' digest
and the first loss.  The app draws its dataset when it is made and has
dropout, so a job that seeded after importing it (as the checks did before the
engine) or that let one run's RNG draws leak into the next would differ."""
from __future__ import annotations

import json

import pytest

from torchport.launch import run_worker
from torchport.protocol import ProtocolConfig
from torchport.records import RunStatus

APP = "tests/apps/engine_order.py"


def records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_evaluate_check_and_trace_build_the_same_app(tmp_path, monkeypatch):
    monkeypatch.chdir(__import__("pathlib").Path(__file__).resolve().parent.parent)
    config = ProtocolConfig(seed=3, steps=2, blocks=1, max_warmup_steps=0, inference=False).as_dict()
    seen = {}
    for job, function, options in (
        ("evaluate", "torchport.protocol:evaluate_job", {"config": config}),
        ("check", "torchport.check.jobs:train_job", {"extra": {
            "work_dir": str(tmp_path / "work"),
            "runs": [{"label": label, "dtype": "float32", "seed": 3, "steps": 3} for label in ("first", "second")]}}),
        ("trace", "torchport.trace.job:trace_job", {"config": {"steps": 1, "seed": 3}}),
    ):
        path = tmp_path / f"{job}.jsonl"
        result = run_worker("cpu", function, app=APP, env={"ENGINE_ORDER_RECORD": str(path)}, timeout=300, **options)
        assert result.status == RunStatus.OK, (job, result.error, result.stderr_tail)
        seen[job] = records(path)
    assert len(seen["check"]) == 2  # both runs of the one check worker
    everything = [record for job in seen.values() for record in job]
    assert len(everything) == 4
    assert all(record == everything[0] for record in everything), seen


def test_a_loss_that_is_not_a_scalar_has_one_message_everywhere(tmp_path, monkeypatch):
    """The engine refuses it in one place: evaluate, check and trace say the same."""
    monkeypatch.chdir(__import__("pathlib").Path(__file__).resolve().parent.parent)
    messages = set()
    for function, options in (
        ("torchport.protocol:evaluate_job", {"config": ProtocolConfig(steps=1, blocks=1, max_warmup_steps=0,
                                                                      inference=False).as_dict()}),
        ("torchport.check.jobs:train_job", {"extra": {"work_dir": str(tmp_path / "w"), "runs": [
            {"label": "a", "dtype": "float32", "seed": 0, "steps": 1}]}}),
        ("torchport.trace.job:trace_job", {"config": {"steps": 1}}),
    ):
        result = run_worker("cpu", function, app="tests/apps/spine_loss_not_scalar.py", timeout=300, **options)
        assert result.status == RunStatus.ERROR and result.error is not None and result.error.location
        messages.add((result.error.message, result.error.location.rsplit("/", 1)[-1]))
    assert messages == {("the loss must return a scalar tensor, got shape (16, 1)", "spine_loss_not_scalar.py:6")}


@pytest.mark.parametrize("seed", [0, 5])
def test_builds_in_one_worker_start_from_the_same_state(seed):
    """In process: a second build (after the first trained, with dropout)
    sees the RNG state the import left, as the first did."""
    import os
    import tempfile

    from torchport.backends import get
    from torchport.engine import import_app

    with tempfile.TemporaryDirectory() as folder:
        os.environ["ENGINE_ORDER_RECORD"] = os.path.join(folder, "r.jsonl")
        try:
            imported = import_app(APP, seed)
            backend = get("cpu")()
            for _ in range(2):
                engine = imported.build(backend)
                for _ in range(3):
                    engine.train_step()
            with open(os.environ["ENGINE_ORDER_RECORD"]) as handle:
                first, second = [json.loads(line) for line in handle]
        finally:
            del os.environ["ENGINE_ORDER_RECORD"]
    assert first == second
