"""NVIDIA CUDA, and AMD ROCm builds of PyTorch (which present as "cuda")."""
from __future__ import annotations

import shutil
import subprocess

from torchport import glossary
from torchport.backends import Availability, Backend, cpu_only_torch
from torchport.records import DeviceMemory

# What benchmarks/gpu_check.sh ran on real hardware (its outputs are kept in
# benchmarks/results/h200-2026-11-30/); CI has no GPU, so nothing newer is.
VERIFIED_ON_GPU = ("run on one NVIDIA H200 (torch 2.11.0+cu130, driver 580.159.04) by benchmarks/gpu_check.sh "
                   "on 2026-11-30: evaluate, check parity/checkpoint, harness benchmark; not on ROCm; "
                   "not in CI (no GPU there)")


class CUDA(Backend):
    name = "cuda"
    title = "CUDA / ROCm GPU, eager"
    device_type = "cuda"
    family = glossary.CUDA
    verification = VERIFIED_ON_GPU
    process_group_backend = "nccl"

    @classmethod
    def availability(cls) -> Availability:
        cpu_only = cpu_only_torch()
        if cpu_only:
            return Availability(False, f"torch {cpu_only} is a build without CUDA or ROCm support")
        import torch

        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            return Availability(False, f"torch {torch.__version__} is a build without CUDA or ROCm support")
        if not torch.cuda.is_available():
            runtime = f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None) else f"CUDA {torch.version.cuda}"
            return Availability(False, f"torch {torch.__version__} ({runtime}) found no usable GPU")
        return Availability(True, f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")

    def setup(self) -> None:
        import torch

        self.device = torch.device("cuda", torch.cuda.current_device())

    def device_info(self) -> dict[str, str | int | None]:
        import torch

        props = torch.cuda.get_device_properties(self.device)
        info: dict[str, str | int | None] = {
            "device": str(self.device),
            "name": props.name,
            "memory_bytes": props.total_memory,
            "runtime": f"HIP {torch.version.hip}" if getattr(torch.version, "hip", None) else f"CUDA {torch.version.cuda}",
            "capability": f"{props.major}.{props.minor}",
        }
        info["driver"] = driver_version()
        return info

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)

    def reset_peak_memory(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats(self.device)

    def device_memory(self) -> DeviceMemory | None:
        import torch

        return DeviceMemory(peak_allocated_bytes=torch.cuda.max_memory_allocated(self.device),
                            peak_reserved_bytes=torch.cuda.max_memory_reserved(self.device),
                            source="torch.cuda.max_memory_allocated / max_memory_reserved")


class CUDACompile(CUDA):
    name = "cuda-compile"
    title = "CUDA / ROCm GPU, torch.compile (inductor)"
    compile_backend = "inductor"


def driver_version() -> str | None:
    tool = shutil.which("nvidia-smi") or shutil.which("rocm-smi")
    if tool is None:
        return None
    args = [tool, "--query-gpu=driver_version", "--format=csv,noheader"] if "nvidia" in tool else [tool, "--showdriverversion"]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0].strip() if out else None
