"""Rank-dependent control flow: the model's forward takes an extra step on
rank 0 of a distributed run.  One process never takes it, so the ranks' mean
gradient differs from the single process's and the distributed check fails;
its reason must say that the ranks ran different ops, and where they part."""
import torch
import torch.distributed as dist
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 16, 4, 8, 4


class RankBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEATURES, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.linear(x)
        if dist.is_initialized() and dist.get_rank() == 0:
            out = torch.sigmoid(out)  # the planted rank-dependent branch
        return out


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(RankBranch(), nn.Tanh(), nn.Linear(FEATURES, CLASSES))


def batches():
    generator = torch.Generator().manual_seed(7)
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCHES, BATCH), generator=generator)
    return list(zip(features.unbind(0), labels.unbind(0)))


def app() -> torchport.App:
    return torchport.App(
        name="check-rank-branch",
        model=model,
        data=batches,
        loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
