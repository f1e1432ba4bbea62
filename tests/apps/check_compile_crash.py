"""An app whose loss fails only when handed a torch.compile'd model: eager it
trains fine.

When cpu-compile's worker also makes the eager cpu reference runs, its crash
must not become the reference's: the reference then runs in a cpu worker of
its own, and only cpu-compile's checks fail.
"""
import torch
from torch import nn

import torchport


def loss(net: nn.Module, batch) -> torch.Tensor:
    if isinstance(net, torch._dynamo.eval_frame.OptimizedModule):
        raise RuntimeError("planted: this app does not run compiled")
    return nn.functional.cross_entropy(net(batch[0]), batch[1])


def batches():
    generator = torch.Generator().manual_seed(3)
    return [(torch.randn(4, 8, generator=generator), torch.randint(0, 2, (4,), generator=generator))
            for _ in range(4)]


def app() -> torchport.App:
    return torchport.App(
        name="check-compile-crash",
        model=lambda: nn.Linear(8, 2),
        data=batches,
        loss=loss,
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
