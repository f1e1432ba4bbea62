"""Planted: a noise-injection layer draws from a ``torch.Generator`` the
module holds; no checkpoint carries its state, so a resumed run draws the
first noise again.  Checkpoint portability fails and names ``noise.generator``
(a generator held by the module) at its line."""
import torch
from torch import nn

from planted_common import behind, make_app


class GaussianNoise(nn.Module):
    def __init__(self, std: float = 0.5) -> None:
        super().__init__()
        self.std = std
        self.generator = torch.Generator().manual_seed(1234)  # planted

    def forward(self, x):
        if not self.training:
            return x
        noise = torch.randn(x.shape, generator=self.generator).to(x.device, x.dtype)
        return x + self.std * noise


def model():
    return behind("noise", GaussianNoise(), nn.Tanh())


def app():
    return make_app("planted-module-generator", model)
