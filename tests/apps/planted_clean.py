"""The clean control: a LayerNorm MLP with dropout, AdamW, a pinned
DataLoader with workers; nothing planted.  Every applicable check passes on
every backend.

Its hidden layers are wide enough that a training step takes longer than
fetching a batch, as in a real app: the shared planted apps' 32-wide layers
step in under 1 ms on cpu-compile, faster than the DataLoader's two workers
deliver (about 2 ms a batch), which the pipeline check rightly calls
input-bound."""
from torch import nn

from planted_common import CLASSES, FEATURES, make_app

WIDTH = 2048


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, WIDTH), nn.LayerNorm(WIDTH), nn.GELU(), nn.Dropout(0.0),
                                  nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        return self.head(self.body(x))


def app():
    return make_app("planted-clean", Classifier)
