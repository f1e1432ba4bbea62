"""The app contract: an optimizer factory that expects parameters, as
torch.optim does (`lambda params: AdamW(params)`), not the model."""
import torch
from torch import nn

import torchport
from trace_common import batches, model


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)


def app():
    return torchport.App(model=model, data=batches, loss=loss,
                         optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3))
