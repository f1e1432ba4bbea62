"""TR106 at its cause: the constructor calls that fixed odd layer sizes
(37 hidden units: not a multiple of the 128-wide TPU tile)."""
import torch
from torch import nn

from trace_common import make_app


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(128, 37)  # the first odd layer
        self.down = nn.Linear(37, 128)  # the second odd layer

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))  # the step line


def model():
    torch.manual_seed(0)
    return Net()


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)


def app():
    return make_app(loss, model=model)
