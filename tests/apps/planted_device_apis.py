"""Planted: device-typed APIs written for CUDA that run while the app is built
and trained, each silent or meaningless elsewhere: a cuDNN flag, a CUDA
GradScaler, a batch size from the CUDA device count, a CUDA autocast in the
forward and a pinned DataLoader.  The trace must report each at its line
under scan's rule id, seen at run time."""
import torch
from torch import nn
from torch.utils.data import DataLoader

from planted_common import CLASSES, FEATURES, HIDDEN, BATCH, adamw, dataset, make_app

torch.backends.cudnn.benchmark = True  # planted: cudnn flag


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU())
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=torch.cuda.is_available()):  # planted: autocast
            hidden = self.body(x)
        return self.head(hidden.float())


def optimizer(net):
    optimizer.scaler = torch.amp.GradScaler("cuda", enabled=torch.cuda.is_available())  # planted: scaler
    return adamw(net)


def data():
    per_device = BATCH // max(1, torch.cuda.device_count())  # planted: device count
    return DataLoader(dataset(), batch_size=per_device, shuffle=False, pin_memory=True)  # planted: pinned


def app():
    return make_app("planted-device-apis", Classifier, data=data, optimizer=optimizer)
