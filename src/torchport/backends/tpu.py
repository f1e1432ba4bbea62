"""Google TPUs through TorchTPU (``torch_tpu``, device ``tpu``).

TorchTPU runs PyTorch natively on a TPU, eagerly by default, as an out-of-tree
PrivateUse1 device.  Three backends:

* ``tpu``          strict eager, op by op (TorchTPU's default);
* ``tpu-fused``    fused eager: ops are deferred and fused by XLA;
* ``tpu-compile``  ``torch.compile(backend="tpu")``.

None of this has run on a TPU in torchport's test suite: it follows the
published API of torch_tpu 0.2.0 (see docs/backends.md).  Device basics go
through ``torch.accelerator``: on torch >= 2.11 TorchTPU rejects most
``torch.tpu.*`` device calls made from user code.

The workers run in torchport's own interpreter, not in an environment of their
own: torch_tpu installs next to the torch the user already has (2.11 to 2.15),
which is the torch their app will run on.

Availability is decided without importing torch_tpu: importing it on a TPU host
renames PrivateUse1 and may start the TPU runtime, which the parent process
must never do.  It reads the PCI bus instead, as torch_tpu itself does.  The
helpers below take the filesystem root as a parameter so that the tests can
point them at a folder laid out like /sys and /dev.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path
from typing import Any, ClassVar

from torchport.backends import NOT_VERIFIED, Availability, Backend
from torchport.errors import UserError

GOOGLE_PCI_VENDOR = "0x1ae0"
# Google's vendor id also covers non-TPU devices (the gVNIC network card is
# 0x1ae0:0x0042), so only these device ids count as TPUs (torch_tpu 0.2.0
# hardware.py).
TPU_PCI_DEVICES = {"0x005e": "TPU v4", "0x0063": "TPU v5e", "0x0062": "TPU v5p", "0x006f": "TPU v6e",
                   "0x0076": "TPU v7"}
TORCH_TPU_MIN_TORCH = (2, 11)


class BackendUnavailable(UserError):
    """The backend cannot run on this machine (package or hardware missing).
    Ends that backend's run only."""

    kind = "environment"


# --- looking without importing ----------------------------------------------------------------


def installed_version(distribution: str, module: str) -> str | None:
    """The installed version of a distribution whose module is importable from
    this interpreter, found without importing it."""
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


