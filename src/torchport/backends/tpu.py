"""Google TPUs through TorchTPU (``torch_tpu``, device ``tpu``).

TorchTPU runs PyTorch natively on a TPU, eagerly by default, as an out-of-tree
PrivateUse1 device.  Three backends:

* ``tpu``          strict eager, op by op (TorchTPU's default);
* ``tpu-fused``    fused eager: ops are deferred and fused by XLA;
* ``tpu-compile``  ``torch.compile(backend="tpu")``.

The names these adapters call are checked against the real torch_tpu 0.2.0
package by the test suite (tests/test_tpu_api.py, in the ``tpu`` environment);
they have not run on a TPU.  Device basics go through ``torch.accelerator``:
on torch >= 2.11 TorchTPU rejects most ``torch.tpu.*`` device calls made from
user code.

Where the workers run: in torchport's own interpreter when torch_tpu is
importable there (a TPU VM with torch_tpu installed next to the user's torch),
otherwise in torchport's ``tpu`` environment (``torchport env create tpu``:
CPU torch 2.13.0 + torch_tpu 0.2.0 + libtpu).

Availability is decided from the hardware first, without importing torch_tpu.
Starting the TPU runtime on a machine without a TPU makes libtpu ask a cloud
metadata server for the TPU type, retrying for minutes; importing torch_tpu on
a TPU host renames PrivateUse1.  Neither may happen in the parent process.  The
probe is the one torch_tpu 0.2.0 itself runs before it initializes anything
(``torch_tpu/_internal/utils/hardware.py: _scan_pci_tpus``, called by
``torch_tpu._loader.load``): a Google PCI device with a TPU device id whose
IOMMU group is exposed under /dev/vfio.  The helpers take the filesystem root
as a parameter so that the tests can point them at a folder laid out like /sys
and /dev.
"""
from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from torchport import glossary
from torchport.backends import Availability
from torchport.backends.accelerator import AcceleratorBackend, installed_version, release
from torchport.records import TpuCacheCounters

GOOGLE_PCI_VENDOR = "0x1ae0"
# Google's vendor id also covers non-TPU devices (the gVNIC network card is
# 0x1ae0:0x0042), so only these device ids count as TPUs (torch_tpu 0.2.0
# hardware.py).
TPU_PCI_DEVICES = {"0x005e": "TPU v4", "0x0063": "TPU v5e", "0x0062": "TPU v5p", "0x006f": "TPU v6e",
                   "0x0076": "TPU v7"}
TORCH_TPU_MIN_TORCH = (2, 11)
ENVIRONMENT = "tpu"
# What torch.tpu._get_cache_stats counts that the phases diff.
CACHE_STATS = ("num_cache_hits", "num_cache_reqs", "num_compilations")
VERIFIED_API = "API verified against torch_tpu 0.2.0; not run on TPU hardware"


# --- looking without importing ----------------------------------------------------------------


@dataclass(frozen=True)
class TpuChip:
    """A TPU chip on the PCI bus."""

    address: str
    pci_device: str  # the PCI device id, e.g. 0x0063
    generation: str
    iommu_group: str | None
    vfio: bool  # whether its IOMMU group is exposed under /dev/vfio


@dataclass(frozen=True)
class HardwareProbe:
    """Everything the TPU probe looked at, and how long it took."""

    pci_devices: int  # how many devices under /sys/bus/pci/devices
    tpus: list[TpuChip]
    vfio_groups: list[str]
    accel_nodes: list[str]
    seconds: float


def find_tpus(root: Path | str = "/") -> list[TpuChip]:
    """TPU chips on the PCI bus: address, PCI device id, generation, IOMMU
    group, and whether that group is exposed under /dev/vfio (torch_tpu 0.2.0
    counts a chip only then)."""
    found = []
    for folder in sorted((Path(root) / "sys/bus/pci/devices").glob("*")):
        try:
            vendor = (folder / "vendor").read_text().strip().lower()
            device = (folder / "device").read_text().strip().lower()
        except OSError:
            continue
        if vendor == GOOGLE_PCI_VENDOR and device in TPU_PCI_DEVICES:
            try:
                group = (folder / "iommu_group").readlink().name
            except OSError:
                group = None
            found.append(TpuChip(address=folder.name, pci_device=device, generation=TPU_PCI_DEVICES[device],
                                 iommu_group=group,
                                 vfio=group is not None and (Path(root) / "dev/vfio" / group).exists()))
    return found


