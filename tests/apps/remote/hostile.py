"""An app whose failure message is hostile to a terminal: escape sequences
that would retitle the window, recolour and clear it, a bidi override, and one
very long line.  Output from a remote is data: it must arrive escaped and capped."""
import torch
from torch import nn

import torchport

HOSTILE = "\x1b]0;pwned\x07\x1b[31mred\x1b[2J\u202eevil" + "A" * 5000


def hostile_model():
    raise RuntimeError(HOSTILE)


def batches():
    return [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(4)]


def app():
    return torchport.App(name="hostile", model=hostile_model, data=batches,
                         loss=lambda model, batch: nn.functional.mse_loss(model(batch[0]), batch[1]),
                         optimizer=lambda model: torch.optim.AdamW(model.parameters()))
