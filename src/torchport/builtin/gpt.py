"""builtin:gpt: a decoder-only transformer language model on random tokens.

``builtin:gpt`` is tiny (2 layers x 128 wide); ``builtin:gpt?size=124m`` is
GPT-2 small's shape (124 M parameters, embeddings tied with the output layer as
in GPT-2), built in process with random weights: a real-size model that needs
no download and no extra.  The sizes are in ``torchport.builtin.GPT_SIZES``.

The token streams follow a simple hidden rule (each token is an affine function
of the previous one, with occasional noise), so the loss falls as it learns.
"""
import math
from dataclasses import dataclass

import torch
from torch import nn

import torchport
from torchport.builtin import GPT_SIZES

BATCHES = 16  # distinct batches per epoch


@dataclass(frozen=True)
class Shape:
    layers: int
    width: int
    heads: int
    context: int
    vocab: int
    batch: int
    tokens: int  # tokens per sample fed to the model (the batch holds one more, for the targets)

    @classmethod
    def named(cls, size: str) -> "Shape":
        return cls(*GPT_SIZES[size])


TINY = Shape.named("tiny")


class Block(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        width = shape.width
        self.heads = shape.heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, shape: Shape = TINY, tie_embeddings: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(shape.vocab, shape.width)
        self.position = nn.Parameter(torch.randn(shape.context, shape.width) / math.sqrt(shape.width))
        self.blocks = nn.Sequential(*[Block(shape) for _ in range(shape.layers)])
        self.norm = nn.LayerNorm(shape.width)
        self.head = nn.Linear(shape.width, shape.vocab, bias=False)
        if tie_embeddings:  # GPT-2 shares its token embedding with the output layer
            self.head.weight = self.embed.weight
            # and initialises weights from N(0, 0.02): with the default N(0, 1) embedding as its
            # output layer, the logits start ~30x too large (loss ~600 instead of ln(50257) = 10.8)
            # and a step slowed from 2 s to 14 s within 5 steps on this CPU (measured 2026-11-30).
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, 0.0, 0.02)
                    bias = getattr(module, "bias", None)
                    if isinstance(bias, torch.Tensor):
                        nn.init.zeros_(bias)
            nn.init.normal_(self.position, 0.0, 0.01)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.norm(self.blocks(x)))


def _batches(shape: Shape) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(2024)
    start = torch.randint(0, shape.vocab, (BATCHES * shape.batch, 1), generator=generator)
    steps = torch.arange(shape.tokens + 1)
    tokens = (start * 5 + steps * 3) % shape.vocab
    noise = torch.rand(tokens.shape, generator=generator) < 0.05
    tokens = torch.where(noise, torch.randint(0, shape.vocab, tokens.shape, generator=generator), tokens)
    return list(tokens.view(BATCHES, shape.batch, shape.tokens + 1).unbind(0))


def loss(net: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = net(tokens[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def next_token_accuracy(net: nn.Module, tokens: torch.Tensor) -> float:
    logits = net(tokens[:, :-1])
    return (logits.argmax(dim=-1) == tokens[:, 1:]).float().mean().item()


def app(size: str = "tiny") -> torchport.App:
    shape = Shape.named(size)
    tied = size != "tiny"  # the tiny model keeps its untied head (the demo's figures were measured with it)
    what = "GPT-2 small shape" if size == "124m" else "decoder-only transformer"
    return torchport.App(
        name="gpt" if size == "tiny" else f"gpt-{size}",
        description=f"{what}, {shape.layers} layers x {shape.width} wide, {shape.tokens} tokens per sample, "
                    f"batch {shape.batch}",
        model=lambda: TinyGPT(shape, tie_embeddings=tied),
        data=lambda: _batches(shape),
        loss=loss,
        optimizer=lambda net: torch.optim.AdamW(net.parameters(), lr=3e-3 if size == "tiny" else 6e-4),
        metric=next_token_accuracy,
        metric_name="next-token accuracy",
        predict=lambda net, tokens: net(tokens[:, :-1]),
        tokens=lambda tokens: tokens.shape[0] * (tokens.shape[1] - 1),
    )
