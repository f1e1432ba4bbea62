"""TR101: .item() inside the step."""
from torch import nn

from trace_common import make_app


def loss(net, batch):
    features, target = batch
    value = nn.functional.mse_loss(net(features), target)
    if value.item() > 1e6:  # the host sync
        raise RuntimeError("diverged")
    return value


def app():
    return make_app(loss)
