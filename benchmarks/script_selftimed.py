"""A training script that can time itself, for benchmarks/bench_script.py.

Run plainly with --self-timed WARMUP,BLOCKS,PER_BLOCK it times its own
sustained steps in blocks (taking turns with a paired process between
blocks, as benchmarks/bench_loop.py's hand-written loop does) and prints the
seconds per step of each block.  Under `torchport evaluate --script` it runs
without that flag and torchport does the timing.
"""
import argparse
import json
import time

import torch
from torch import nn

from torchport.turns import take_turn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", default="false")
    parser.add_argument("--self-timed", default=None, metavar="WARMUP,BLOCKS,PER_BLOCK")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(device)
    forward = torch.compile(model) if args.compile == "true" else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(128, 256, generator=generator), torch.randint(0, 10, (128,), generator=generator))
               for _ in range(16)]

    def step(index):
        x, y = batches[index % len(batches)]
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(forward(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    if args.self_timed is None:  # torchport times it: just train
        for index in range(10**9):
            step(index)
    warmup, blocks, per_block = map(int, args.self_timed.split(","))
    index = 0
    step(index)  # the first step runs freely, as under torchport
    index += 1
    times = []
    for _block in range(warmup // per_block + blocks):
        take_turn()
        started = time.perf_counter()
        for _ in range(per_block):
            step(index)
            index += 1
        times.append((time.perf_counter() - started) / per_block)
    take_turn()
    print(json.dumps(times[warmup // per_block:]))


if __name__ == "__main__":
    main()
