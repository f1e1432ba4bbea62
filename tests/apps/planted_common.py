"""Shared pieces of the planted-property apps (``planted_*.py``): a small
classifier data set behind a DataLoader with pinned memory and two worker
processes, AdamW, and the app's metric.  Each planted app changes one thing."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import torchport

FEATURES, HIDDEN, CLASSES, BATCH, BATCHES = 16, 32, 4, 8, 6


def dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(7)
    features = torch.randn(BATCH * BATCHES, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCH * BATCHES,), generator=generator)
    return TensorDataset(features, labels)


def loader(collate_fn=None, num_workers=2) -> DataLoader:
    return DataLoader(dataset(), batch_size=BATCH, shuffle=False, num_workers=num_workers, pin_memory=True,
                      persistent_workers=num_workers > 0, collate_fn=collate_fn)


def cross_entropy(net, batch):
    features, labels = batch
    return nn.functional.cross_entropy(net(features), labels)


def accuracy(net, batch) -> float:
    features, labels = batch
    return float((net(features).argmax(-1) == labels).float().mean())


def adamw(net):
    return torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.01)


class SmallClassifier(nn.Module):
    """The shared planted apps' small model (32 wide): a step far shorter than a slow batch."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.LayerNorm(HIDDEN), nn.GELU(), nn.Dropout(0.0))
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.head(self.body(x))


def behind(name: str, first: nn.Module, activation: nn.Module) -> nn.Sequential:
    """A two-layer classifier behind one planted module, added as ``name`` so
    that findings about it read ``name.attribute``."""
    net = nn.Sequential()
    net.add_module(name, first)
    net.add_module("body", nn.Linear(FEATURES, HIDDEN))
    net.add_module("act", activation)
    net.add_module("head", nn.Linear(HIDDEN, CLASSES))
    return net


def make_app(name, model, *, loss=cross_entropy, data=loader, optimizer=adamw) -> torchport.App:
    return torchport.App(name=name, model=model, data=data, loss=loss, optimizer=optimizer, metric=accuracy,
                         predict=lambda net, batch: net(batch[0]))
