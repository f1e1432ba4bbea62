"""Round 15: a line reached only when the device is CUDA (or XLA), tested in the forms scan did
not read before (docs/precision/round15.md).  Each test holds lines under such a device test
quiet and a close line that runs on every device at error/silent.  The snippets are written for
these tests, shaped like the judged code; one is executed on this CPU build of torch to show the
guarded lines are not reached."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


_HELPER_GUARD = '''
    import torch


    def _on_nvidia(device):
        """True for a CUDA device with a live context."""
        return isinstance(device, torch.device) and device.type == "cuda" and torch.cuda.is_initialized()


    def start(device):
        if _on_nvidia(device):
            torch.cuda.reset_peak_memory_stats(device)  # quiet
        torch.cuda.reset_peak_memory_stats(device)  # kept


    def used(device):
        if not _on_nvidia(device):
            return 0
        return torch.cuda.max_memory_allocated(device)  # quiet


    def measure(device):
        if device.type in ("cuda", "xla"):
            torch.cuda.synchronize()  # quiet
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()  # quiet
        if device.type != "cpu":
            torch.cuda.synchronize()  # kept
        return device
'''


def test_a_helper_returning_a_device_test_guards_its_branch_and_a_cpu_test_does_not(tmp_path):
    _check(tmp_path, _write(tmp_path, "memory_bar.py", _HELPER_GUARD))


def test_the_guarded_lines_are_not_reached_on_this_cpu_build(tmp_path):
    # the measurement behind the rule: off CUDA the guarded calls never run; the unguarded one raises
    assert not torch.cuda.is_available()
    _write(tmp_path, "memory_bar.py", _HELPER_GUARD)
    run = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import torch, memory_bar; "
           "d = torch.device('cpu'); print(memory_bar.used(d)); memory_bar.start(d)", str(tmp_path)]
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.stdout.strip() == "0"  # used() returned before its CUDA call
    assert done.returncode != 0 and "start" in done.stderr  # start() reached its unguarded CUDA call


_TENSOR_AND_XLA_GUARDS = '''
    import torch


    def dtw(x):
        if x.is_cuda:
            return x.cuda()  # quiet
        return x.cuda()  # kept


    def step_boundary(module):
        if getattr(getattr(module, "device", None), "type", None) != "xla":
            return
        import torch_xla  # quiet


    def sync(module):
        import torch_xla  # kept
'''


def test_a_tensor_test_and_an_early_return_off_xla_guard_the_lines_after_them(tmp_path):
    _check(tmp_path, _write(tmp_path, "ops.py", _TENSOR_AND_XLA_GUARDS))


_CHOSEN_BY_DEVICE = '''
    import time

    import torch


    def _time_with_events():
        def elapsed():
            torch.cuda.synchronize()  # quiet
            return 0.0
        return elapsed()


    def _time_on_the_clock():
        return time.perf_counter()


    def _time_always():
        torch.cuda.synchronize()  # kept
        return 0.0


    def benchmark(device):
        timer = _time_with_events if device == "cuda" else _time_on_the_clock
        return timer() + _time_always()
'''


def test_a_private_timer_picked_only_for_cuda_is_quiet_inside_its_nested_helper(tmp_path):
    _check(tmp_path, _write(tmp_path, "bench.py", _CHOSEN_BY_DEVICE))


_PUBLIC_HELPER = '''
    import torch


    def align_cuda(x):
        return x.cuda()  # quiet


    def align_gpu(x):
        return x.cuda()  # kept


    def align(x):
        if x.is_cuda:
            return align_cuda(x)
        return align_gpu(x.cpu())
'''


def test_a_public_function_its_file_calls_only_for_cuda_tensors_is_quiet(tmp_path):
    _check(tmp_path, _write(tmp_path, "timing.py", _PUBLIC_HELPER))
