"""Hangs forever at step 3: the worker must be stopped by the timeout."""
import time

from spine_common import mse, tiny_app

steps = {"n": 0}


def loss(model, batch):
    steps["n"] += 1
    while steps["n"] >= 3:
        time.sleep(1)
    return mse(model, batch)


def app():
    return tiny_app(loss=loss)
