"""A deliberately bad app for XLA: the loss reads its own value with ``.item()``.

A guard like ``if not math.isfinite(loss.item())`` looks free, but on a lazy
backend it forces the graph built so far to run and copies the value to the
host in the middle of every step (``aten::_local_scalar_dense``).  The report
must show that host sync.
"""
import math

import torch
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 32, 4, 16, 16


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(11)
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = (features[..., 0] > 0).long() + 2 * (features[..., 1] > 0).long()
    return list(zip(features.unbind(0), labels.unbind(0)))


def loss(net: nn.Module, batch) -> torch.Tensor:
    features, labels = batch
    value = nn.functional.cross_entropy(net(features), labels)
    if not math.isfinite(value.item()):  # the host sync this app is here to show
        raise FloatingPointError("loss is not finite")
    return value


def app() -> torchport.App:
    return torchport.App(
        name="item_in_loss",
        description="MLP classifier whose loss checks itself with .item() on every step",
        model=lambda: nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES)),
        data=_batches,
        loss=loss,
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.05),
    )
