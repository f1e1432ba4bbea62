"""TR103 at its cause: a DataLoader whose drop_last=False leaves a partial last
batch (100 samples in batches of 32: the last has 4)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trace_common import FEATURES, make_app


def data():
    generator = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(100, FEATURES, generator=generator), torch.randn(100, FEATURES, generator=generator))
    return DataLoader(dataset, batch_size=32)  # the DataLoader


def loss(net, batch):
    features, target = batch
    return nn.functional.mse_loss(net(features), target)


def app():
    return make_app(loss, data=data)
