"""TR106 at its cause inside a library: torch's TransformerEncoderLayer builds
its projections with d_model=100 (not a multiple of 128); the finding names the
library's line and the user's call that reached it."""
import torch
from torch import nn

from trace_common import make_app

WIDTH = 100


def model():
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(d_model=WIDTH, nhead=4, dim_feedforward=WIDTH, batch_first=True)  # the library call


def data():
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 16, WIDTH, generator=generator), torch.randn(8, 16, WIDTH, generator=generator))
            for _ in range(4)]


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)  # the step line


def app():
    return make_app(loss, model=model, data=data)
