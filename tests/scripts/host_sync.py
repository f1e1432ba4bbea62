"""A script that reads its loss on the host every step (a host sync on an
accelerator), for script mode's trace."""
import torch
from torch import nn


def main():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _step in range(10**6):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() > 1e6:  # the host sync
            break


if __name__ == "__main__":
    main()
