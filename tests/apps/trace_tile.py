"""TR106: 100 features, not a multiple of 128."""
import torch
from torch import nn

from trace_common import make_app

WIDTH = 100


def model():
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))  # the odd layers


def data():
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(8, WIDTH, generator=generator), torch.randn(8, WIDTH, generator=generator)) for _ in range(4)]


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)  # the misaligned matmuls


def app():
    return make_app(loss, model=model, data=data)
