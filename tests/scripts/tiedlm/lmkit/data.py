import torch


def batches(device, vocab, batch=8, length=16):
    """Random token streams whose next token is the current one plus one: learnable."""
    generator = torch.Generator().manual_seed(1)
    while True:
        start = torch.randint(0, vocab, (batch, 1), generator=generator)
        tokens = (start + torch.arange(length + 1)) % vocab
        if torch.cuda.is_available():
            tokens = tokens.pin_memory()
        tokens = tokens.to(device, non_blocking=True)
        yield tokens[:, :-1], tokens[:, 1:]
