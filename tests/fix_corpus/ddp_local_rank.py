"""A torchrun-style DDP script: rank and local rank from the environment, the
device built from the local rank, the model moved with .cuda(device).

Runs on the CPU before the fix: no (NCCL and .cuda()).
"""
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup():
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(local_rank)
    return local_rank


def main():
    local_rank = setup()
    torch.manual_seed(0)
    device = torch.device("cuda", local_rank)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model = model.cuda(device)
    ddp = DDP(model, device_ids=[local_rank], output_device=local_rank)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    inputs = torch.randn(32, 8).cuda(local_rank, non_blocking=True)
    targets = torch.randn(32, 1).cuda(local_rank)
    for _ in range(5):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
    total = loss.detach().clone()
    dist.all_reduce(total)
    print(f"loss {total.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
