"""Planted: the forward clips its input only when the batch holds an
outlier, a branch on the data.  The ranks of a distributed run each see half
the batch, so one rank takes the branch and the other does not: the ranks
run different ops and the distributed check must name the line where they
part."""
import torch
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app

OUTLIER = 2.5


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU())
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        if bool((x.abs() > OUTLIER).any()):
            x = torch.tanh(x) * OUTLIER  # planted: a branch on this process's slice of the batch
        return self.head(self.body(x))


def app():
    return make_app("planted-data-branch", Classifier)
