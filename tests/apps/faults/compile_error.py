"""A model that the compiler cannot handle while eager PyTorch can: the
forward calls a Python function that Dynamo is told must not be traced with
fullgraph, so torch.compile raises inside Dynamo only on cpu-compile."""
import torch
from common import make, plain_loss
from torch import nn


class Breaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        torch._dynamo.graph_break()
        return self.net(x)


def loss(net, batch):
    if hasattr(net, "_orig_mod") and not getattr(net, "_torchport_fullgraph", False):
        # Recompile the same module with fullgraph=True: the graph break becomes a compile error.
        net = torch.compile(net._orig_mod, fullgraph=True)
    return plain_loss(net, batch)


def app():
    return make(loss, name="compile-error", model=Breaks)
