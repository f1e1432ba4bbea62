"""A tiny app for `torchport compare` tests.  COMPARE_TINY_BATCH sets the batch
size (the same app with another batch shape: not comparable); COMPARE_TINY_SLEEP_S
adds a sleep to every step (the same configuration, certainly slower)."""
import os
import time

from spine_common import batches, mse, tiny_app

BATCH = int(os.environ.get("COMPARE_TINY_BATCH", "16"))
SLEEP_S = float(os.environ.get("COMPARE_TINY_SLEEP_S", "0"))


def slow_mse(model, batch):
    time.sleep(SLEEP_S)
    return mse(model, batch)


def app():
    return tiny_app(data=lambda: batches(batch=BATCH), loss=slow_mse if SLEEP_S else mse)
