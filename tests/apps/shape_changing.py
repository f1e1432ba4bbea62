"""A deliberately bad app for XLA: every other batch has a new sequence length.

Variable-length batches without padding to a few fixed sizes are the classic
way to make a graph compiler recompile: each new input shape is a new graph.
On eager backends it runs fine; on xla the report must show the
recompilations and name the changing shapes as their cause.
"""
import torch
from torch import nn

import torchport

VOCAB, WIDTH, CLASSES, BATCH = 64, 32, 4, 8
BATCHES = 120
FIRST_LENGTH = 8


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(7)
    batches = []
    for index in range(BATCHES):
        length = FIRST_LENGTH + index // 2  # a new length every 2 steps
        tokens = torch.randint(0, VOCAB, (BATCH, length), generator=generator)
        labels = tokens[:, 0] % CLASSES
        batches.append((tokens, labels))
    return batches


class BagOfTokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens).mean(dim=1))


def loss(net: nn.Module, batch) -> torch.Tensor:
    tokens, labels = batch
    return nn.functional.cross_entropy(net(tokens), labels)


def app() -> torchport.App:
    return torchport.App(
        name="shape_changing",
        description="bag-of-tokens classifier; the sequence length grows by one every 2 batches",
        model=BagOfTokens,
        data=_batches,
        loss=loss,
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
