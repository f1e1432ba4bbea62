"""Phase separation: the first step costs 0.6 s extra (like a compilation) and the
next 4 steps 0.05 s each (like warm-up); after that a step takes about 5 ms.

The steady step is a fixed sleep, not the tiny model alone: a 0.15 ms step
varies by more than the 10% steady-state tolerance from timer and scheduler
noise, so warm-up sometimes never looked steady within its 40-step bound (a
flaky test_phases_are_measured_separately, 1 run in 4 on a quiet machine)."""
import time

from spine_common import mse, tiny_app

steps = {"n": 0}
FIRST_STEP_EXTRA_S = 0.6
WARMUP_STEPS, WARMUP_EXTRA_S = 4, 0.05
STEADY_STEP_S = 0.005


def loss(model, batch):
    steps["n"] += 1
    if steps["n"] == 1:
        time.sleep(FIRST_STEP_EXTRA_S)
    elif steps["n"] <= 1 + WARMUP_STEPS:
        time.sleep(WARMUP_EXTRA_S)
    time.sleep(STEADY_STEP_S)
    return mse(model, batch)


def app():
    return tiny_app(loss=loss)
