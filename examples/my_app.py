"""An app written the way a user writes theirs: a model, a dataset, a loss.

A tabular regression model (think "predict delivery time from order
features") with its own Dataset class and a DataLoader.  Nothing here names a
device: torchport places it, seeds it and times it.

    torchport evaluate examples/my_app.py
    torchport evaluate examples/my_app.py:make_app --backend cpu
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import torchport

NUMERIC_FEATURES = 24
CATEGORIES = 64  # e.g. store id
EMBEDDING = 8


class Orders(Dataset):
    """Synthetic orders: numeric features, one categorical feature, and a
    target that depends on both (so the model has something to learn)."""

    def __init__(self, size: int = 4096, seed: int = 7):
        generator = torch.Generator().manual_seed(seed)
        self.numeric = torch.randn(size, NUMERIC_FEATURES, generator=generator)
        self.store = torch.randint(0, CATEGORIES, (size,), generator=generator)
        store_effect = torch.randn(CATEGORIES, generator=generator)
        weights = torch.randn(NUMERIC_FEATURES, generator=generator)
        self.target = (self.numeric @ weights + store_effect[self.store]).unsqueeze(1)

    def __len__(self) -> int:
        return len(self.target)

    def __getitem__(self, index: int):
        return {"numeric": self.numeric[index], "store": self.store[index], "target": self.target[index]}


class DeliveryTimeModel(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.store_embedding = nn.Embedding(CATEGORIES, EMBEDDING)
        self.mlp = nn.Sequential(
            nn.Linear(NUMERIC_FEATURES + EMBEDDING, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, numeric: torch.Tensor, store: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([numeric, self.store_embedding(store)], dim=1))


def loss(model: nn.Module, batch: dict) -> torch.Tensor:
    prediction = model(batch["numeric"], batch["store"])
    return nn.functional.smooth_l1_loss(prediction, batch["target"])


def mean_absolute_error(model: nn.Module, batch: dict) -> float:
    prediction = model(batch["numeric"], batch["store"])
    return (prediction - batch["target"]).abs().mean().item()


def make_app(batch_size: int = 128) -> torchport.App:
    return torchport.App(
        name="delivery-time",
        description=f"tabular regression MLP with a store embedding, batch {batch_size}",
        model=DeliveryTimeModel,
        data=lambda: DataLoader(Orders(), batch_size=batch_size, shuffle=True, drop_last=True,
                                generator=torch.Generator().manual_seed(0)),
        loss=loss,
        optimizer=lambda model: torch.optim.Adam(model.parameters(), lr=1e-3),
        metric=mean_absolute_error,
        metric_name="mean absolute error",
        metric_higher_is_better=False,
        predict=lambda model, batch: model(batch["numeric"], batch["store"]),
    )


def app() -> torchport.App:
    return make_app()
