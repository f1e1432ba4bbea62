"""Planted: mixed precision written for one device, ``torch.autocast("cuda")``
hard-coded in the forward.  Elsewhere autocast is silently off (a warning,
then float32): the app runs, but not as written.  The trace alone sees
nothing wrong; evaluate's trace section must carry scan's finding for this
line, with scan's rule id, and no target may read "runs as is"."""
import torch
from torch import nn

from planted_common import CLASSES, FEATURES, HIDDEN, make_app


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU())
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.float16, enabled=torch.cuda.is_available()):  # planted
            hidden = self.body(x)
        return self.head(hidden.float())


def app():
    return make_app("planted-autocast-cuda", Classifier)
