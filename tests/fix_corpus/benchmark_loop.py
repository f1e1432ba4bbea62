"""A benchmark script: timed steps with synchronize(), peak memory statistics,
the cache emptied between runs.

Runs on the CPU before the fix: no (synchronize() raises without CUDA).
"""
import argparse
import time

import torch


def step(model, batch):
    return model(batch).sum()


def bench(model, batch, steps):
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        out = step(model, batch)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    peak_mib = torch.cuda.max_memory_allocated() / 2**20
    torch.cuda.empty_cache()
    return out, elapsed, peak_mib


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64).to(args.device)
    batch = torch.randn(16, 64, device=args.device)
    out, elapsed, peak_mib = bench(model, batch, args.steps)
    print(f"out {out.item():.4f} steps {args.steps} timed {elapsed >= 0} peak_mib>=0 {peak_mib >= 0}")


if __name__ == "__main__":
    main()
