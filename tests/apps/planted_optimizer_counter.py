"""Planted: an AdamW subclass keeps its own warm-up counter as a plain
attribute and scales the learning rate by it; ``state_dict()`` of the
optimizer does not carry it, so a resumed run warms up again.  Checkpoint
portability fails and names ``optimizer.warmup_steps_done`` at its line."""
import torch
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class WarmupAdamW(torch.optim.AdamW):
    def __init__(self, params, lr: float, warmup: int = 8) -> None:
        super().__init__(params, lr=lr, weight_decay=0.01)
        self.base_lr = lr
        self.warmup = warmup
        self.warmup_steps_done = 0  # planted

    def step(self, closure=None):
        self.warmup_steps_done += 1
        for group in self.param_groups:
            group["lr"] = self.base_lr * min(1.0, self.warmup_steps_done / self.warmup)
        return super().step(closure)


def model():
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def app():
    return make_app("planted-optimizer-counter", model, optimizer=lambda net: WarmupAdamW(net.parameters(), lr=1e-2))
