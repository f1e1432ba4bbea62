"""A launcher whose backend and device come from command-line options defaulting
to "nccl" and "cuda", with the process group's backend kept in a module constant.

Runs on the CPU before the fix: no.
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist

DEFAULT_BACKEND = "nccl"


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=DEFAULT_BACKEND)
    parser.add_argument("--device", default="cuda")
    return parser.parse_args()


def main():
    args = parse()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    value = torch.arange(4, dtype=torch.float32, device=args.device)
    dist.all_reduce(value)
    print(f"sum {value.sum().item():.1f} backend_chosen {dist.get_backend() in ('nccl', 'gloo')}")
    dist.destroy_process_group()
    os.environ.pop("UNUSED", None)


if __name__ == "__main__":
    main()
