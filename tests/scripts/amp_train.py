"""A CUDA-written training script in the style of many public ones: the device
from torch.cuda.is_available(), Adam or AdamW, a DataLoader with pinned memory
and worker processes, mixed precision in the autocast and GradScaler spelling
chosen by --amp (the spellings found in the wild)."""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Regression(Dataset):
    def __init__(self, size=512, features=32):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, features, generator=generator)
        self.y = self.x @ torch.randn(features, 1, generator=generator) + 0.1 * torch.randn(size, 1, generator=generator)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


def autocast_for(style, device):
    if style == "device":  # written for any device: bfloat16 autocast, a GradScaler on the same device
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    if style == "autocast-kw":
        return torch.autocast(device_type="cuda", dtype=torch.float16)
    if style == "autocast-pos":
        return torch.autocast("cuda", dtype=torch.float16)
    if style == "amp":
        return torch.amp.autocast("cuda")
    return torch.cuda.amp.autocast()


def scaler_for(style, device):
    if style == "device":
        return torch.amp.GradScaler(torch.device(device).type)
    if style == "autocast-kw":
        return torch.amp.GradScaler(device="cuda")
    if style == "autocast-pos":
        return torch.amp.GradScaler("cuda")
    if style == "amp":
        return torch.amp.GradScaler()
    return torch.cuda.amp.GradScaler()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp", choices=["autocast-kw", "autocast-pos", "amp", "cuda-amp", "device"], default="autocast-kw")
    parser.add_argument("--optimizer", choices=["adam", "adamw"], default="adamw")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(Regression(), batch_size=32, shuffle=False, num_workers=args.workers, pin_memory=True,
                        persistent_workers=args.workers > 0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
    optimizer_class = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    optimizer = optimizer_class(model.parameters(), lr=1e-3)
    scaler = scaler_for(args.amp, device)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with autocast_for(args.amp, device):
                loss = nn.functional.mse_loss(model(x).float(), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
