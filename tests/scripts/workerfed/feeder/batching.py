import torch


def stack_pairs(samples):
    """The DataLoader's collate_fn: features and targets stacked, pinned where CUDA is."""
    features = torch.stack([features for features, _ in samples])
    targets = torch.stack([target for _, target in samples])
    if torch.cuda.is_available():
        features, targets = features.pin_memory(), targets.pin_memory()
    return features, targets


def stack_on_gpu(samples):
    """A collate_fn for a GPU-side loader that this trainer never uses."""
    features, targets = stack_pairs(samples)
    return features.cuda(non_blocking=True), targets.cuda(non_blocking=True)
