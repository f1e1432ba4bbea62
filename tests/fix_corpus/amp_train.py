"""Mixed-precision training written for CUDA: torch.cuda.amp autocast and
GradScaler, a device string, AdamW, a pinned DataLoader with workers.

Runs on the CPU before the fix: no (the tensors are moved to "cuda").
"""
import torch
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda"


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16, num_workers=2, pin_memory=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1)).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = GradScaler()
    for features, targets in loader:
        features = features.to(DEVICE, non_blocking=True)
        targets = targets.to(DEVICE, non_blocking=True)
        optimizer.zero_grad()
        with autocast():
            loss = torch.nn.functional.mse_loss(model(features), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    print(f"finite {bool(torch.isfinite(loss).item())}")


if __name__ == "__main__":
    main()
