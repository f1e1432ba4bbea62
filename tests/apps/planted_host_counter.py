"""Planted: a label-smoothing schedule kept in a tensor the app builds on the
host (no device), read with ``.item()`` every step, beside a real host read
of the loss for logging.  Only the loss read waits for the device: the trace
must report TR101 at the logging line and not at the schedule's."""
import torch
from torch import nn

from planted_common import SmallClassifier as Classifier, make_app

SCHEDULE = 10


class SmoothedLoss:
    def __init__(self) -> None:
        self.steps = 0
        self.history: list[float] = []

    def __call__(self, net, batch):
        features, labels = batch
        smoothing = torch.linspace(0.0, 0.1, SCHEDULE)[min(self.steps, SCHEDULE - 1)].item()  # host schedule
        self.steps += 1
        loss = nn.functional.cross_entropy(net(features), labels, label_smoothing=smoothing)
        self.history.append(loss.item())  # planted: the device read
        return loss


def app():
    return make_app("planted-host-counter", Classifier, loss=SmoothedLoss())
