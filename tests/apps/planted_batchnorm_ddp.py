"""Planted: BatchNorm1d (not SyncBatchNorm) in a model trained under
DistributedDataParallel: each rank normalises its own half of the batch.
The distributed check fails and names the module and the line creating it."""
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(FEATURES, HIDDEN)
        self.norm = nn.BatchNorm1d(HIDDEN)  # planted
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.head(self.norm(self.body(x)).relu())


def app():
    return make_app("planted-batchnorm-ddp", Classifier)
