"""The app contract: a model built in bfloat16 (the README promises float32)."""
import torch

from trace_common import batches, make_app, model


def bf16_model():
    return model().to(torch.bfloat16)  # the bfloat16


def bf16_batches():
    return [tuple(t.to(torch.bfloat16) for t in pair) for pair in batches()]


def loss(net, batch):
    features, target = batch
    return torch.nn.functional.mse_loss(net(features), target)


def app():
    return make_app(loss, model=bf16_model, data=bf16_batches)
