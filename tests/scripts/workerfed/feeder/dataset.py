import torch
from torch.utils.data import Dataset


class NoisyLine(Dataset):
    """y = x . w + noise, one sample per index."""

    def __init__(self, size):
        self.size = size
        self.weights = torch.linspace(-1.0, 1.0, 8)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        features = torch.randn(8, generator=generator)
        if torch.cuda.is_available():
            features = features.pin_memory()
        target = (features * self.weights).sum(0, keepdim=True) + 0.01 * torch.randn(1, generator=generator)
        return features, target


def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    torch.cuda.manual_seed_all(seed)
