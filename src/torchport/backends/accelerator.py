"""What the out-of-tree accelerators (TorchTPU, TorchNeuron) share: a device
that registers itself with torch as PrivateUse1 and is driven through
``torch.accelerator``, and looking at their packages without importing them
(the parent process serves every backend and must not start a device runtime)."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from typing import ClassVar

from torchport.backends import Backend
from torchport.errors import UserError
from torchport.records import DeviceMemory


class BackendUnavailable(UserError):
    """The backend cannot run on this machine (package or hardware missing).
    Ends that backend's run only."""

    kind = "environment"


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

    def device_memory(self) -> DeviceMemory | None:
        import torch

        try:
            return DeviceMemory(peak_allocated_bytes=torch.accelerator.max_memory_allocated(),
                                peak_reserved_bytes=torch.accelerator.max_memory_reserved(),
                                source="torch.accelerator.max_memory_allocated / max_memory_reserved")
        except RuntimeError:
            return None
