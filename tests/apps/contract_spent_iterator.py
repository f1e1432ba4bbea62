"""The app contract: a data factory that returns the same iterator on every
call (spent after one epoch)."""
from torch import nn

import torchport
from trace_common import batches, model

BATCHES = iter(batches(8))


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)


def app():
    return torchport.App(model=model, loss=loss, optimizer=lambda net: __import__("torch").optim.SGD(net.parameters(), lr=0.01),
                         data=lambda: BATCHES)  # the spent iterator
