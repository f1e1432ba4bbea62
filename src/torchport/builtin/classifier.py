"""builtin:classifier: a small MLP classifier on random features.

Labels come from a fixed random linear "teacher", so the task is learnable and
accuracy means something.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import torchport

FEATURES, HIDDEN, CLASSES = 128, 1024, 128
BATCH, BATCHES = 64, 32


def _dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(1234)
    features = torch.randn(BATCH * BATCHES, FEATURES, generator=generator)
    teacher = torch.randn(FEATURES, CLASSES, generator=generator)
    labels = (features @ teacher).argmax(dim=1)
    return TensorDataset(features, labels)


def model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, CLASSES),
    )


def loss(net: nn.Module, batch) -> torch.Tensor:
    features, labels = batch
    return nn.functional.cross_entropy(net(features), labels)


def accuracy(net: nn.Module, batch) -> float:
    features, labels = batch
    return (net(features).argmax(dim=1) == labels).float().mean().item()


def app() -> torchport.App:
    return torchport.App(
        name="classifier",
        description=f"MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}, batch {BATCH}, random features",
        model=model,
        data=lambda: DataLoader(_dataset(), batch_size=BATCH, shuffle=False, drop_last=True),
        loss=loss,
        optimizer=lambda net: torch.optim.AdamW(net.parameters(), lr=1e-3),
        metric=accuracy,
        metric_name="accuracy",
        predict=lambda net, batch: net(batch[0]),
    )
