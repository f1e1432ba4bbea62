"""Does one training step fit on one chip?  An estimate, labelled as one.

Peak memory of a step is estimated from what the trace measured on the CPU:
parameters + gradients + optimizer state + activations kept for backward (the
tensors autograd saved, counted once per storage) + one batch.  It leaves out
temporaries inside a kernel, allocator fragmentation and the runtime's own
reservation, so real peaks run higher; the headroom says by how much it may.
The chip figures come from ``data/chips.json`` (vendor figures with sources).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from torchport.records import ChipFit, MemoryFit, StepMemory

CHIPS_PATH = Path(__file__).resolve().parent.parent / "data" / "chips.json"
UNITS = {"GB": 10**9, "GiB": 2**30}
# Below this share of free memory, "fits" is too close to call from an estimate.
TIGHT_HEADROOM = 0.10


@lru_cache(maxsize=1)
def catalogue() -> dict[str, Any]:
    return json.loads(CHIPS_PATH.read_text(encoding="utf-8"))


def fit(peak_bytes: int, targets: list[str]) -> list[ChipFit]:
    rows = []
    for chip in catalogue()["chips"]:
        if not set(chip["targets"]) & set(targets):
            continue
        capacity = int(chip["hbm"] * UNITS[chip["unit"]])
        headroom = capacity - peak_bytes
        share = headroom / capacity
        rows.append(ChipFit(chip=chip["name"], id=chip["id"], targets=chip["targets"], hbm_bytes=capacity,
                            hbm=f"{chip['hbm']} {chip['unit']}", source=chip["source"], fits=headroom >= 0,
                            tight=0 <= share < TIGHT_HEADROOM, headroom_bytes=headroom, headroom_share=round(share, 4)))
    return rows


def memory_section(measured: StepMemory | None, targets: list[str]) -> MemoryFit | None:
    """The estimate from what the tracing worker measured, and the chips it fits."""
    if not measured:
        return None
    parts = {
        "parameters": measured.parameter_bytes,
        "gradients": measured.gradient_bytes,
        "optimizer_state": measured.optimizer_state_bytes,
        "activations": measured.activation_bytes,
        "batch": measured.batch_bytes,
    }
    peak = sum(parts.values())
    return MemoryFit(peak_bytes=peak, parts=parts, dtype="float32 (as traced)", optimizer=measured.optimizer,
                     parameters=measured.parameters,
                     method="estimate: parameters + gradients + optimizer state + tensors saved for backward + one "
                            "batch, measured on the CPU; excludes kernel temporaries, fragmentation and runtime "
                            "reservations",
                     chips=fit(peak, targets),
                     catalogue={"retrieved": catalogue()["retrieved"], "compiled_from": catalogue()["compiled_from"]})
