"""Kills its own worker with SIGKILL at step 5, only when the model is compiled:
the eager backend must still complete."""
import os
import signal

import torch

from spine_common import mse, tiny_app

steps = {"n": 0}


def loss(model, batch):
    steps["n"] += 1
    if steps["n"] == 5 and isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
        os.kill(os.getpid(), signal.SIGKILL)
    return mse(model, batch)


def app():
    return tiny_app(loss=loss)
