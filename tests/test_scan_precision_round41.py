"""Round 41 (docs/precision/round41.md): CUDA tests the guards did not read, and float64 handed
to a call beside the CPU.  Shaped like judge 52's lines: a seed helper that asks
``len(torch.cuda.default_generators) > 0`` before ``torch.cuda.current_device()``, a setup.py
that queries the device only ``if "cu" in torch.__version__ and CUDA_HOME is not None``, and an
export that moves extra weights with ``weights_to(torch.device("cpu"), torch.float64)``.  The
runtime test checks on this CPU build of torch what the readings rest on."""
from __future__ import annotations

from pathlib import Path

import torch
import torch.utils.cpp_extension

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_GUARDS = '''
    import sys

    import torch
    from torch.utils.cpp_extension import CUDA_HOME


    def seed_cuda():
        if hasattr(torch.cuda, "default_generators") and len(torch.cuda.default_generators) > 0:
            device_idx = torch.cuda.current_device()  # quiet
            return torch.cuda.default_generators[device_idx].seed()  # quiet
        return int(torch.seed() % sys.maxsize)


    def capability():
        if "cu" in torch.__version__ and CUDA_HOME is not None:
            major, minor = torch.cuda.get_device_capability()  # quiet
            return f"{major}{minor}"
        if CUDA_HOME:
            return torch.cuda.get_device_name()  # quiet
        return torch.cuda.get_device_capability()  # kept


    def close_but_not_guarded(generators):
        if len(generators) > 0:
            return torch.cuda.current_device()  # kept
        if "cu" in sys.version:
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
            return torch.zeros(3, dtype=torch.float64, device=device)  # kept
'''


def test_cuda_tests_by_generator_count_build_and_toolkit_guard_their_body(tmp_path: Path) -> None:
    path = _write(tmp_path, "seeds.py", _GUARDS)
    check_marked_lines([path], (path,))


def test_float64_handed_over_beside_the_cpu_is_not_on_mps(tmp_path: Path) -> None:
    path = _write(tmp_path, "model.py", _EXPORT)
    check_marked_lines([path], (path,))


def test_what_the_guards_read_on_this_cpu_build() -> None:
    # without CUDA there are no CUDA generators, the version names no CUDA build and no toolkit is found
    assert not torch.cuda.is_available()
    assert len(torch.cuda.default_generators) == 0
    assert "cu" not in torch.__version__  # "2.13.0+cpu"
    assert torch.utils.cpp_extension.CUDA_HOME is None  # set only by a CUDA build of torch
