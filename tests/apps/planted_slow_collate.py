"""Planted: the DataLoader's collate_fn decodes each sample slowly (the sleep
stands for per-sample decoding and augmentation in Python), so the step
waits for data.  The pipeline check calls it input-bound and names the
DataLoader's construction and the collate_fn's line."""
import time

from torch.utils.data import default_collate

from planted_common import SmallClassifier as Classifier, loader, make_app

DECODE_S = 0.05  # per sample; 8 samples a batch: 0.4 s, slower than any backend's step here, xla on the CPU included


def slow_collate(samples):
    decoded = []
    for features, label in samples:
        time.sleep(DECODE_S)
        decoded.append((features.clamp(-3.0, 3.0), label))
    return default_collate(decoded)


def data():
    return loader(collate_fn=slow_collate)


def app():
    return make_app("planted-slow-collate", Classifier, data=data)
