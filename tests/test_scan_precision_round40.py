"""A device compared with ``torch.device("cuda")``.  Shape from the verdicts of judge 50 (seed 555827):
realtabformer's ``if device == torch.device("cuda"): self.model.cuda()``, judged incorrect at error
twice (guarded: the move runs only when the device is CUDA), which scan read as a device test only
when the comparison was with the string ``"cuda"``."""
from __future__ import annotations

from pathlib import Path

import torch

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_FIT = """
    import torch


    class Trainer:
        def fit(self, device):
            device = torch.device(device)
            if device == torch.device("cuda"):
                self.model.cuda()  # quiet
            if device != torch.device("cuda:0"):
                return self.model
            return self.model.cuda()  # quiet

        def place(self, device):
            if device == torch.device("cpu"):
                return self.model
            return self.model.cuda()  # kept
"""


def test_a_device_equal_to_torch_device_cuda_is_cuda(tmp_path: Path) -> None:
    # what the reading rests on: such a device is CUDA, and no other device equals it
    assert torch.device("cuda") == torch.device("cuda") and torch.device("mps") != torch.device("cuda")
    path = _write(tmp_path, "trainer.py", _FIT)
    check_marked_lines([path], (path,))
