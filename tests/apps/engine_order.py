"""An app whose factory draws random numbers (its dataset) and that records,
for the engine test, its model's initial parameters and its first loss.

Each build appends one JSON line to the file named by ENGINE_ORDER_RECORD:
{"parameters": sha256 of the initial parameters, "first_loss": float.hex()}.
"""
import hashlib
import json
import os

import torch
from torch import nn

import torchport


def _record(**values):
    with open(os.environ["ENGINE_ORDER_RECORD"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(values) + "\n")


def app():
    # Drawn when the app is made, from whatever the generator holds then: the
    # same data in every job only if every job seeds before it imports the app.
    features, targets = torch.randn(64, 8), torch.randn(64, 1)
    state = {"digest": None, "first_loss_seen": False}

    def model():
        net = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.25), nn.Linear(16, 1))
        state["digest"] = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()
        state["first_loss_seen"] = False
        return net

    def data():
        return [(features[i:i + 16], targets[i:i + 16]) for i in range(0, 64, 16)]

    def loss(net, batch):
        x, y = batch
        value = nn.functional.mse_loss(net(x), y)
        if not state["first_loss_seen"]:
            state["first_loss_seen"] = True
            _record(parameters=state["digest"], first_loss=float(value.detach()).hex())
        return value

    return torchport.App(name="engine-order", model=model, data=data, loss=loss,
                         optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1))
