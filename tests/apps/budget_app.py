"""Test app for the time budget and the worker's memory.

* ``app``: a small matmul step (about a millisecond), whose first step sleeps
  ``SLOW_FIRST_STEP_S`` on the backend named by ``TORCHPORT_TEST_SLOW_BACKEND``
  (a stand-in for a long compilation that no budget share can hold);
* ``big_outputs``: its forward-only scenario returns 64 MiB per call, so a
  worker that kept a block of outputs alive would show it in its peak.
"""
import os
import time

import torch
from torch import nn

import torchport

SLOW_FIRST_STEP_S = 40.0
OUTPUT_FLOATS = 16 * 2**20  # 64 MiB of float32


def _batches():
    generator = torch.Generator().manual_seed(0)
    return [(torch.randn(64, 256, generator=generator), torch.randn(64, 256, generator=generator)) for _ in range(4)]


def app() -> torchport.App:
    slow_on = os.environ.get("TORCHPORT_TEST_SLOW_BACKEND")
    state = {"first": True}

    def loss(model, batch):
        if state["first"] and os.environ.get("TORCHPORT_BACKEND") == slow_on:
            time.sleep(SLOW_FIRST_STEP_S)
        state["first"] = False
        return nn.functional.mse_loss(model(batch[0]), batch[1])

    return torchport.App(name="budget", model=lambda: nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256)),
                         data=_batches, loss=loss, optimizer=lambda model: torch.optim.SGD(model.parameters(), lr=0.01))


def big_outputs() -> torchport.App:
    def predict(model, batch):
        return torch.ones(OUTPUT_FLOATS) * model(batch[0]).mean()  # every page touched

    return torchport.App(name="big-outputs", model=lambda: nn.Linear(256, 256), data=_batches,
                         loss=lambda model, batch: nn.functional.mse_loss(model(batch[0]), batch[1]),
                         optimizer=lambda model: torch.optim.SGD(model.parameters(), lr=0.01), predict=predict)
