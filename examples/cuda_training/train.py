"""Train a small ResNet-style classifier, the way most CUDA training scripts do it.

This script is deliberately written for NVIDIA GPUs only: it is torchport's
example of CUDA lock-in.  `torchport scan examples/cuda_training` lists what
breaks on other accelerators, and `torchport fix --write examples/cuda_training`
rewrites the mechanical parts so that it also runs on TPU, Trainium, XPU, MPS
or the CPU.  The data is synthetic, so nothing is downloaded.

    python train.py --epochs 2                         # one GPU
    torchrun --nproc-per-node 8 train.py --epochs 90   # one node, DDP
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

try:
    import pynvml  # GPU utilisation in the logs, when available
except ImportError:
    pynvml = None


def parse_args():
    parser = argparse.ArgumentParser(description="ResNet-style training on synthetic images")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--no-amp", dest="amp", action="store_false", help="train in float32")
    parser.add_argument("--checkpoint", default=None, help="save the final weights here")
    return parser.parse_args()


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class ResNetSmall(nn.Module):
    def __init__(self, num_classes=10, width=32):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        self.layers = nn.Sequential(Block(width), Block(width), nn.MaxPool2d(2), Block(width))
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def synthetic_dataset(samples, seed):
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(samples, 3, 32, 32, generator=generator)
    # The label is the brightest colour channel, so there is something to learn.
    labels = images.mean(dim=(2, 3)).argmax(dim=1)
    return TensorDataset(images, labels)


def main():
    args = parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    distributed = world_size > 1
    if distributed:
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)

    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    torch.backends.cudnn.benchmark = True

    if torch.cuda.is_available():
        print(f"training on {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")

    dataset = synthetic_dataset(args.batch_size * args.steps_per_epoch, args.seed)
    sampler = DistributedSampler(dataset) if distributed else None
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=sampler is None,
                        sampler=sampler, num_workers=args.workers, pin_memory=True, drop_last=True)

    model = ResNetSmall().cuda()
    if distributed:
        model = DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.epochs * len(loader))
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)

    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        start = time.perf_counter()
        for step, (images, labels) in enumerate(loader):
            images = images.cuda(non_blocking=True)
            labels = labels.cuda(non_blocking=True)
            with torch.cuda.amp.autocast(enabled=args.amp):
                loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            if step % args.log_interval == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        print(f"epoch {epoch} done in {elapsed:.2f}s "
              f"({len(loader) * args.batch_size / elapsed:.0f} images/s)")

    if torch.cuda.is_available():
        print(f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    if pynvml is not None and torch.cuda.is_available():
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(local_rank)
        print(f"GPU utilisation {pynvml.nvmlDeviceGetUtilizationRates(handle).gpu}%")
    if args.checkpoint and (not distributed or dist.get_rank() == 0):
        torch.save(model.state_dict(), args.checkpoint)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
