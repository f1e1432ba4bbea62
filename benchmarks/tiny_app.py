"""A step that costs almost nothing (a Linear(8, 1) on 16 samples, SGD), so that
the difference between torchport's loop and a hand-written one is the
harness's own fixed cost per step, in microseconds:

    python benchmarks/bench_loop.py --apps benchmarks/tiny_app.py --backends cpu
"""
import torch
from torch import nn

import torchport


def app() -> torchport.App:
    generator = torch.Generator().manual_seed(0)
    batches = [(torch.randn(16, 8, generator=generator), torch.randn(16, 1, generator=generator)) for _ in range(8)]
    return torchport.App(
        name="tiny",
        model=lambda: nn.Linear(8, 1),
        data=lambda: batches,
        loss=lambda model, batch: nn.functional.mse_loss(model(batch[0]), batch[1]),
        optimizer=lambda model: torch.optim.SGD(model.parameters(), lr=0.01),
    )
