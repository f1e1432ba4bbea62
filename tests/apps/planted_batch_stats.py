"""Planted: the forward standardises its hidden features by the batch's own
mean and standard deviation (a hand-written batch normalisation without
running statistics).  Under DistributedDataParallel each rank uses its half
of the batch, one process the whole batch, so the distributed check fails;
its reason must name this line as the likely cause."""
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class BatchStandardised(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(FEATURES, HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        hidden = self.body(x)
        hidden = (hidden - hidden.mean(0, keepdim=True)) / (hidden.std(0, keepdim=True) + 1e-5)  # planted
        return self.head(hidden.relu())


def app():
    return make_app("planted-batch-stats", BatchStandardised)
