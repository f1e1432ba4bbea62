"""A planted bug that exists only under torch.compile and depends on the batch
each process sees: ``BatchScaled`` scales its output by the local batch size
when it is being compiled.  Eager, every rank computes what one process does
(the distributed check passes on cpu); compiled, a rank's half batch is scaled
less than the single process's whole batch, so the compiled ranks diverge from
the compiled single process (the check fails on cpu-compile, and only because
the ranks really ran compiled)."""
import torch
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 16, 4, 8, 4


class BatchScaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEATURES, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.linear(x)
        if torch.compiler.is_compiling():
            out = out * (1 + 0.05 * x.shape[0])  # the planted bug: depends on the local batch
        return out


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(BatchScaled(), nn.Tanh(), nn.Linear(FEATURES, CLASSES))


def batches():
    generator = torch.Generator().manual_seed(7)
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCHES, BATCH), generator=generator)
    return list(zip(features.unbind(0), labels.unbind(0)))


def app() -> torchport.App:
    return torchport.App(
        name="check-compile-bug-ranks",
        model=model,
        data=batches,
        loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
