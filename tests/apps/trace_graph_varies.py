"""TR104: a branch taken every other step: the step's graph changes with the same shapes."""
from torch import nn

from trace_common import make_app

calls = {"n": 0}


def loss(net, batch):
    features, target = batch
    calls["n"] += 1
    out = net(features)
    if calls["n"] % 2 == 0:
        out = out * 2.0  # the changing graph
    return nn.functional.mse_loss(out, target)


def app():
    return make_app(loss)
