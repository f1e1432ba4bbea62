"""builtin:cnn: a small convolutional classifier on random 32x32 RGB images."""
import torch
from torch import nn

import torchport

CHANNELS, SIZE, CLASSES = 3, 32, 128
BATCH, BATCHES = 32, 16


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(4321)
    images = torch.randn(BATCHES, BATCH, CHANNELS, SIZE, SIZE, generator=generator)
    # A label that depends on the image: the mean of one colour channel, bucketed.
    brightness = images[:, :, 0].mean(dim=(2, 3))
    labels = torch.bucketize(brightness, torch.linspace(-0.1, 0.1, CLASSES - 1))
    return list(zip(images.unbind(0), labels.unbind(0)))


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(CHANNELS, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, CLASSES),
    )


def loss(net: nn.Module, batch) -> torch.Tensor:
    images, labels = batch
    return nn.functional.cross_entropy(net(images), labels)


def accuracy(net: nn.Module, batch) -> float:
    images, labels = batch
    return (net(images).argmax(dim=1) == labels).float().mean().item()


def app() -> torchport.App:
    return torchport.App(
        name="cnn",
        description=f"3-layer conv net, batch {BATCH} of {CHANNELS}x{SIZE}x{SIZE} random images",
        model=model,
        data=_batches,
        loss=loss,
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9),
        metric=accuracy,
        metric_name="accuracy",
        predict=lambda net, batch: net(batch[0]),
    )
