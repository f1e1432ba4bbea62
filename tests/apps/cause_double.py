"""TR105 at its causes: the model factory makes the model float64 with
.double(), the data factory makes float64 batches from numpy arrays (numpy's
default dtype); the step only computes on them."""
import numpy
import torch
from torch import nn

from trace_common import FEATURES, make_app


def model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.ReLU(), nn.Linear(FEATURES, FEATURES))
    return net.double()  # the double


def data():
    rng = numpy.random.default_rng(1)
    arrays = [rng.standard_normal((2, 8, FEATURES)) for _ in range(4)]
    return [tuple(torch.from_numpy(pair)) for pair in arrays]  # the float64 data


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)  # the step line


def app():
    return make_app(loss, model=model, data=data)
