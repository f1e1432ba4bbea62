"""Planted: a running mean of the features kept as a buffer registered with
``persistent=False`` and used to centre the input, so ``state_dict()`` leaves
it out.  A run resumed from a checkpoint starts the mean again from zero:
checkpoint portability fails and names ``centre.running_mean`` at its line."""
import torch
from torch import nn

from planted_common import FEATURES, behind, make_app


class Centre(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(FEATURES), persistent=False)  # planted

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                self.running_mean.mul_(0.5).add_(x.mean(0), alpha=0.5)
        return x - self.running_mean


def model():
    return behind("centre", Centre(), nn.ReLU())


def app():
    return make_app("planted-nonpersistent-buffer", model)
