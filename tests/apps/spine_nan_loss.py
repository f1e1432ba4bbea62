import torch

from spine_common import mse, tiny_app

calls = {"n": 0}


def exploding_loss(model, batch):
    calls["n"] += 1
    loss = mse(model, batch)
    if calls["n"] >= 3:
        loss = loss * torch.tensor(float("nan"))
    return loss


def app():
    return tiny_app(loss=exploding_loss)
