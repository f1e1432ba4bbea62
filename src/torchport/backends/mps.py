"""Apple silicon GPUs through Metal Performance Shaders."""
from __future__ import annotations

import platform

from torchport import glossary
from torchport.backends import NOT_VERIFIED, Availability, Backend
from torchport.records import DeviceMemory


class MPS(Backend):
    name = "mps"
    title = "Apple GPU (MPS), eager"
    device_type = "mps"
    family = glossary.MPS
    verification = NOT_VERIFIED

    @classmethod
    def availability(cls) -> Availability:
        if platform.system() != "Darwin":
            return Availability(False, f"MPS needs macOS; this is {platform.system()}")
        import torch

        if not torch.backends.mps.is_built():
            return Availability(False, f"torch {torch.__version__} was built without MPS")
        if not torch.backends.mps.is_available():
            return Availability(False, "MPS is built but no Metal device is usable (macOS 12.3+ on Apple silicon needed)")
        return Availability(True)

    def device_info(self) -> dict[str, str | int | None]:
        return {"device": "mps", "name": platform.machine(), "os": platform.mac_ver()[0]}

    def synchronize(self) -> None:
        import torch

        torch.mps.synchronize()

    def device_memory(self) -> DeviceMemory | None:
        import torch

        # MPS keeps no peak counter: this is the allocation at the time of reading.
        return DeviceMemory(current_allocated_bytes=torch.mps.current_allocated_memory(),
                            driver_allocated_bytes=torch.mps.driver_allocated_memory(),
                            source="torch.mps.current_allocated_memory (no peak counter on MPS)")
