"""The timing protocol: configuration, steady state, data streams, and phase
separation measured in a real worker process."""
from pathlib import Path

import pytest
import torch

from torchport.errors import UserError
from torchport.launch import run_worker
from torchport.protocol import BatchStream, Block, ProtocolConfig, batch_signature, config_hash, is_steady
from torchport.records import EffectiveConfig, RunStatus

APPS = Path(__file__).parent / "apps"


def block(step_s, compilations=0):
    return Block(seconds=step_s * 2, steps=2, data_wait_s=0.0, samples=2, tokens=None, losses=None,
                 compilations=compilations)


def test_config_validation():
    with pytest.raises(UserError, match="unsupported dtype"):
        ProtocolConfig(dtype="float64")
    with pytest.raises(UserError, match="must be at least 1"):
        ProtocolConfig(steps=0)
    assert ProtocolConfig(steps=4, blocks=5).blocks == 4
    assert ProtocolConfig(steps=60, blocks=10).block_steps == 6
    assert ProtocolConfig.from_dict({"steps": 8, "unknown": 1}).steps == 8


def test_config_hash_is_canonical():
    one = EffectiveConfig(key_order=()).put(model="Net", protocol={"steps": 4, "seed": 0})
    same_in_another_order = EffectiveConfig(key_order=()).put(protocol={"seed": 0, "steps": 4}, model="Net")
    assert config_hash(one) == config_hash(same_in_another_order)
    assert config_hash(one) != config_hash(EffectiveConfig(key_order=()).put(model="Net", protocol={"steps": 5}))


def test_steady_state_needs_agreeing_blocks_and_no_compilation():
    assert not is_steady([block(1.0), block(1.0)], window=3, tolerance=0.1)
    assert is_steady([block(5.0), block(1.0), block(1.02), block(0.99)], window=3, tolerance=0.1)
    assert not is_steady([block(1.0), block(1.3), block(1.0)], window=3, tolerance=0.1)
    assert not is_steady([block(1.0), block(1.0, compilations=1), block(1.0)], window=3, tolerance=0.1)


def test_batch_stream_cycles_epochs_of_lists_and_generators():
    stream = BatchStream(lambda: [torch.zeros(2), torch.ones(2)])
    assert stream.steps_per_epoch == 2
    values = [stream.next()[0][0].item() for _ in range(5)]
    assert values == [0, 1, 0, 1, 0] and stream.epochs_started == 3

    def generator():
        yield from (torch.full((3,), float(i)) for i in range(2))

    stream = BatchStream(generator)
    assert stream.steps_per_epoch is None
    assert [stream.next()[0][0].item() for _ in range(4)] == [0, 1, 0, 1]


def test_empty_data_is_a_user_error():
    with pytest.raises(UserError, match="data is empty"):
        BatchStream(list).next()


def test_batch_signature_is_shape_and_dtype():
    batch = (torch.zeros(4, 3), {"y": torch.zeros(4, dtype=torch.long)})
    assert batch_signature(batch) == (((4, 3), "float32"), (("y", ((4,), "int64")),))


def test_phases_are_measured_separately():
    """First step (compilation stand-in), warm-up and sustained are separated,
    and steady state is detected from the data."""
    config = ProtocolConfig(steps=10, blocks=5, max_warmup_steps=40, inference=False).as_dict()
    run = run_worker("cpu", "torchport.protocol:evaluate_job", app=str(APPS / "spine_phases.py"), config=config,
                     timeout=120)
    assert run.status == RunStatus.OK, run.error
    training = run.training
    assert training is not None and training.first_step_s >= 0.6
    warmup = training.warmup
    assert warmup.steady is True
    assert warmup.steps >= 4  # the four slow warm-up steps land in warm-up, not in sustained
    sustained = training.measured().blocks
    assert len(sustained) == 5 and all(b.steps == 2 for b in sustained)
    assert max(b.seconds / b.steps for b in sustained) < 0.04
    assert training.steps_total == 1 + warmup.steps + 10
    for phase in ("process_start_s", "import_s", "init_s"):
        assert run.phases[phase] > 0
    # Losses are read at block boundaries, one per step.
    assert all(len(b.losses or []) == b.steps for b in sustained)


def test_warmup_bound_is_reported_when_never_steady():
    config = ProtocolConfig(steps=4, blocks=2, max_warmup_steps=4, inference=False).as_dict()
    run = run_worker("cpu", "torchport.protocol:evaluate_job", app=str(APPS / "spine_phases.py"), config=config,
                     timeout=120)
    assert run.status == RunStatus.OK
    assert run.training is not None
    assert run.training.warmup.steps == 4
    assert run.training.warmup.steady is False


def test_data_wait_is_measured():
    config = ProtocolConfig(steps=4, blocks=2, max_warmup_steps=2, inference=False).as_dict()
    run = run_worker("cpu", "torchport.protocol:evaluate_job", app=str(APPS / "spine_slow_data.py"), config=config,
                     timeout=120)
    assert run.status == RunStatus.OK
    assert run.training is not None
    blocks = run.training.measured().blocks
    waited = sum(b.data_wait_s for b in blocks)
    assert waited >= 0.01 * 4 * 0.9
    assert run.training.steps_per_epoch is None
