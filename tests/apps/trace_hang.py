"""The second step never ends: --timeout must stop it and keep step 1."""
import time

from torch import nn

from trace_common import make_app

calls = {"n": 0}


def loss(net, batch):
    features, target = batch
    calls["n"] += 1
    if calls["n"] == 2:
        time.sleep(3600)  # the hang
    return nn.functional.mse_loss(net(features), target)


def app():
    return make_app(loss)
