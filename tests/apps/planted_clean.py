"""The clean control: a LayerNorm MLP with dropout, AdamW, a pinned
DataLoader with workers; nothing planted.  Every applicable check passes on
every backend."""
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.LayerNorm(HIDDEN), nn.GELU(), nn.Dropout(0.0))
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.head(self.body(x))


def app():
    return make_app("planted-clean", Classifier)
