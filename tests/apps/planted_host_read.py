"""Planted: the forward reads a value back to the host (``.item()``) to
decide a clipping bound, as code that logs or branches on a statistic does.
On a lazy backend that read cuts the step graph in two: the trace finds it
(TR101 at its line), and its XLA prediction counts the extra graph, so it
matches the xla run's measured compilations."""
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU())
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        hidden = self.body(x)
        bound = 0.9 * hidden.abs().max().item()  # planted: a host read inside the step
        return self.head(hidden.clamp(max=bound))


def app():
    return make_app("planted-host-read", Classifier)
