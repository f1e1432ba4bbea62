"""A small character-level language-model trainer in the style of many public
ones: AdamW, a DataLoader, gradient clipping, and at iteration 0 (then every
--eval-interval iterations) a loss estimate on held-out data under
torch.no_grad() with the model in eval mode, and a sample generated token by
token.  --eval-interval 0 trains without evaluating or sampling."""
import argparse

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

TEXT = "the quick brown fox jumps over the lazy dog; " * 40
VOCAB = sorted(set(TEXT))
BLOCK = 16


class Chunks(Dataset):
    def __init__(self, ids):
        self.ids = ids

    def __len__(self):
        return len(self.ids) - BLOCK - 1

    def __getitem__(self, index):
        chunk = self.ids[index:index + BLOCK + 1]
        return chunk[:-1], chunk[1:]


class TinyLM(nn.Module):
    def __init__(self, vocab, width=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids, targets=None):
        hidden, _ = self.mix(self.embed(ids))
        logits = self.head(hidden)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


@torch.no_grad()
def estimate_loss(model, loader, batches=2):
    model.eval()
    losses = torch.zeros(batches)
    for index, (x, y) in zip(range(batches), loader):
        _, loss = model(x, y)  # evaluation forward
        losses[index] = loss.item()  # evaluation read
    model.train()
    return losses.mean()


@torch.no_grad()
def sample(model, length=8):
    model.eval()
    ids = torch.zeros((1, 1), dtype=torch.long)
    for _ in range(length):
        logits, _ = model(ids[:, -BLOCK:])  # sampling forward
        probabilities = F.softmax(logits[:, -1, :], dim=-1)
        ids = torch.cat((ids, torch.multinomial(probabilities, num_samples=1)), dim=1)  # sampling step
    model.train()
    return ids


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--eval-interval", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=10**6)
    args = parser.parse_args()
    torch.manual_seed(0)
    ids = torch.tensor([VOCAB.index(c) for c in TEXT], dtype=torch.long)
    split = int(0.9 * len(ids))
    train_loader = DataLoader(Chunks(ids[:split]), batch_size=8, shuffle=True, drop_last=True)
    val_loader = DataLoader(Chunks(ids[split:]), batch_size=8, drop_last=True)
    model = TinyLM(len(VOCAB))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    iteration = 0
    while iteration < args.iterations:
        for x, y in train_loader:
            if args.eval_interval and iteration % args.eval_interval == 0:
                val_loss = estimate_loss(model, val_loader)
                print(f"iteration {iteration}: val loss {val_loss:.4f}")  # evaluation print
                text = "".join(VOCAB[i] for i in sample(model)[0].tolist())  # sample decode
                print(f"sample: {text!r}")
            _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # gradient clipping
            optimizer.step()
            if iteration % 10 == 0:
                print(f"iteration {iteration}: loss {loss.item():.4f}")  # training log read
            iteration += 1


if __name__ == "__main__":
    main()
