"""One name per device family across torchport's commands, and one severity order.

Each command names devices in its own vocabulary: backends by family
(``neuron``, ``neuron-compile``), ``trace`` by op-support target (``neuron``),
``scan`` by porting target (``trainium``, because a scan finding is about the
chip a codebase moves to), the dispatcher by key (``PrivateUse1``).  This table
is the one place those names meet: a backend declares its family, and the
trace and scan names, the dispatch key and the listing order come from here.

Standard library only: workers import it on every torch they run on.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str  # the first part of its backends' names
    order: int  # where its backends sort in every listing: the reference first, native builds, then out-of-tree
    dispatch_key: str  # the dispatcher key whose kernels run on it
    trace_target: str | None  # `torchport trace --target` name; None: not a trace target
    scan_target: str | None  # `torchport scan` target name; None: not a scan target


CPU = Family("cpu", 0, "CPU", None, "cpu")
CUDA = Family("cuda", 1, "CUDA", "cuda", None)  # scan finds CUDA lock-in: CUDA is where code comes from
ROCM = Family("rocm", 1, "CUDA", "rocm", "rocm")  # ROCm builds of torch present as "cuda": the cuda backends run it
MPS = Family("mps", 2, "MPS", "mps", "mps")
XLA = Family("xla", 3, "XLA", "xla", "xla")
TPU = Family("tpu", 4, "PrivateUse1", "tpu", "tpu")
NEURON = Family("neuron", 5, "PrivateUse1", "neuron", "trainium")
XPU = Family("xpu", 6, "XPU", None, "xpu")
# A backend from a plugin that names no family of its own sorts after all of these.
UNLISTED_ORDER = 100

FAMILIES: tuple[Family, ...] = (CPU, CUDA, ROCM, MPS, XLA, TPU, NEURON, XPU)


# The names people use for a family, accepted by every command that takes a target
# (trace, scan): a Trainium user types "trainium" or "neuron", a TPU user "tpu" or "torchtpu".
ALIASES: dict[str, Family] = {
    "cpu": CPU,
    "cuda": CUDA, "nvidia": CUDA,
    "rocm": ROCM, "amd": ROCM, "hip": ROCM,
    "mps": MPS, "apple": MPS, "metal": MPS,
    "xla": XLA, "torch_xla": XLA, "torch-xla": XLA, "pytorch-xla": XLA, "pytorch/xla": XLA,
    "tpu": TPU, "torchtpu": TPU, "torch_tpu": TPU, "torch-tpu": TPU,
    "neuron": NEURON, "trainium": NEURON, "torchneuron": NEURON, "torch-neuronx": NEURON, "inferentia": NEURON,
    "xpu": XPU, "intel": XPU,
}


def canonical_target(name: str, kind: str) -> str:
    """The ``kind`` ("trace" or "scan") target name that an alias stands for;
    an unknown name or a family that is not a ``kind`` target is returned as given,
    for the caller's own "unknown target" message."""
    family = ALIASES.get(name.strip().lower())
    if family is None:
        return name
    return (family.trace_target if kind == "trace" else family.scan_target) or name


def by_trace_target(name: str) -> Family:
    return next(family for family in FAMILIES if family.trace_target == name)


def by_scan_target(name: str) -> Family:
    return next(family for family in FAMILIES if family.scan_target == name)


def dispatch_keys() -> list[str]:
    """Every device dispatch key a kernel lookup asks about, once each, in family order."""
    return list(dict.fromkeys(family.dispatch_key for family in FAMILIES if family is not XPU))


def trace_to_scan(name: str) -> str | None:
    """The scan target of a trace target (``neuron`` -> ``trainium``)."""
    return by_trace_target(name).scan_target


# --- severity: one direction everywhere ----------------------------------------------------------
# Every ranking of severities in torchport grows with how bad it is (the worst
# has the highest rank), so that max() is the worst and a sort by -rank puts
# the worst first, whichever vocabulary (trace: minor/slow/blocker; scan:
# info/perf/silent/error) is ranked.


def severity_ranking(mildest_first: Iterable[str]) -> dict[str, int]:
    """``{severity: rank}`` with the rank growing from the mildest (1) to the worst."""
    return {name: rank for rank, name in enumerate(mildest_first, 1)}


def worst_severity(severities: Iterable[str], ranking: dict[str, int]) -> str | None:
    found = [severity for severity in severities if severity]
    return max(found, key=ranking.__getitem__) if found else None
