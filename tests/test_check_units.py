"""In-process pieces of `torchport check` with real torch: checkpoint files,
the error-ratio rule, module localisation, batch sharding, RNG restoration
and the input-pipeline verdict.  No worker processes: these take seconds."""
from __future__ import annotations

import pytest
import torch

from torchport.backends import get
from torchport.check import pipeline, savefile
from torchport.check.parity import localise
from torchport.check.tolerance import FLOOR, RATIO_LIMIT, judge, tensor_error
from torchport.check.training import capture_rng, restore_rng, shard_batch, state_outside_state_dict
from torchport.records import Check, PipelineMeasurement


def _state() -> dict:
    model = torch.nn.Linear(4, 3)
    return {"step": 7, "model": model.state_dict(), "rng": {"torch_cpu": torch.get_rng_state()}}


def test_checkpoint_round_trip_is_exact(tmp_path):
    path = tmp_path / "a.ckpt"
    state = _state()
    record = savefile.save(state, path)
    assert record.bytes == path.stat().st_size
    loaded = savefile.load(path)
    assert loaded["step"] == 7
    assert all(torch.equal(loaded["model"][key], value) for key, value in state["model"].items())


def test_truncated_checkpoint_is_refused_before_loading(tmp_path):
    path = tmp_path / "a.ckpt"
    savefile.save(_state(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(savefile.CheckpointError, match=r"is truncated: \d+ bytes, \d+ written; not loaded"):
        savefile.load(path)


def test_corrupt_checkpoint_is_refused_before_loading(tmp_path):
    path = tmp_path / "a.ckpt"
    savefile.save(_state(), path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    path.write_bytes(bytes(data))
    with pytest.raises(savefile.CheckpointError, match="is corrupt: SHA-256 differs"):
        savefile.load(path)


def test_checkpoint_without_its_checksum_record_is_refused(tmp_path):
    path = tmp_path / "a.ckpt"
    savefile.save(_state(), path)
    savefile.sidecar(path).unlink()
    with pytest.raises(savefile.CheckpointError, match="no readable size/checksum record"):
        savefile.load(path)


class AppObject:
    pass


def test_checkpoint_holding_an_app_object_is_not_unpickled(tmp_path):
    path = tmp_path / "a.ckpt"
    savefile.save({"step": 1, "extra": AppObject()}, path)
    with pytest.raises(savefile.CheckpointError, match=r"weights_only=True\) refused.*AppObject"):
        savefile.load(path)


def test_unpicklable_state_is_a_save_error(tmp_path):
    with pytest.raises(savefile.CheckpointError, match="torch.save failed"):
        savefile.save({"step": 1, "extra": lambda: None}, tmp_path / "a.ckpt")
    assert not list(tmp_path.iterdir())  # no half-written file left behind


def test_error_ratio_floors_a_bit_exact_reference_and_blames_a_real_error():
    assert judge(0.0, 0.0, "float32").passed
    small = judge(FLOOR["float32"] / 2, 0.0, "float32")
    assert small.passed and small.ratio == 0.5
    rounding = judge(3e-6, 1e-6, "float32")
    assert rounding.passed and rounding.ratio == pytest.approx(3.0)
    wrong = judge(1e-2, 1e-6, "float32")
    assert not wrong.passed and wrong.ratio > RATIO_LIMIT
    assert wrong.to_dict()["pass"] is False  # written under the document's key
    # The same error is ordinary rounding in bfloat16.
    assert judge(1e-2, 5e-3, "bfloat16").passed


def test_localise_names_the_first_module_that_diverges_in_execution_order():
    generator = torch.Generator().manual_seed(0)
    truth = {name: torch.randn(32, generator=generator, dtype=torch.float64) for name in ("a", "b", "c")}
    reference = {name: value * (1 + 1e-7) for name, value in truth.items()}
    backend = {"a": truth["a"] * (1 + 2e-7), "b": truth["b"] + 0.01, "c": truth["c"] + 0.02}
    found = localise(backend, ["a", "b", "c"], reference, truth, "float32")
    assert found.module == "b" and found.position == 2 and not found.passed
    assert localise(reference, ["a", "b", "c"], reference, truth, "float32") is None


def test_tensor_error_is_relative_and_catches_shape_and_nan():
    a = torch.ones(4)
    assert tensor_error(a, a) == 0.0
    assert tensor_error(a * 1.01, a) == pytest.approx(0.01)
    assert tensor_error(torch.ones(3), a) == float("inf")
    assert tensor_error(torch.tensor([1.0, float("nan"), 1.0, 1.0]), a) == float("inf")


def test_shard_batch_splits_every_tensor_evenly():
    batch = (torch.arange(8).reshape(4, 2), {"y": torch.arange(4)})
    first, second = shard_batch(batch, 0, 2), shard_batch(batch, 1, 2)
    assert torch.equal(torch.cat([first[0], second[0]]), batch[0])
    assert second[1]["y"].tolist() == [2, 3]
    with pytest.raises(Exception, match="cannot split a batch of leading size"):
        shard_batch(torch.arange(3), 0, 2)


def test_rng_restore_reports_a_device_generator_it_cannot_restore():
    cpu = get("cpu")()
    cpu.setup()
    state = capture_rng(cpu)
    expected = torch.rand(3)
    torch.rand(5)
    state["device"] = {"type": "xla", "state": 1234}
    missing = restore_rng(state, cpu)
    assert torch.equal(torch.rand(3), expected)  # the CPU generator itself came back
    assert missing == ["xla device RNG state (no xla generator on cpu)"]


def test_tensors_outside_state_dict_are_found():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model[0].hidden = torch.zeros(1)
    model[0].register_buffer("fine", torch.zeros(1))
    (found,) = state_outside_state_dict(model)
    assert (found.name, found.kind) == ("0.hidden", "plain tensor attribute")


def measured(load_s: list[float], compute_s: list[float], **data) -> dict:
    return {"load_s": load_s, "compute_s": compute_s, "batches_per_s": 1 / (sum(load_s) / len(load_s)),
            "samples_per_s": None, "per_round": 4, "data": data or {"dataloader": False, "type": "builtins.list"}}


def pipeline_check(backend: str, device_type: str, raw: dict | None) -> Check:
    """The verdict on a measurement as a worker's JSON carries it."""
    return pipeline.check(backend, device_type, PipelineMeasurement.from_dict(raw) if raw else None)


def test_pipeline_flags_slow_in_process_loading_and_suggests_workers():
    slow = measured([0.1] * 5, [0.01] * 5, dataloader=True, num_workers=0, pin_memory=False)
    verdict = pipeline_check("cuda", "cuda", slow).to_dict()
    assert verdict["status"] == "fail" and verdict["figures"]["input_bound"]
    assert verdict["figures"]["verdict"] == "input-bound" and verdict["reason"].startswith("input-bound: ")
    suggestions = " ".join(verdict["figures"]["suggestions"])
    assert "num_workers" in suggestions and "pin_memory=True" in suggestions
    on_cpu = pipeline_check("cpu", "cpu", slow).to_dict()
    assert "pin_memory does not help on cpu" in on_cpu["figures"]["suggestions"]
    fast = measured([0.001] * 5, [0.1] * 5)
    assert pipeline_check("cpu", "cpu", fast).to_dict()["figures"]["verdict"] == "keeps up"


def test_pipeline_verdict_is_a_band_on_the_median_round_with_the_interval():
    # Waiting shares 10%, 18%, 20%, 22%, 40%: the median (20%) is between the
    # thresholds, so one noisy round on either side cannot flip the verdict.
    compute = 0.08
    loads = [compute * share / (1 - share) for share in (0.10, 0.18, 0.20, 0.22, 0.40)]
    verdict = pipeline_check("cpu", "cpu", measured(loads, [compute] * 5)).to_dict()
    figures = verdict["figures"]
    assert figures["verdict"] == "borderline" and verdict["status"] == "borderline"
    assert verdict["reason"].startswith("borderline: ") and "try: " in verdict["reason"]
    assert figures["load_share"] == pytest.approx(0.20)
    assert figures["load_share_interval"] == pytest.approx([0.10, 0.40])
    assert ("(rounds: 10% to 40%; keeps up below 15%, input-bound above 25%, and only from 1 ms of waiting a step"
            in verdict["reason"])
    assert pipeline.band(0.149) == "keeps up" and pipeline.band(0.251) == "input-bound" and pipeline.band(0.2) == "borderline"


def test_pipeline_verdict_under_heavy_load_is_marked_uncertain_and_keeps_its_status():
    loaded = {**measured([0.001] * 5, [0.1] * 5), "load": {"before": [7.5, 6.0, 5.0], "after": [8.0, 6.1, 5.0], "cpus": 2}}
    verdict = pipeline_check("cpu", "cpu", loaded).to_dict()
    assert verdict["status"] == "pass" and verdict["figures"]["verdict"] == "keeps up"
    assert verdict["figures"]["uncertain"].startswith("uncertain: the host's load average was 8.0 on 2 CPUs")
    assert "rerun on an idle machine" in verdict["reason"]
    idle = {**loaded, "load": {"before": [0.5, 0.4, 0.3], "after": [1.2, 0.5, 0.3], "cpus": 2}}
    assert pipeline_check("cpu", "cpu", idle).to_dict()["figures"]["uncertain"] is None
    assert pipeline_check("cpu", "cpu", measured([0.001] * 5, [0.1] * 5)).to_dict()["figures"]["uncertain"] is None


def test_pipeline_with_dataloader_workers_waits_only_for_loading_beyond_compute():
    data = {"dataloader": True, "num_workers": 2, "persistent_workers": True, "prefetch_factor": 2}
    assert pipeline.waiting_share(0.05, 0.1, overlapped=True) == 0.0
    assert pipeline.waiting_share(0.2, 0.1, overlapped=True) == pytest.approx(0.5)
    assert pipeline_check("cpu", "cpu", measured([0.05] * 5, [0.1] * 5, **data)).to_dict()["figures"]["verdict"] == "keeps up"
    assert pipeline_check("cpu", "cpu", None).to_dict()["status"] == "error"


def test_a_check_the_budget_ended_is_skipped_and_only_fail_or_error_fails_the_command():
    from torchport.check.budget import CheckBudget
    from torchport.check.runner import exit_status
    from torchport.records import Check, ChecksSection, CheckStatus

    budget = CheckBudget(60.0)
    timed_out = Check(name="recovery", backend="cpu", status=CheckStatus.ERROR, reason="worker timed_out: no message")
    explained = budget.explain(timed_out, 12.0, limited=True)
    assert explained.status is CheckStatus.SKIPPED and explained.reason.startswith("budget too small: ")
    assert timed_out.status is CheckStatus.ERROR  # the record given is left as it was
    assert budget.record().skipped == ["recovery on cpu: ended at the budget's end"]
    assert budget.explain(timed_out, 12.0, limited=False) is timed_out
    section = ChecksSection(checks=[explained, Check(name="pipeline", status=CheckStatus.BORDERLINE)])
    assert exit_status(section) == 0
    assert exit_status(ChecksSection(checks=[*section.checks, timed_out])) == 1
    assert list(timed_out.to_dict()) == ["name", "backend", "status", "figures", "reason"]
