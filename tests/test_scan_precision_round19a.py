"""Round 19a: float64 (TP701, an error on MPS) that never reaches MPS (docs/precision/round19a.md):
a tensor moved to or made on a device name bound only to the CPU (``host = torch.device("cpu")``),
and a float64 line after ``if <device is MPS>: raise`` in its function.  Each test holds a false
alarm quiet and a close lock-in line (float64 on a device the user chooses) at error.  The
snippets are written for these tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

import pytest

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def test_float64_on_a_name_bound_to_the_cpu_is_quiet_and_on_the_callers_device_kept(tmp_path: Path) -> None:
    # kornia _ransac_program.py: `host = torch.device("cpu")`, `pool.to(host).double()`
    path = _write(tmp_path, "program.py", '''
        import torch


        def refine(points, pool, device):
            host = torch.device("cpu")
            points_host = points.detach().to(host).double()
            finite = torch.isfinite(points_host).all(1)
            weights = finite.to(torch.float64)[None]  # quiet
            eye = torch.eye(3, dtype=torch.float64, device=host)  # quiet
            candidates = torch.where(finite[:, None, None], pool.to(host).double(), eye)  # quiet
            on_device = torch.full((), -1.0, dtype=torch.float64, device=device)  # kept
            moved = pool.to(device).double()  # kept
            return weights, candidates, on_device, moved
    ''')
    check_marked_lines([tmp_path], (path,))


def test_a_device_name_given_by_the_caller_is_not_read_as_the_cpu(tmp_path: Path) -> None:
    path = _write(tmp_path, "place.py", '''
        import torch

        host = torch.device("cpu")


        def on_module_host(values):
            return torch.tensor(values, dtype=torch.float64, device=host)  # quiet


        def on_given(values, host):
            return torch.tensor(values, dtype=torch.float64, device=host)  # kept
    ''')
    check_marked_lines([tmp_path], (path,))


def test_float64_after_a_raise_for_mps_is_quiet_and_without_the_raise_kept(tmp_path: Path) -> None:
    # kornia connected_components (`== "mps": raise`) and RANSAC._forward_compiled (`not in ("cpu", "cuda")`)
    path = _write(tmp_path, "labels.py", '''
        import torch


        def label(image):
            id_dtype = torch.float32
            if image.numel() > 2**24:
                if image.device.type == "mps":
                    raise ValueError("no float64 on MPS: run it on the CPU")
                id_dtype = torch.float64  # quiet
            return image.to(id_dtype)


        def compiled(points):
            if points.device.type not in ("cpu", "cuda"):
                raise ValueError(f"compiled runs on CPU and CUDA, not {points.device.type}")
            return points.to(torch.float64)  # quiet


        def warned(points):
            if points.device.type == "mps":
                print("float64 is slow here")
            return points.to(torch.float64)  # kept


        def refused_elsewhere(points):
            if points.device.type in ("cuda", "xpu"):
                raise ValueError("not here")
            return points.to(torch.float64)  # kept


        def raised_after(points):
            scores = points.to(torch.float64)  # kept
            if points.device.type == "mps":
                raise ValueError("too late")
            return scores
    ''')
    check_marked_lines([tmp_path], (path,))


def test_a_private_function_chosen_only_for_cpu_inputs_is_quiet_and_one_called_unguarded_kept(tmp_path: Path) -> None:
    # kornia losses/dice.py: `if _dice_loss_cpu_eligible(pred, weight): return _dice_loss_cpu(...)`
    path = _write(tmp_path, "dice.py", '''
        import torch


        def _cpu_eligible(pred, weight):
            return pred.device.type == "cpu" and (weight is None or weight.dtype == pred.dtype)


        def _loss_cpu(pred, target):
            bins = pred.new_zeros(pred.shape[0], dtype=torch.float64)  # quiet
            return bins.index_add_(0, target, pred.sum(1).to(torch.float64))  # quiet


        def _loss_any(pred, target):
            return pred.to(torch.float64).sum() - target.to(torch.float64).sum()  # kept


        def dice_loss(pred, target, weight=None):
            if _cpu_eligible(pred, weight):
                return _loss_cpu(pred, target)
            if pred.device.type == "cuda":
                return _loss_any(pred, target)
            return _loss_any(pred, target)
    ''')
    check_marked_lines([tmp_path], (path,))


def test_float64_on_a_cuda_or_cpu_module_device_is_quiet_and_on_a_chosen_device_kept(tmp_path: Path) -> None:
    # synthcity: `DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")` in utils/constants.py
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/constants.py", '''
        import torch

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        ANY = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    ''')
    path = _write(tmp_path, "pkg/dag.py", '''
        import torch
        from torch import nn

        from pkg.constants import ANY, DEVICE


        class Dag(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d).to(DEVICE).double()  # quiet
                self.other = nn.Linear(d, d).to(ANY).double()  # kept

            def mask(self, shape, device):
                return torch.ones(shape).to(DEVICE).double(), torch.ones(shape).to(device).double()  # kept
    ''')
    check_marked_lines([tmp_path], (path,))


_PROGRAM = '''
    import torch


    def build_program(threshold):
        def program(points):
            return (points.abs() < threshold).sum(1, dtype=torch.float64)  # {mark}
        return program
'''


def test_a_private_module_imported_only_past_a_raise_for_mps_is_quiet(tmp_path: Path) -> None:
    # kornia _ransac_program.py, imported only in RANSAC._forward_compiled, which refuses MPS first
    _write(tmp_path, "pkg/__init__.py", "")
    program = _write(tmp_path, "pkg/_program.py", _PROGRAM.format(mark="quiet"))
    _write(tmp_path, "pkg/ransac.py", '''
        import torch


        class Ransac:
            def forward_compiled(self, points):
                """Runs :mod:`pkg._program` compiled."""
                from pkg._program import build_program

                if points.device.type not in ("cpu", "cuda"):
                    raise ValueError(f"compiled runs on CPU and CUDA, not {points.device.type}")
                return build_program(1.0)(points)

            def forward(self, points):
                return points.to(torch.float64)  # kept
    ''')
    check_marked_lines([tmp_path], (program, tmp_path / "pkg/ransac.py"))


_OTHER_IMPORTERS = {
    "eager": '''
        from pkg._program import build_program


        def forward(points):
            return build_program(1.0)(points)
    ''',
    "late": '''
        def forward_late(points):
            from pkg._program import build_program

            program = build_program(1.0)
            if points.device.type == "mps":
                raise ValueError("too late: built already")
            return program(points)
    ''',
    "by_string": '''
        import importlib


        def forward(points):
            return importlib.import_module("pkg._program").build_program(1.0)(points)
    ''',
}


@pytest.mark.parametrize("importer", sorted(_OTHER_IMPORTERS))
def test_a_private_module_also_reached_without_the_raise_is_kept(tmp_path: Path, importer: str) -> None:
    _write(tmp_path, "pkg/__init__.py", "")
    program = _write(tmp_path, "pkg/_program.py", _PROGRAM.format(mark="kept"))
    _write(tmp_path, "pkg/ransac.py", '''
        import torch


        def forward_compiled(points):
            from pkg._program import build_program

            if points.device.type == "mps":
                raise ValueError("not on MPS")
            return build_program(1.0)(points).to(torch.float64)  # quiet
    ''')
    _write(tmp_path, f"pkg/{importer}.py", _OTHER_IMPORTERS[importer])
    check_marked_lines([tmp_path], (program, tmp_path / "pkg/ransac.py"))
