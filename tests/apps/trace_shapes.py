"""TR103: a short last batch (like DataLoader(drop_last=False) with 35 samples in batches of 8)."""
from torch import nn

from trace_common import batches, make_app


def data():  # the varying shapes
    return batches(4) + batches(1, batch=3)


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)


def app():
    return make_app(loss, data=data)
