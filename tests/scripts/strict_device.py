"""A script that validates its --device itself and knows only CPU and CUDA
device strings (as many do): it cannot run where the device is "xla:0"."""
import argparse
import re

import torch
from torch import nn


def device_type(text):
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"unsupported device {text!r}: use cpu or cuda[:N]")
    return torch.device(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=device_type, default="cpu")
    args = parser.parse_args()
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(100000):
        x = torch.randn(16, 8, generator=generator).to(args.device)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
