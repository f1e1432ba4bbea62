"""builtin:gpt: a tiny decoder-only transformer language model on random tokens.

The token streams follow a simple hidden rule (each token is an affine function
of the previous one, with occasional noise), so the loss falls as it learns.
"""
import math

import torch
from torch import nn

import torchport

VOCAB, WIDTH, HEADS, LAYERS, CONTEXT = 256, 128, 4, 2, 64
BATCH, BATCHES = 16, 16


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(WIDTH, dim=2)
        q, k, v = (t.view(batch, length, HEADS, WIDTH // HEADS).transpose(1, 2) for t in (q, k, v))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, WIDTH))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Parameter(torch.randn(CONTEXT, WIDTH) / math.sqrt(WIDTH))
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.norm(self.blocks(x)))


def _batches() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(2024)
    start = torch.randint(0, VOCAB, (BATCHES * BATCH, 1), generator=generator)
    steps = torch.arange(CONTEXT + 1)
    tokens = (start * 5 + steps * 3) % VOCAB
    noise = torch.rand(tokens.shape, generator=generator) < 0.05
    tokens = torch.where(noise, torch.randint(0, VOCAB, tokens.shape, generator=generator), tokens)
    return list(tokens.view(BATCHES, BATCH, CONTEXT + 1).unbind(0))


def loss(net: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = net(tokens[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def next_token_accuracy(net: nn.Module, tokens: torch.Tensor) -> float:
    logits = net(tokens[:, :-1])
    return (logits.argmax(dim=-1) == tokens[:, 1:]).float().mean().item()


def app() -> torchport.App:
    return torchport.App(
        name="gpt",
        description=f"decoder-only transformer, {LAYERS} layers x {WIDTH} wide, context {CONTEXT}, batch {BATCH}",
        model=TinyGPT,
        data=_batches,
        loss=loss,
        optimizer=lambda net: torch.optim.AdamW(net.parameters(), lr=3e-3),
        metric=next_token_accuracy,
        metric_name="next-token accuracy",
        predict=lambda net, tokens: net(tokens[:, :-1]),
        tokens=lambda tokens: tokens.shape[0] * (tokens.shape[1] - 1),
    )
