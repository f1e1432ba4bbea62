"""Planted: the DataLoader's collate_fn decodes each sample slowly (the sleep
stands for per-sample decoding and augmentation in Python), in the training
process (``num_workers=0``), so every step waits for its batch.  The pipeline
check calls it input-bound and names the DataLoader's construction and the
collate_fn's line.

In the training process the share of a step spent waiting, load / (load +
compute), stays input-bound (above 25%) until a step takes three times a
batch's 0.4 s.  Behind two DataLoader workers the app kept up on cpu at load
15 on the 2-core machine: with two intra-op threads on a loaded host, the
small model's eager step took 0.56 s (0.8 ms with one thread, same load),
longer than a worker's batch."""
import time

from torch.utils.data import default_collate

from planted_common import SmallClassifier as Classifier, loader, make_app

DECODE_S = 0.05  # per sample; 8 samples a batch: 0.4 s


def slow_collate(samples):
    decoded = []
    for features, label in samples:
        time.sleep(DECODE_S)
        decoded.append((features.clamp(-3.0, 3.0), label))
    return default_collate(decoded)


def data():
    return loader(collate_fn=slow_collate, num_workers=0)


def app():
    return make_app("planted-slow-collate", Classifier, data=data)
