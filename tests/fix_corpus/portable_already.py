"""A script that already falls back to the CPU, with unguarded calls that torch.cuda
tolerates without CUDA (empty_cache, memory_allocated) and seeding of both generators.

Runs on the CPU before the fix: yes; the fixed script must print the same.
"""
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train():
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    data = TensorDataset(torch.randn(64, 10), torch.randint(0, 3, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2,
                        generator=torch.Generator().manual_seed(0))
    model = torch.nn.Linear(10, 3).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for features, labels in loader:
        features, labels = features.to(device), labels.to(device)
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    torch.cuda.empty_cache()
    used = torch.cuda.memory_allocated()
    print(f"loss {loss.item():.6f} used_bytes_known {used >= 0}")


if __name__ == "__main__":
    train()
