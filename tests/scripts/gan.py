"""A GAN-style script: two optimizers stepped in turn each iteration; the
device comes from --device."""
import argparse

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--compile", type=int, default=0)
    args = parser.parse_args()
    device = torch.device(args.device)
    generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16)).to(device)
    discriminator = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    if args.compile:
        generator, discriminator = torch.compile(generator), torch.compile(discriminator)
    g_opt = torch.optim.Adam(generator.parameters(), lr=1e-3)
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    for _ in range(args.iterations):
        real = torch.randn(32, 16).to(device)
        fake = generator(torch.randn(32, 8).to(device))
        d_loss = bce(discriminator(real), torch.ones(32, 1, device=device)) + \
            bce(discriminator(fake.detach()), torch.zeros(32, 1, device=device))
        d_opt.zero_grad()
        d_loss.backward()
        d_opt.step()
        g_loss = bce(discriminator(fake), torch.ones(32, 1, device=device))
        g_opt.zero_grad()
        g_loss.backward()
        g_opt.step()


if __name__ == "__main__":
    main()
