"""Round 16d: float64 that never reaches MPS, the one device without float64
(docs/precision/round16d.md).  Each test holds a float64 line that cannot run on MPS quiet and a
close line that can at error.  The snippets are written for these tests, shaped like the judged
code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import CUDA_MEMORY_STATS, FLOAT64
from torchport.scan.scanner import scan


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def _reason(root: Path, path: Path, text: str, rule: str = FLOAT64) -> str:
    """Why the float64 finding on the line of ``path`` holding ``text`` was lowered: the finding
    is still reported, with a reason the user can check."""
    line = next(n for n, source in enumerate(path.read_text().splitlines(), 1) if text in source)
    found = [f for f in scan([root], ScanConfig(), jobs=1).findings
             if f.rule_id == rule and f.line == line and path.as_posix().endswith(f.path)]
    assert found, line
    return found[0].cap_reason


_CPU_COPIES_ON_MPS = '''
    import torch


    def _eigen_on_host_for_mps(step, *tensors):
        """Run a solver that MPS lacks on CPU copies, then bring the result back."""
        where = tensors[0].device
        if where.type == "mps":
            return step(*(t.cpu() for t in tensors)).to(where)
        return step(*tensors)


    def _just_call(step, *tensors):
        return step(*tensors)


    def span(basis, target):
        def solve(local_basis, local_target):
            wide = local_basis.double()  # quiet
            return torch.linalg.lstsq(wide, local_target.double()).solution.to(local_target.dtype)  # quiet

        return _eigen_on_host_for_mps(solve, basis, target)


    def residual(basis, target):
        def solve(local_basis, local_target):
            return (local_basis.double() @ local_target.double()).float()  # kept

        return _just_call(solve, basis, target)
'''


def test_a_function_run_on_cpu_copies_where_the_device_is_mps_is_quiet(tmp_path):
    path = _write(tmp_path, "solvers.py", _CPU_COPIES_ON_MPS)
    _check(tmp_path, path)
    assert "_eigen_on_host_for_mps, which runs it on CPU copies" in _reason(tmp_path, path, "wide = local_basis")


_WORK_DEVICE = '''
    import torch


    def fit_nonnegative(columns, target):
        solve_on = torch.device("cpu") if target.device.type == "mps" else target.device
        wide = columns.to(device=solve_on).to(dtype=torch.float64)  # quiet
        goal = target.to(solve_on).double()  # quiet
        return torch.linalg.lstsq(wide, goal).solution


    def fit_in_place(columns, target):
        solve_on = target.device
        wide = columns.to(device=solve_on).to(dtype=torch.float64)  # kept
        return wide


    def fit_on_gpu_if_mps(columns, target):
        solve_on = torch.device("cpu") if target.device.type != "mps" else target.device
        return columns.to(device=solve_on).to(dtype=torch.float64)  # kept
'''


def test_a_work_device_that_is_the_cpu_where_the_device_is_mps_is_quiet(tmp_path):
    path = _write(tmp_path, "nnls.py", _WORK_DEVICE)
    _check(tmp_path, path)
    assert "moved first to solve_on, which is the CPU where the device is MPS" in _reason(tmp_path, path, "goal =")


_DTYPE_HELPER = '''
    import torch


    def wide_dtype_for(wanted, device_type):
        if device_type == "mps" and wanted == torch.float64:
            return torch.float32
        return wanted


    def widest(wanted, device_type):
        return wanted
'''

_DTYPE_USERS = '''
    import torch

    from rig.numerics import wide_dtype_for, widest


    def positions(count, device):
        dtype = wide_dtype_for(torch.float64, device.type)  # quiet
        return torch.arange(count, dtype=dtype, device=device)


    def frequencies(count, device):
        dtype = widest(torch.float64, device.type)  # kept
        return torch.arange(count, dtype=dtype, device=device)


    __all__ = ["positions", "frequencies"]
'''


def test_float64_through_a_helper_that_picks_another_dtype_on_mps_is_quiet(tmp_path):
    helper = _write(tmp_path, "rig/numerics.py", _DTYPE_HELPER)
    _write(tmp_path, "rig/__init__.py", "")
    users = _write(tmp_path, "rig/embedding.py", _DTYPE_USERS)
    _check(tmp_path, helper, users)
    assert "goes through wide_dtype_for" in _reason(tmp_path, users, "wide_dtype_for(torch.float64")


_DEVICELESS_EXAMPLE = '''
    import torch


    def demo():
        torch.set_default_dtype(torch.float64)  # quiet
        points = torch.tensor([[0.0, 0.0], [1.0, 0.5]])
        return points.norm(dim=1).to(points.dtype)
'''

_PLACED_EXAMPLE = '''
    import torch


    def demo(model, device):
        torch.set_default_dtype(torch.float64)  # kept
        points = torch.tensor([[0.0, 0.0], [1.0, 0.5]])
        return model.to(device)(points.to(device))
'''


def test_a_float64_default_dtype_in_a_file_that_names_no_device_is_quiet(tmp_path):
    path = _write(tmp_path, "examples/norms.py", _DEVICELESS_EXAMPLE)
    _check(tmp_path, path, _write(tmp_path, "examples/placed.py", _PLACED_EXAMPLE))
    assert "a file that names no device" in _reason(tmp_path, path, "set_default_dtype")


_CPU_BY_CONSTRUCTION = '''
    import torch


    def _split(scores, chosen, rows):
        picked = scores.index_select(0, rows.to(device=scores.device)).to(device="cpu")
        centre = picked.mean(dim=0)
        return picked - centre, centre


    def _rank_mean(values, hits):
        _, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
        counts = counts.to(dtype=torch.float64)  # quiet
        sizes = torch.bincount(inverse).to(dtype=torch.float64)  # quiet
        return float((counts.cumsum(0) / sizes)[inverse][hits].mean())


    def _summary(values, hits):
        return _rank_mean(values, hits)


    def evaluate(scores, chosen, rows, hits):
        centred, _ = _split(scores, chosen, rows)
        return _summary(centred @ chosen.float(), hits)


    def _on_the_device(values):
        return values.to(dtype=torch.float64)  # kept


    def score(scores):
        return _on_the_device(scores.to(device=scores.device))


    def rank_public(values):
        _, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
        return counts.to(dtype=torch.float64)  # kept
'''


def test_float64_on_a_tensor_traced_back_to_the_cpu_through_private_functions_is_quiet(tmp_path):
    path = _write(tmp_path, "probe_metrics.py", _CPU_BY_CONSTRUCTION)
    _check(tmp_path, path)
    assert "traced back to the CPU (line 5:" in _reason(tmp_path, path, "counts = counts.to")


_PAST_CUDA_EXIT = '''
    import torch


    class MemoryProbe:
        def calibrate(self, run):
            if not torch.cuda.is_available():
                return
            self.peak = self._measure(run)

        def _measure(self, run):
            torch.cuda.synchronize()  # quiet
            run()
            torch.cuda.synchronize()  # quiet
            return torch.cuda.max_memory_allocated()  # quiet

        def report(self, run):
            self.peak = self._measure_anyway(run)

        def _measure_anyway(self, run):
            torch.cuda.synchronize()  # kept
            run()
            return 0

        def log(self, run):
            if not torch.cuda.is_available():
                print("no CUDA")
            return self._measure_logged(run)

        def _measure_logged(self, run):
            torch.cuda.synchronize()  # kept
            return run()
'''


def test_a_private_method_called_only_past_an_early_return_without_cuda_is_quiet(tmp_path):
    path = _write(tmp_path, "memory_probe.py", _PAST_CUDA_EXIT)
    _check(tmp_path, path)
    reason = _reason(tmp_path, path, "return torch.cuda.max_memory", CUDA_MEMORY_STATS)
    assert "in _measure, which this file calls only after" in reason
