"""A regression app whose loss is torch's Huber loss: aten::huber_loss has no
TorchTPU kernel in torch_tpu 0.2.0, so TorchTPU's backend fallback raises."""
from torch import nn

from trace_common import make_app


def loss(net, batch):
    features, target = batch
    return nn.functional.huber_loss(net(features), target, delta=0.5)  # the op TorchTPU lacks


def app():
    return make_app(loss)
