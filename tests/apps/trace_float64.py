"""TR105: float64 in the step."""
import torch
from torch import nn

from trace_common import make_app


def loss(net, batch):
    features, target = batch
    value = nn.functional.mse_loss(net(features), target)
    weight = torch.ones(4, dtype=torch.float64, device=features.device).sum()  # the float64
    return value * weight.to(torch.float32)


def app():
    return make_app(loss)
