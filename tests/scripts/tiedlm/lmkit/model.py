import torch
from torch import nn


class TinyLM(nn.Module):
    """Embedding, two mixing layers, and an output layer sharing the embedding's weight."""

    def __init__(self, vocab, width):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # weight tying, as GPT-2 does
        self.register_buffer("positions", torch.arange(16))

    def forward(self, tokens):
        hidden = self.embed(tokens)
        hidden = hidden + self.mix(self.norm(hidden))
        return self.head(self.norm(hidden))
