"""Round 18d (docs/precision/round18d.md): findings on a distributed path that already needs CUDA.
A line after ``init_process_group("nccl")`` in the same function runs only where NCCL, an NVIDIA
library, started: the call is the lock-in and keeps its severity, the lines after it are info.
``rank % torch.cuda.device_count()`` handed to ``torch.cuda.set_device`` raises ZeroDivisionError
where CUDA is absent instead of silently changing anything: set_device is the lock-in.  The
snippets are written for these tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import worst_by_line
from scan_marks import write_snippet as _write
from torchport.scan.rules import CUDA_DEVICE_MANAGEMENT, CUDA_DEVICE_STRING


_NCCL_MAIN = '''
    import torch
    import torch.distributed as dist
    from torch.distributed import init_process_group


    def main(overrides):
        init_process_group(backend="nccl")
        if dist.is_initialized():
            assert torch.cuda.device_count() >= dist.get_world_size()
            overrides["device"] = f"cuda:{dist.get_rank()}"
        return overrides


    def evaluate(overrides):
        if dist.is_initialized():
            assert torch.cuda.device_count() >= dist.get_world_size()
        init_process_group(backend="nccl")
        return overrides


    def launch(rank):
        backend = "nccl"
        dist.init_process_group(backend=backend, rank=rank)
        return rank % torch.cuda.device_count()
'''


def test_after_an_nccl_process_group_is_info_and_the_group_itself_stays(tmp_path: Path) -> None:
    _write(tmp_path, "sdkit/main.py", _NCCL_MAIN)
    found = worst_by_line(tmp_path)
    severity, reason = found[("main.py", 9, CUDA_DEVICE_MANAGEMENT)]
    assert severity == "info"
    assert "NCCL backend (line 7)" in reason
    assert found[("main.py", 10, CUDA_DEVICE_STRING)][0] == "info"
    # before the group is started nothing has failed yet: the count there keeps its severity
    assert found[("main.py", 16, CUDA_DEVICE_MANAGEMENT)][0] in ("error", "silent")
    # the backend named through a local bound to "nccl"
    severity, reason = found[("main.py", 24, CUDA_DEVICE_MANAGEMENT)]
    assert severity == "info"
    assert "NCCL backend (line 23)" in reason


_SLURM = '''
    import os

    import torch
    import torch.distributed as dist


    def init_slurm(backend):
        proc_id = int(os.environ["SLURM_PROCID"])
        num_gpus = torch.cuda.device_count()
        torch.cuda.set_device(proc_id % num_gpus)
        dist.init_process_group(backend=backend)


    def init_distributed_mode(world_size=1):
        if "SLURM_PROCID" in os.environ:
            rank = int(os.environ["SLURM_PROCID"])
            device_id = rank % torch.cuda.device_count()
        else:
            return False, world_size, None
        torch.cuda.set_device(device_id)
        return True, world_size, [device_id]


    def shard_of(index):
        n = torch.cuda.device_count()
        return index % n, n
'''


def test_a_count_that_only_divides_a_rank_for_set_device_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "distkit/dist_util.py", _SLURM)
    found = worst_by_line(tmp_path)
    for line, set_device_line in ((9, 10), (17, 20)):
        severity, reason = found[("dist_util.py", line, CUDA_DEVICE_MANAGEMENT)]
        assert severity == "info", line
        assert f"torch.cuda.set_device (line {set_device_line})" in reason
    # a count also read for itself (returned) is not only a divisor: it keeps its severity
    assert found[("dist_util.py", 25, CUDA_DEVICE_MANAGEMENT)][0] in ("error", "silent")
