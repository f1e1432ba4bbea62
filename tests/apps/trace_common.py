"""Shared pieces of the trace test apps: a model and data with every dimension a
multiple of the TPU tile (128 features, batch 8), so that an app shows only
the one finding it was written for."""
import torch
from torch import nn

import torchport

FEATURES, BATCH, BATCHES = 128, 8, 4


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.ReLU(), nn.Linear(FEATURES, FEATURES))


def batches(count: int = BATCHES, batch: int = BATCH) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, FEATURES, generator=generator), torch.randn(batch, FEATURES, generator=generator))
            for _ in range(count)]


def make_app(loss, model=model, data=batches) -> torchport.App:
    return torchport.App(model=model, data=data, loss=loss,
                         optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.01))