def vfio_groups(root: Path | str = "/") -> list[str]:
    """VFIO groups under /dev/vfio: the TPU runtime opens the chips through them."""
    folder = Path(root) / "dev/vfio"
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if entry.name != "vfio")


def accel_nodes(root: Path | str = "/") -> list[str]:
    """/dev/accel* nodes: the older TPU driver's device files (TPU v2-v4 VMs).
    torch_tpu 0.2.0 does not use them; reported so a user sees why."""
    return sorted(path.name for path in (Path(root) / "dev").glob("accel*"))


def probe_hardware(root: Path | str = "/") -> HardwareProbe:
    """Everything the TPU probe looked at, and how long it took: files only,
    no driver call, no runtime."""
    started = time.perf_counter()
    pci = Path(root) / "sys/bus/pci/devices"
    scanned = len(list(pci.glob("*"))) if pci.is_dir() else 0
    tpus, groups, nodes = find_tpus(root), vfio_groups(root), accel_nodes(root)
    return HardwareProbe(pci_devices=scanned, tpus=tpus, vfio_groups=groups, accel_nodes=nodes,
                         seconds=round(time.perf_counter() - started, 4))


def describe_tpus(tpus: list[TpuChip]) -> str:
    generations = sorted({tpu.generation for tpu in tpus})
    return f"{' / '.join(generations)} x{len(tpus)} (PCI {', '.join(sorted({t.pci_device for t in tpus}))})"


def describe_probe(probe: HardwareProbe) -> str:
    """What was probed, for the "no TPU" reason."""
    ids = "/".join(TPU_PCI_DEVICES)
    return (f"probed in {probe.seconds * 1000:.1f} ms: {probe.pci_devices} PCI device(s) under "
            f"/sys/bus/pci/devices, none a Google TPU (vendor {GOOGLE_PCI_VENDOR}, device {ids}); "
            f"{len(probe.vfio_groups)} VFIO group(s) under /dev/vfio; "
            f"{len(probe.accel_nodes)} /dev/accel* node(s)")


def torch_tpu_install() -> dict[str, Any] | None:
    """Where torch_tpu can be imported from, found without importing it:
    this interpreter (a TPU VM) first, else torchport's tpu environment."""
    here = installed_version("torch_tpu", "torch_tpu")
    if here is not None:
        torch_version = installed_version("torch", "torch") or "unknown"
        return {"where": "this interpreter", "environment": None, "torch_tpu": here, "torch": torch_version,
                "libtpu": installed_version("libtpu", "libtpu"),
                "problem": (f"torch_tpu {here} needs torch>=2.11; this interpreter has torch {torch_version}"
                            if release(torch_version) < TORCH_TPU_MIN_TORCH else None)}
    from torchport import envs

    record = envs.state(ENVIRONMENT)
    if not record.ready or record.manifest is None:
        return None
    installed = record.manifest.installed or {}
    return {"where": "tpu environment", "environment": ENVIRONMENT, "torch_tpu": installed.get("torch_tpu"),
            "torch": installed.get("torch"), "libtpu": installed.get("libtpu"), "problem": None}


def worker_environment() -> str | None:
    """The torchport environment the tpu workers run in: None (this
    interpreter) where torch_tpu is importable here, else ``tpu``."""
    return None if importlib.util.find_spec("torch_tpu") is not None else ENVIRONMENT


