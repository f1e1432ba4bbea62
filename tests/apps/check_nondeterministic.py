"""A nondeterministic app: the data factory draws noise from the operating
system's entropy, which no seed controls, so two identical runs differ."""
import random

import torch
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 16, 4, 8, 4


def batches():
    entropy = random.SystemRandom()
    generator = torch.Generator().manual_seed(entropy.randrange(2 ** 31))
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCHES, BATCH), generator=generator)
    return list(zip(features.unbind(0), labels.unbind(0)))


def app() -> torchport.App:
    return torchport.App(
        name="check-nondeterministic",
        model=lambda: nn.Linear(FEATURES, CLASSES),
        data=batches,
        loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
