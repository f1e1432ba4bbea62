"""Planted: the forward runs under CPU autocast (bfloat16) and casts the
activation back with ``.float()`` before the head, as mixed-precision code
does.  The app is correct; the float64 reference must honour its casts."""
import torch
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU())
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = self.body(x)
        return self.head(self.norm(hidden.float()))


def app():
    return make_app("planted-autocast-cast", Classifier)
