"""Edge cases of script mode, chosen by --case: a script that never steps an
optimizer, one that ends before torchport's budget, one that calls sys.exit,
one whose argument parser rejects what it is given, one that hard-codes CUDA."""
import argparse
import sys
import time

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=["no-step", "short", "exit", "cuda"], required=True)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if args.case == "no-step":
        time.sleep(0.5)
        return
    if args.case == "cuda":
        model = model.cuda()
    steps = 3 if args.case == "short" else 1000
    for step in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.case == "exit" and step == 5:
            sys.exit(0)


if __name__ == "__main__":
    main()