def tpu_availability(root: Path | str = "/") -> Availability:
    """Hardware first (files only), then where torch_tpu is; nothing imported."""
    probe = probe_hardware(root)
    tpus = probe.tpus
    install = torch_tpu_install()
    if install is None:
        from torchport import envs

        on_bus = f"; this machine has {describe_tpus(tpus)} on the PCI bus" if tpus else ""
        return Availability(False, "torch_tpu is not installed in this interpreter and the tpu environment "
                                   f"does not exist (run: {envs.create_command(ENVIRONMENT)}){on_bus}")
    if install["problem"]:
        return Availability(False, install["problem"])
    package = f"torch_tpu {install['torch_tpu']} importable ({install['where']})"
    if not tpus:
        return Availability(False, f"{package}; no TPU chip on this machine ({describe_probe(probe)})")
    usable = [tpu for tpu in tpus if tpu.vfio]
    if not usable:
        legacy = (f"; /dev/{', /dev/'.join(probe.accel_nodes)} belong to the older TPU driver, which "
                  "torch_tpu 0.2.0 does not use") if probe.accel_nodes else ""
        return Availability(False, f"{package}; {describe_tpus(tpus)} on the PCI bus, but none exposed through "
                                   f"VFIO (/dev/vfio/<IOMMU group>): torch_tpu would not initialize them{legacy}")
    if not install["libtpu"]:
        return Availability(False, f"{package} and {describe_tpus(usable)} present, but libtpu is not installed "
                                   "(pip install libtpu)")
    return Availability(True, f"{describe_tpus(usable)}; torch_tpu {install['torch_tpu']}, "
                              f"libtpu {install['libtpu']} ({install['where']})")


class TPU(AcceleratorBackend):
    name = "tpu"
    title = "Google TPU (TorchTPU), strict eager"
    device_type = "tpu"
    vendor_module = "torch_tpu"
    family = glossary.TPU
    verification = VERIFIED_API
    environment = worker_environment()
    process_group_backend = "tpu_dist"
    # TorchTPU's execution mode for this backend (torch.tpu.EagerMode member).
    eager_mode: ClassVar[str] = "DEFER_NEVER"

    @classmethod
    def availability(cls) -> Availability:
        return tpu_availability("/")

    def setup(self) -> None:
        super().setup()
        import torch

        # Set explicitly, so that a TORCH_TPU_DEFER_AND_FUSE left in the
        # environment cannot turn the strict backend into the fused one.
        torch.tpu.eager_mode = getattr(torch.tpu.EagerMode, self.eager_mode)  # type: ignore[attr-defined]  # torch.tpu is added by torch_tpu at import

    def device_info(self) -> dict[str, str | int | None]:
        import torch

        return {
            "device": str(self.device),
            "name": torch.tpu.get_device_name(),  # type: ignore[attr-defined]  # torch.tpu is added by torch_tpu at import
            "devices": torch.accelerator.device_count(),
            "eager_mode": self.eager_mode,
            "torch_tpu": installed_version("torch_tpu", "torch_tpu"),
            "libtpu": installed_version("libtpu", "libtpu"),
        }

    def device_counters(self) -> dict[str, float]:
        """TorchTPU's compilation-cache statistics, where this version exposes
        them (a private call in 0.2.0; absent means no figures, not zero)."""
        import torch

        stats = getattr(torch.tpu, "_get_cache_stats", None)  # type: ignore[attr-defined]  # torch.tpu is added by torch_tpu at import
        if stats is None:
            return {}
        values = stats()
        return {key: values[key] for key in CACHE_STATS if key in values}

    def summarize_device_counters(self, before: dict[str, float], after: dict[str, float]) -> TpuCacheCounters | None:
        # Only the cache's own keys: a tpu-compile snapshot also holds torch.compile's counters.
        delta = {key: int(after[key] - before.get(key, 0)) for key in CACHE_STATS if key in after}
        if not delta:
            return None
        return TpuCacheCounters(
            compilations=delta.get("num_compilations"),
            cache_hits=delta.get("num_cache_hits"),
            cache_misses=(delta["num_cache_reqs"] - delta["num_cache_hits"])
            if "num_cache_reqs" in delta and "num_cache_hits" in delta else None,
            source="torch.tpu._get_cache_stats (TorchTPU eager compilation cache)",
        )

    def new_device_compilations(self, before: dict[str, float], after: dict[str, float]) -> int | None:
        if "num_compilations" not in after:
            return None
        return int(after["num_compilations"] - before.get("num_compilations", 0))


class TPUFused(TPU):
    name = "tpu-fused"
    title = "Google TPU (TorchTPU), fused eager"
    eager_mode = "DEFER_AND_FUSE"


class TPUCompile(TPU):
    name = "tpu-compile"
    title = "Google TPU (TorchTPU), torch.compile(backend=\"tpu\")"
    compile_backend = "tpu"
