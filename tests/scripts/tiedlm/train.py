"""A small language-model trainer split over a package, as real ones are:
the model (tied embedding and output weights) in lmkit/model.py, batching
with pinned memory in lmkit/data.py, seeding and device choice in
lmkit/utils.py; each has CUDA calls of its own."""
import argparse

import torch

from lmkit.data import batches
from lmkit.model import TinyLM
from lmkit.utils import pick_device, seed_all


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=100000)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    seed_all(0)
    device = pick_device(args.device)
    model = TinyLM(vocab=64, width=32).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    for _step, (tokens, targets) in zip(range(args.steps), batches(device, vocab=64)):
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()


if __name__ == "__main__":
    main()
