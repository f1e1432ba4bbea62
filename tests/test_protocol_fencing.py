"""Fencing: the protocol must time the device's work, not the host's
enqueueing, and must not synchronize inside a timed block.

The device here is a deliberate stand-in, an asynchronous queue served by a
thread (the protocol is what is under test): each step enqueues 20 ms of
"device work" and returns at once, as a CUDA kernel launch does.
"""
import queue
import threading
import time

import pytest

from torchport.backends.cpu import CPU
from torchport.protocol import ProtocolConfig, Scenario, run_phases
from torchport.records import ScenarioSamples

DEVICE_WORK_S = 0.02


class AsyncQueueBackend(CPU):
    name = ""  # not registered: exists only in this test

    def __init__(self):
        super().__init__()
        self.events = []
        self.work = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            seconds = self.work.get()
            time.sleep(seconds)
            self.work.task_done()

    def launch(self):
        self.events.append("step")
        self.work.put(DEVICE_WORK_S)

    def synchronize(self):
        self.events.append("sync")
        self.work.join()


@pytest.fixture
def run_with_async_device():
    backend = AsyncQueueBackend()

    def step():
        backend.launch()
        return 0.0, 0.0, 1, None

    config = ProtocolConfig(steps=6, blocks=3, max_warmup_steps=6, inference=False)
    record = ScenarioSamples(key_order=())
    run_phases(Scenario("training", step, backend, None), config, backend, lambda *a, **k: None, record, lambda: None)
    return backend, record


def test_blocks_time_the_device_work(run_with_async_device):
    _, record = run_with_async_device
    per_step = record.measured().step_times()
    # Launching takes microseconds; only waiting at the fence makes a step cost 20 ms.
    assert min(per_step) >= DEVICE_WORK_S * 0.95


def test_no_synchronization_inside_a_block(run_with_async_device):
    backend, record = run_with_async_device
    runs_between_syncs = [len(chunk) for chunk in "".join("s" if e == "step" else "|" for e in backend.events).split("|")]
    expected_block = record.measured().block_steps
    # One sync closes every block: first step (1), warm-up blocks, sustained blocks.
    assert runs_between_syncs[0] == 1
    assert all(length == expected_block for length in runs_between_syncs[1:-1])
    assert backend.events.count("sync") == 1 + len(record.warmup.blocks) + len(record.measured().blocks)
