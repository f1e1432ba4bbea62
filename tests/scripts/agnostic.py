"""A device-agnostic training script, as users write them: the device and
torch.compile come from its flags, so configuration alone ports it."""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", default="false")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--optimizer", choices=["adam", "adamw"], default="adamw")
    args = parser.parse_args()
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 32, generator=generator), torch.randint(0, 4, (256,), generator=generator))
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=args.workers, pin_memory=True)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    if args.compile == "true":
        model = torch.compile(model)
    optimizer = (torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW)(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
