"""Round 41 (docs/precision/round41.md): a CUDA test the guards did not read, and float64 handed
to a call with nothing but the CPU.  Shaped like judge 52's lines: a seed helper that asks
``len(torch.cuda.default_generators) > 0`` before ``torch.cuda.current_device()``, and an export
that moves extra weights with ``weights_to(torch.device("cpu"), torch.float64)``.  Kept beside
them: tests of a CUDA build or toolkit (``"cu" in torch.__version__``, ``CUDA_HOME``), which hold
on a GPU-less build machine, and float64 calls given another device or moved on at once."""
from __future__ import annotations

from pathlib import Path

import torch

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_GUARDS = '''
    import sys

    import torch
    from torch.utils.cpp_extension import CUDA_HOME


    def seed_cuda():
        if hasattr(torch.cuda, "default_generators") and len(torch.cuda.default_generators) > 0:  # quiet
            device_idx = torch.cuda.current_device()  # quiet
            return torch.cuda.default_generators[device_idx].seed()  # quiet
        return int(torch.seed() % sys.maxsize)


    def capability():
        # a CUDA build or toolkit is not a GPU: a build container has both and no device
        if "cu" in torch.__version__ and CUDA_HOME is not None:
            major, minor = torch.cuda.get_device_capability()  # kept
            return f"{major}{minor}"
        if CUDA_HOME:
            return torch.cuda.get_device_name()  # kept
        return None


    def pick(x):
        if len(torch.cuda.default_generators) > 0:  # kept
            device = "cuda"
        else:
            device = "cpu"
        return x.to(device)


    def close_but_not_guarded(generators):
        if len(generators) > 0:
            return torch.cuda.current_device()  # kept
        if len(torch.cuda._queued_calls) > 0:
            return torch.cuda.current_device()  # kept
        return None
'''

_EXPORT = '''
    import torch


    class Model(torch.nn.Module):
        def export(self, device):
            self.to(device)
            self.additive.weights_to(torch.device("cpu"), torch.float64)  # quiet
            self.composition.weights_to(device="cpu", dtype=torch.float64)  # quiet
            self.scale.weights_to(device, torch.float64)  # kept
            moved = self.scale.weights_to("cpu", torch.float64).to(device)  # kept
            first = self.scale.weights_to("cpu", torch.float64)[0].to(device)  # kept
            wrapped = torch.as_tensor(self.scale.weights_to("cpu", torch.float64), device=device)  # kept
            staged = transfer(self.scale, "cpu", device, torch.float64)  # kept
            return torch.zeros(3, dtype=torch.float64, device=device), moved, staged, first, wrapped  # kept
'''


def test_a_cuda_generator_count_guards_its_body_and_a_build_or_toolkit_test_does_not(tmp_path: Path) -> None:
    path = _write(tmp_path, "seeds.py", _GUARDS)
    check_marked_lines([path], (path,))


def test_float64_handed_over_beside_the_cpu_is_not_on_mps(tmp_path: Path) -> None:
    path = _write(tmp_path, "model.py", _EXPORT)
    check_marked_lines([path], (path,))


def test_no_cuda_generator_without_cuda() -> None:
    # what the readings rest on, on this build without CUDA: no generator, and asking raises no error
    assert not torch.cuda.is_available()
    assert len(torch.cuda.default_generators) == 0
