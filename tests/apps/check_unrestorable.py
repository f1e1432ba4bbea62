"""Planted non-restorable state: a running scale held as a plain tensor
attribute, not a registered buffer, so ``state_dict()`` never sees it.  It
changes every step and shapes the output, so a run resumed from a checkpoint
starts it again from 1 and trains differently.  Checkpoint portability must
fail and name ``0.scale``.
"""
import torch
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 16, 4, 8, 8


class DriftingScale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.ones(1)  # should have been self.register_buffer("scale", torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.scale.mul_(1.25)
        return x * self.scale


def model() -> nn.Module:
    return nn.Sequential(DriftingScale(), nn.Linear(FEATURES, CLASSES))


def batches():
    generator = torch.Generator().manual_seed(11)
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCHES, BATCH), generator=generator)
    return list(zip(features.unbind(0), labels.unbind(0)))


def app() -> torchport.App:
    return torchport.App(
        name="check-unrestorable",
        model=model,
        data=batches,
        loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
