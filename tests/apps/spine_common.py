"""Shared pieces for the spine's purpose-built test apps: a tiny regression task."""
import torch
from torch import nn

import torchport


def batches(count=8, batch=16, features=8):
    generator = torch.Generator().manual_seed(0)
    return [(torch.randn(batch, features, generator=generator), torch.randn(batch, 1, generator=generator))
            for _ in range(count)]


def mse(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def tiny_app(**overrides):
    settings = dict(
        name="tiny",
        model=lambda: nn.Linear(8, 1),
        data=batches,
        loss=mse,
        optimizer=lambda model: torch.optim.SGD(model.parameters(), lr=0.01),
    )
    settings.update(overrides)
    return torchport.App(**settings)