def release(version: str) -> tuple[int, ...]:
    """(2, 14, 1) from "2.14.1+cpu"; good enough to compare release numbers."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def find_tpus(root: Path | str = "/") -> list[dict[str, str]]:
    """TPU chips on the PCI bus: address, PCI device id and generation."""
    found = []
    for folder in sorted((Path(root) / "sys/bus/pci/devices").glob("*")):
        try:
            vendor = (folder / "vendor").read_text().strip().lower()
            device = (folder / "device").read_text().strip().lower()
        except OSError:
            continue
        if vendor == GOOGLE_PCI_VENDOR and device in TPU_PCI_DEVICES:
            found.append({"address": folder.name, "pci_device": device, "generation": TPU_PCI_DEVICES[device]})
    return found


def vfio_groups(root: Path | str = "/") -> list[str]:
    """VFIO groups under /dev/vfio: the TPU runtime opens the chips through them."""
    folder = Path(root) / "dev/vfio"
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if entry.name != "vfio")


def describe_tpus(tpus: list[dict[str, str]]) -> str:
    generations = sorted({tpu["generation"] for tpu in tpus})
    return f"{' / '.join(generations)} x{len(tpus)} (PCI {', '.join(sorted({t['pci_device'] for t in tpus}))})"


def tpu_availability(root: Path | str = "/") -> Availability:
    tpus = find_tpus(root)
    on_bus = f"; this machine has {describe_tpus(tpus)} on the PCI bus" if tpus else ""
    version = installed_version("torch_tpu", "torch_tpu")
    if version is None:
        return Availability(False, f"torch_tpu is not installed in this interpreter "
                                   f"(pip install torch_tpu; needs torch>=2.11){on_bus}")
    torch_version = installed_version("torch", "torch") or "unknown"
    if release(torch_version) < TORCH_TPU_MIN_TORCH:
        return Availability(False, f"torch_tpu {version} needs torch>=2.11; this interpreter has torch {torch_version}")
    if not tpus:
        return Availability(False, f"torch_tpu {version} installed but no TPU on the PCI bus (vendor {GOOGLE_PCI_VENDOR})")
    if not vfio_groups(root):
        return Availability(False, f"torch_tpu {version} installed and {describe_tpus(tpus)} on the PCI bus, "
                                   "but no VFIO group under /dev/vfio: the TPU runtime cannot open the chips")
    libtpu = installed_version("libtpu", "libtpu")
    if libtpu is None:
        return Availability(False, f"torch_tpu {version} installed and {describe_tpus(tpus)} present, "
                                   "but libtpu is not installed (pip install libtpu)")
    return Availability(True, f"{describe_tpus(tpus)}; torch_tpu {version}, libtpu {libtpu}")


# --- the worker side, shared by the out-of-tree accelerators (TorchTPU, TorchNeuron) --------------


class AcceleratorBackend(Backend):
    """An out-of-tree device that registers itself with torch as PrivateUse1
    and is driven through ``torch.accelerator``."""

    vendor_module: ClassVar[str] = ""

    def setup(self) -> None:
        import importlib

        import torch

        available = type(self).availability()
        if not available.available:
            raise BackendUnavailable(available.reason)
        importlib.import_module(self.vendor_module)  # normally autoloaded by `import torch` already
        accelerator = torch.accelerator.current_accelerator()
        if accelerator is None or accelerator.type != self.device_type:
            raise BackendUnavailable(
                f"{self.vendor_module} imported but torch's accelerator is {accelerator}, not {self.device_type!r}"
            )
        self.device = torch.device(self.device_type, torch.accelerator.current_device_index())

    def synchronize(self) -> None:
        import torch

        torch.accelerator.synchronize()

    def reset_peak_memory(self) -> None:
        import torch

        try:
            torch.accelerator.reset_peak_memory_stats()
        except RuntimeError:  # the allocator may not implement it; memory() then says so
            pass

    def memory(self) -> dict[str, Any] | None:
        import torch

        try:
            return {
                "peak_allocated_bytes": torch.accelerator.max_memory_allocated(),
                "peak_reserved_bytes": torch.accelerator.max_memory_reserved(),
                "source": "torch.accelerator.max_memory_allocated / max_memory_reserved",
            }
        except RuntimeError:
            return None


class TPU(AcceleratorBackend):
    name = "tpu"
    title = "Google TPU (TorchTPU), strict eager"
    device_type = "tpu"
    vendor_module = "torch_tpu"
    verification = NOT_VERIFIED
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
        torch.tpu.eager_mode = getattr(torch.tpu.EagerMode, self.eager_mode)

    def device_info(self) -> dict[str, Any]:
        import torch

        return {
            "device": str(self.device),
            "name": torch.tpu.get_device_name(),
            "devices": torch.accelerator.device_count(),
            "eager_mode": self.eager_mode,
            "torch_tpu": installed_version("torch_tpu", "torch_tpu"),
            "libtpu": installed_version("libtpu", "libtpu"),
        }

    def counters(self) -> dict[str, Any]:
        """TorchTPU's compilation-cache statistics, where this version exposes
        them (a private call in 0.2.0; absent means no figures, not zero)."""
        import torch

        stats = getattr(torch.tpu, "_get_cache_stats", None)
        if stats is None:
            return {}
        values = stats()
        return {key: values[key] for key in ("num_cache_hits", "num_cache_reqs", "num_compilations") if key in values}

    def summarize_counters(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        if not after:
            return {}
        delta = {key: after[key] - before.get(key, 0) for key in after}
        return {
            "compilations": delta.get("num_compilations"),
            "cache_hits": delta.get("num_cache_hits"),
            "cache_misses": (delta["num_cache_reqs"] - delta["num_cache_hits"])
            if "num_cache_reqs" in delta and "num_cache_hits" in delta else None,
            "source": "torch.tpu._get_cache_stats (TorchTPU eager compilation cache)",
        }

    def new_compilations(self, before: dict[str, Any], after: dict[str, Any]) -> int | None:
        if "num_compilations" not in after:
            return None
        return after["num_compilations"] - before.get("num_compilations", 0)


class TPUFused(TPU):
    name = "tpu-fused"
    title = "Google TPU (TorchTPU), fused eager"
    eager_mode = "DEFER_AND_FUSE"


class TPUCompile(TPU):
    name = "tpu-compile"
    title = "Google TPU (TorchTPU), torch.compile(backend=\"tpu\")"
    compile_backend = "tpu"
