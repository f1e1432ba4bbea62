"""A regression trainer whose batches are built in DataLoader worker
processes: the Dataset, the collate_fn and the worker_init_fn live in the
package ``feeder`` and each has a CUDA call of its own, so their lines run
only in the workers (fork or spawn, --start-method)."""
import argparse

import torch
from torch.utils.data import DataLoader

from feeder.batching import stack_pairs
from feeder.dataset import NoisyLine, seed_worker


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--start-method", choices=("fork", "spawn"), default="fork")
    parser.add_argument("--steps", type=int, default=100000)
    args = parser.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(NoisyLine(4096), batch_size=32, shuffle=True, num_workers=args.workers,
                        collate_fn=stack_pairs, worker_init_fn=seed_worker,
                        multiprocessing_context=args.start_method if args.workers else None)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while step < args.steps:
        for features, targets in loader:
            features, targets = features.to(args.device), targets.to(args.device)
            loss = torch.nn.functional.mse_loss(model(features), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
