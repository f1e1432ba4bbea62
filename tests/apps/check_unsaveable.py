"""A state dict that saves but cannot be reloaded safely: the model's extra
state is an instance of an app class, which ``torch.load(weights_only=True)``
refuses to unpickle.  Checkpoint portability and recovery must fail with that
reason; parity must still run and pass."""
import torch
from torch import nn

import torchport

FEATURES, CLASSES, BATCH, BATCHES = 16, 4, 8, 4


class Vocabulary:
    def __init__(self, words):
        self.words = list(words)


class WithVocabulary(nn.Linear):
    def __init__(self) -> None:
        super().__init__(FEATURES, CLASSES)
        self.vocabulary = Vocabulary(["a", "b", "c", "d"])

    def get_extra_state(self):
        return self.vocabulary

    def set_extra_state(self, state) -> None:
        self.vocabulary = state


def batches():
    generator = torch.Generator().manual_seed(5)
    features = torch.randn(BATCHES, BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCHES, BATCH), generator=generator)
    return list(zip(features.unbind(0), labels.unbind(0)))


def app() -> torchport.App:
    return torchport.App(
        name="check-unsaveable",
        model=WithVocabulary,
        data=batches,
        loss=lambda net, batch: nn.functional.cross_entropy(net(batch[0]), batch[1]),
        optimizer=lambda net: torch.optim.SGD(net.parameters(), lr=0.1),
    )
