"""One name per device family across torchport's commands, and one severity order.

Each command names devices in its own vocabulary: backends by family
(``neuron``, ``neuron-compile``), ``trace`` by op-support target (``neuron``),
``scan`` by porting target (``trainium``, because a scan finding is about the
chip a codebase moves to), the dispatcher by key (``PrivateUse1``).  This table
is the one place those names meet: a backend declares its family, and the
trace and scan names, the dispatch key and the listing order come from here.
So do the target lists of ``trace`` and ``scan`` with their titles, the shipped
op table and whether the target compiles lazily; rule severities are declared
per target with a default, so a family added here gets the default's findings
(docs/ARCHITECTURE.md, "Adding a device family").

Standard library only: workers import it on every torch they run on.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Family:
    name: str  # the first part of its backends' names
    order: int  # where its backends sort in every listing: the reference first, native builds, then out-of-tree
    dispatch_key: str  # the dispatcher key whose kernels run on it
    trace_target: str | None  # `torchport trace --target` name; None: not a trace target
    scan_target: str | None  # `torchport scan` target name; None: not a scan target
    _: KW_ONLY
    trace_title: str = ""  # how trace reports name the target
    scan_title: str = ""  # what the scan target means (`torchport rules`, docs/scan.md)
    op_table: str | None = None  # shipped op-support table, data/op_support_<op_table>.json
    lazy: bool = False  # compiles a graph per input shape (trace: recompilation findings)


CPU = Family("cpu", 0, "CPU", None, "cpu", scan_title="CPU only")
# scan finds CUDA lock-in: CUDA is where code comes from, not a scan target
CUDA = Family("cuda", 1, "CUDA", "cuda", None, trace_title="NVIDIA CUDA", op_table="cuda")
# ROCm builds of torch present as "cuda": the cuda backends run it
ROCM = Family("rocm", 1, "CUDA", "rocm", "rocm", trace_title="AMD ROCm",
              scan_title="AMD GPU via PyTorch for ROCm (device 'cuda')")
MPS = Family("mps", 2, "MPS", "mps", "mps", trace_title="Apple MPS", scan_title="Apple GPU via Metal (device 'mps')")
XLA = Family("xla", 3, "XLA", "xla", "xla", trace_title="PyTorch/XLA (torch_xla)",
             scan_title="TPU via torch_xla (lazy tensors, device 'xla')", op_table="xla", lazy=True)
TPU = Family("tpu", 4, "PrivateUse1", "tpu", "tpu", trace_title="TorchTPU (torch_tpu)",
             scan_title="TPU via TorchTPU (torch_tpu, device 'tpu')", op_table="tpu", lazy=True)
NEURON = Family("neuron", 5, "PrivateUse1", "neuron", "trainium", trace_title="AWS Trainium (TorchNeuron)",
                scan_title="AWS Trainium via TorchNeuron (device 'neuron')", lazy=True)
XPU = Family("xpu", 6, "XPU", None, "xpu", scan_title="Intel GPU (device 'xpu')")
# A backend from a plugin that names no family of its own sorts after all of these.
UNLISTED_ORDER = 100

# In the order trace and scan list their targets: where code ports to first,
# CUDA (where it comes from) and the CPU last.  Backends sort by ``order`` instead.
FAMILIES: tuple[Family, ...] = (TPU, XLA, NEURON, ROCM, XPU, MPS, CUDA, CPU)


def trace_targets(families: Iterable[Family] = FAMILIES) -> tuple[str, ...]:
    """The `torchport trace` targets, in listing order."""
    return tuple(family.trace_target for family in families if family.trace_target)


def lazy_trace_targets(families: Iterable[Family] = FAMILIES) -> tuple[str, ...]:
    return tuple(family.trace_target for family in families if family.trace_target and family.lazy)


def scan_targets(families: Iterable[Family] = FAMILIES) -> tuple[str, ...]:
    """The `torchport scan` targets, in listing order."""
    return tuple(family.scan_target for family in families if family.scan_target)


def per_target(targets: Iterable[str], default: V, exceptions: Mapping[str, V]) -> dict[str, V]:
    """``{target: value}`` for every target: ``default`` unless ``exceptions``
    names the target, so that a family added to the table gets the default.
    An exception for a target that is not in ``targets`` is a typo: ValueError."""
    targets = tuple(targets)
    unknown = sorted(set(exceptions) - set(targets))
    if unknown:
        raise ValueError(f"unknown target {unknown[0]!r} (known: {', '.join(targets)})")
    return {target: exceptions.get(target, default) for target in targets}


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
    """Every dispatch key a kernel lookup asks about: the CPU's and each trace
    target's, once each, in backend order."""
    asked = [family for family in FAMILIES if family.trace_target or family is CPU]
    return list(dict.fromkeys(family.dispatch_key for family in sorted(asked, key=lambda family: family.order)))


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
