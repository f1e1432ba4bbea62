"""Small apps for the fault-injection suite (tests/test_faults.py).

Each fault app is this tiny classifier with one thing wrong, switched on by
the environment variable FAULT (so one file serves many cases) and usually
only on one backend: what does not run where is a result, not the end.
"""
import os

import torch
from torch import nn

import torchport

FAULT = os.environ.get("FAULT", "")


def compiled(net) -> bool:
    return isinstance(net, torch._dynamo.eval_frame.OptimizedModule)


def batches():
    generator = torch.Generator().manual_seed(3)
    return [(torch.randn(8, 16, generator=generator), torch.randint(0, 4, (8,), generator=generator))
            for _ in range(4)]


def make(loss, name="fault", model=None, data=batches):
    return torchport.App(
        name=name,
        model=model or (lambda: nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))),
        data=data,
        loss=loss,
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.05),
    )


def plain_loss(net, batch):
    return nn.functional.cross_entropy(net(batch[0]), batch[1])
