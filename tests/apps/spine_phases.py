"""Phase separation: the first step costs 0.6 s extra (like a compilation) and the
next 4 steps 0.05 s each (like warm-up); after that a step is fast."""
import time

from spine_common import mse, tiny_app

steps = {"n": 0}
FIRST_STEP_EXTRA_S = 0.6
WARMUP_STEPS, WARMUP_EXTRA_S = 4, 0.05


def loss(model, batch):
    steps["n"] += 1
    if steps["n"] == 1:
        time.sleep(FIRST_STEP_EXTRA_S)
    elif steps["n"] <= 1 + WARMUP_STEPS:
        time.sleep(WARMUP_EXTRA_S)
    return mse(model, batch)


def app():
    return tiny_app(loss=loss)
