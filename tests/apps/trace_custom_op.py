"""TR108: a custom op with a CPU kernel only."""
import torch
from torch import nn

from trace_common import make_app


@torch.library.custom_op("torchport_test::halve", mutates_args=(), device_types="cpu")
def halve(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5


def loss(net, batch):
    features, target = batch
    target = halve(target)  # the custom op
    return nn.functional.mse_loss(net(features), target)


def app():
    return make_app(loss)
