"""The CPU, eager and under torch.compile (inductor).  The reference backend."""
from __future__ import annotations

import platform

from torchport import glossary
from torchport.backends import VERIFIED_HERE, Backend


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class CPU(Backend):
    name = "cpu"
    title = "CPU, eager"
    device_type = "cpu"
    family = glossary.CPU
    verification = VERIFIED_HERE

    def device_info(self) -> dict[str, str | int | None]:
        import torch

        return {"device": "cpu", "name": _cpu_model(), "threads": torch.get_num_threads()}


class CPUCompile(CPU):
    name = "cpu-compile"
    title = "CPU, torch.compile (inductor)"
    compile_backend = "inductor"
