"""A training script that never reaches its first optimizer step: it waits
for a data file that never appears, as a script waiting on a mount or a
download does."""
import os
import time

import torch
from torch import nn


def main():
    model = nn.Linear(8, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    while not os.path.exists("/nonexistent/torchport-data-ready"):
        time.sleep(0.2)
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    optimizer.step()


if __name__ == "__main__":
    main()
