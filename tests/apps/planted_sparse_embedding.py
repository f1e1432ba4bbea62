"""Planted: a bag-of-tokens classifier whose ``EmbeddingBag`` produces sparse
gradients (``sparse=True``), trained with SGD (which takes them), as
recommendation and text models do.  The gradient is a SparseCPU tensor on the
reference: the trace looks the op up under each target's sparse dispatch key,
and SparseCUDA kernels count for CUDA."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import torchport

VOCAB, WIDTH, CLASSES, BATCH, TOKENS, BATCHES = 64, 16, 4, 8, 6, 6


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, WIDTH, mode="mean", sparse=True)  # planted
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens):
        return self.head(self.bag(tokens))


def data():
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, VOCAB, (BATCH * BATCHES, TOKENS), generator=generator)
    labels = torch.randint(0, CLASSES, (BATCH * BATCHES,), generator=generator)
    return DataLoader(TensorDataset(tokens, labels), batch_size=BATCH, num_workers=2, pin_memory=True,
                      persistent_workers=True)


def app():
    return torchport.App(name="planted-sparse-embedding", model=BagClassifier, data=data,
                         loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
                         optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1))
