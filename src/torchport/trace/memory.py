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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from torchport.records import ChipFit, MemoryFit, StepMemory

CHIPS_PATH = Path(__file__).resolve().parent.parent / "data" / "chips.json"
UNITS = {"GB": 10**9, "GiB": 2**30}
# Below this share of free memory, "fits" is too close to call from an estimate.
TIGHT_HEADROOM = 0.10


@dataclass(frozen=True)
class CatalogueChip:
    """One chip of the catalogue, as its vendor states its memory."""

    id: str
    name: str
    targets: list[str]
    hbm: int | float
    unit: str  # GB (10^9 bytes) or GiB (2^30 bytes)
    source: str
    note: str | None = None

    @property
    def capacity_bytes(self) -> int:
        return int(self.hbm * UNITS[self.unit])

    @property
    def hbm_text(self) -> str:
        return f"{self.hbm} {self.unit}"


@dataclass(frozen=True)
class ChipCatalogue:
    """``data/chips.json``: the chips, and when and from what the figures were gathered."""

    retrieved: str
    compiled_from: str
    chips: tuple[CatalogueChip, ...]

    def provenance(self) -> dict[str, str]:
        """What a memory estimate says of the catalogue it used."""
        return {"retrieved": self.retrieved, "compiled_from": self.compiled_from}


@lru_cache(maxsize=1)
def catalogue() -> ChipCatalogue:
    document = json.loads(CHIPS_PATH.read_text(encoding="utf-8"))
    return ChipCatalogue(retrieved=document["retrieved"], compiled_from=document["compiled_from"],
                         chips=tuple(CatalogueChip(**chip) for chip in document["chips"]))


def fit(peak_bytes: int, targets: list[str]) -> list[ChipFit]:
    rows = []
    for chip in catalogue().chips:
        if not set(chip.targets) & set(targets):
            continue
        capacity = chip.capacity_bytes
        headroom = capacity - peak_bytes
        share = headroom / capacity
        rows.append(ChipFit(chip=chip.name, id=chip.id, targets=chip.targets, hbm_bytes=capacity,
                            hbm=chip.hbm_text, source=chip.source, fits=headroom >= 0,
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
                     catalogue=catalogue().provenance())
