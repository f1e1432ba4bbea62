"""A planted numerical bug that exists only under torch.compile.

``ScaledResidual`` adds a 1% bias when it is being compiled: correct in eager
mode, wrong on cpu-compile.  Parity on cpu-compile must fail and name
``body.1`` (the ScaledResidual instance) as the first diverging module.
"""
import torch
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 16, 4, 8, 4


class ScaledResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEATURES, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x + self.linear(x)
        if torch.compiler.is_compiling():
            out = out + 0.01 * out.abs().mean()  # the planted bug
        return out


def model() -> nn.Module:
    return nn.Sequential(nn.Sequential(nn.Linear(FEATURES, FEATURES), ScaledResidual(), nn.Tanh()),
                         nn.Linear(FEATURES, CLASSES))


def batches():
    generator = torch.Generator().manual_seed(7)
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCHES, BATCH), generator=generator)
    return list(zip(features.unbind(0), labels.unbind(0)))


def app() -> torchport.App:
    return torchport.App(
        name="check-compile-bug",
        model=model,
        data=batches,
        loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
