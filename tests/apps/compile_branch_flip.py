"""A model whose forward branches on its input's values, as user code often does.

Under torch.compile the ``if`` on a tensor is a graph break (Dynamo cannot
trace data-dependent control flow).  The data are built so that the branch
is not taken in steps 1-2 and taken from step 3 to the end of the epoch
(8 batches), and the last batch is partial (no ``drop_last``): the other
branch is compiled only at step 3, and the partial batch recompiles the model
at step 8 (a failed size guard).  Eager backends run it as it is.
"""
import torch
from torch import nn

import torchport

FEATURES, BATCH, PARTIAL = 128, 8, 5


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(FEATURES, FEATURES)
        self.outer = nn.Linear(FEATURES, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.inner(x)
        if x.mean() > 0:  # BRANCH: data-dependent, flips at step 3
            hidden = torch.relu(hidden)
        return self.outer(hidden)


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(3)
    shifts = [-1.0, -1.0] + [1.0] * 6
    sizes = [BATCH] * 7 + [PARTIAL]  # the partial last batch of an epoch
    return [(torch.randn(size, FEATURES, generator=generator) + shift, torch.randn(size, 1, generator=generator))
            for shift, size in zip(shifts, sizes)]


def app() -> torchport.App:
    torch.manual_seed(0)
    return torchport.App(model=Gated, data=batches,
                         loss=lambda net, batch: nn.functional.mse_loss(net(batch[0]), batch[1]),
                         optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.01))
