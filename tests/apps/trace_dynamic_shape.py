"""TR102: boolean-mask indexing, whose output shape depends on the data."""

from trace_common import make_app


def loss(net, batch):
    features, target = batch
    error = (net(features) - target) ** 2
    return error[target > 0].mean()  # the data-dependent shape


def app():
    return make_app(loss)
