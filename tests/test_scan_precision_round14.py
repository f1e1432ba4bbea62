"""Round 14: error/silent only where the line is on the default path of a user without CUDA
(docs/precision/round14.md).  Each test holds lines that run only under an opt-in option, a
flag computed from CUDA, an NVIDIA-only runtime or a per-device extension build quiet, and a
close line on the default path at error/silent.  The snippets are written for these tests,
shaped like the judged code; the runtime tests execute them for real on this CPU build of torch."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.report import render_text
from torchport.scan.scanner import scan


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


_FP16_SCRIPT = '''
    import argparse

    import torch


    def main(argv=None):
        parser = argparse.ArgumentParser()
        parser.add_argument("--fp16", action="store_true")
        parser.add_argument("--cache_on_gpu", action="store_true")
        parser.add_argument("--pin", default=True)
        args = parser.parse_args(argv)
        model = torch.nn.Linear(4, 2)
        if args.fp16:
            scaler = torch.cuda.amp.GradScaler()  # quiet
        if args.cache_on_gpu:
            model = model.cuda()  # quiet
        if args.pin:
            model = model.cuda()  # kept
        return model
'''


def test_an_option_off_by_default_is_quiet_and_one_on_by_default_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "train.py", _FP16_SCRIPT))


def test_the_opt_in_lines_are_not_reached_by_default_on_this_cpu_build(tmp_path):
    # the measurement behind the rule: by default the script runs here; the option reaches the CUDA line
    assert not torch.cuda.is_available()
    _write(tmp_path, "train.py", _FP16_SCRIPT)
    run = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import train; train.main(sys.argv[2:])",
           str(tmp_path)]
    assert subprocess.run(run + ["--pin", ""], capture_output=True).returncode == 0  # "" turns the kept line off
    failed = subprocess.run(run + ["--cache_on_gpu"], capture_output=True, text=True)
    assert failed.returncode != 0 and "CUDA" in failed.stderr


def test_options_of_a_config_object_gates_and_early_returns(tmp_path):
    # a trainer reading its options from an object built elsewhere; a data condition keeps its line
    _check(tmp_path, _write(tmp_path, "trainer.py", '''
        import torch
        import torch.distributed as dist


        class Trainer:
            def __init__(self, model, args):
                self.args = args
                self.model = model
                self.cache_length = 100

            def step(self, batch):
                if self.args.fp16:
                    with torch.cuda.amp.autocast():  # quiet
                        loss = self.model(batch)
                else:
                    loss = self.model(batch)
                if self.args.distributed and self.args.world_size > 1:
                    dist.init_process_group("nccl")  # quiet
                self.offload = True if batch.shape[0] > self.cache_length else False
                if self.offload:
                    batch = batch.cuda()  # kept
                if loss is None:
                    loss = torch.zeros(1, device="cuda")  # kept
                return loss

            def setup_parallel(self, rank, use_ddp=False):
                if not use_ddp:
                    return self.model
                torch.cuda.set_device(rank)  # quiet
                return self.model

            def pick(self, rank, world_size):
                if world_size < 2:
                    return self.model
                torch.cuda.set_device(rank)  # kept
                return self.model
        '''))


def test_close_shapes_that_stay_on_the_default_path(tmp_path):
    # a required value checked by a raise, a device choice gated by an option (its CPU fallback is the
    # default), and a parameter off here that the calling class turns on by default
    _check(tmp_path, _write(tmp_path, "evaluate.py", '''
        import sys

        import torch


        def run(args, model):
            if not args.source:
                print("missing source", file=sys.stderr)
                raise SystemExit(1)
            model = model.cuda()  # kept
            device = "cuda" if args.cuda and torch.cuda.is_available() else "cpu"  # kept
            return model, device


        def accumulate(chunk, compiled=False):
            if compiled:
                return torch.compile(chunk, backend="inductor")  # kept
            return chunk


        class Loss:
            def __init__(self, options, compiled: bool = True):
                self.options = options
                self.compiled = compiled

            def __call__(self, chunk):
                if self.options.offload:
                    chunk = chunk.cuda()  # quiet
                if self.training:
                    chunk = chunk.cuda()  # kept
                return accumulate(chunk, self.compiled)
        '''))


def test_a_flag_computed_from_cuda_is_a_guard(tmp_path):
    _check(tmp_path, _write(tmp_path, "index.py", '''
        import torch


        class Indexer:
            def __init__(self, config, keep_on_gpu=True):
                self.use_gpu = config.visible_gpus > 0
                self.keep_on_gpu = keep_on_gpu

            def encode(self, codes):
                if self.use_gpu:
                    codes = codes.cuda()  # quiet
                if self.keep_on_gpu:
                    codes = codes.cuda()  # kept
                return codes


        def evaluate(batch):
            use_gpu = True if torch.cuda.is_available() else False
            if use_gpu:
                batch = batch.to("cuda:0")  # quiet
            return batch
        '''))


def test_an_nvidia_runtime_module_is_cuda_by_design(tmp_path):
    serving = _write(tmp_path, "serving/engine.py", '''
        import tensorrt_llm
        import torch


        class Engine:
            def __init__(self, rank):
                self.device = torch.device(f"cuda:{rank}")  # quiet
                self.session = tensorrt_llm.runtime.Session
        ''')
    model = _write(tmp_path, "serving/model.py", '''
        import torch


        class Model:
            def __init__(self, rank):
                self.device = torch.device(f"cuda:{rank}")  # kept
        ''')
    _check(tmp_path, serving, model)


def test_a_cuda_extension_with_device_twins_is_a_dispatch_and_one_without_stays(tmp_path):
    kernel = '''
        #include <cuda_runtime.h>  // # {mark}

        __device__ unsigned lane() {{
          unsigned id;
          asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));  // # {mark}
          return id;
        }}
        '''
    twin = _write(tmp_path, "quant/kernels/cuda/pack.cu", kernel.format(mark="quiet"))
    _write(tmp_path, "quant/kernels/hip/pack.hip", "// the ROCm build of pack\n")
    _write(tmp_path, "quant/kernels/__init__.py", '''
        import torch

        if torch.cuda.is_available() and torch.version.cuda:
            from .cuda import *
        elif torch.version.hip:
            from .hip import *
        ''')
    alone = _write(tmp_path, "ops/cuda/pack.cu", kernel.format(mark="kept"))
    _write(tmp_path, "ops/cpu/pack.cpp", "// a CPU build, not a non-CUDA accelerator twin\n")
    _write(tmp_path, "ops/__init__.py", "import torch\nif torch.cuda.is_available():\n    from .cuda import *\n")
    findings = scan([tmp_path], ScanConfig(), jobs=1).findings
    for path, mark in ((twin, "quiet"), (alone, "kept")):
        rocm = {f.line: f for f in findings if f.path.endswith(str(path.relative_to(tmp_path)))}
        serious = {line for line, f in rocm.items() if f.severity_cap != "info"}
        assert serious == (set() if mark == "quiet" else {1, 5}), (path, serious)


# torch.cuda calls executed here, on a CPU build: seeding is a no-op, these others raise.
_NO_OP_OFF_CUDA = ("manual_seed(0)", "manual_seed_all(0)", "is_available()", "device_count()", "empty_cache()")
_RAISE_OFF_CUDA = ("reset_peak_memory_stats()", "memory_summary()", "synchronize()", "current_device()",
                   "set_device(0)", "set_per_process_memory_fraction(0.5)")


@pytest.mark.parametrize("call", _NO_OP_OFF_CUDA)
def test_these_torch_cuda_calls_do_nothing_off_cuda(call):
    assert not torch.cuda.is_available()
    eval("torch.cuda." + call)  # noqa: S307 - a fixed call from the list above


@pytest.mark.parametrize("call", _RAISE_OFF_CUDA)
def test_these_torch_cuda_calls_raise_off_cuda(call):
    assert not torch.cuda.is_available()
    with pytest.raises(Exception):  # noqa: B017 - AttributeError, KeyError or AssertionError by call
        eval("torch.cuda." + call)  # noqa: S307 - a fixed call from the list above


def test_cuda_seeding_after_torch_manual_seed_is_quiet_and_alone_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "seeding.py", '''
        import random

        import torch


        def set_seed(seed, n_gpu):
            random.seed(seed)
            torch.manual_seed(seed)
            if n_gpu > 0:
                torch.cuda.manual_seed_all(seed)  # quiet


        def seed_gpus_only(seed):
            random.seed(seed)
            torch.cuda.manual_seed_all(seed)  # kept
        '''))


def test_text_output_says_how_many_hidden_findings_are_opt_in(tmp_path):
    _write(tmp_path, "train.py", _FP16_SCRIPT)
    text = render_text(scan([tmp_path], ScanConfig(), jobs=1))
    assert "info finding(s) not listed, 2 of them only under an opt-in option (--show-info" in text


_AFTER_NON_ASCII = '''
    import argparse

    import torch


    def main(argv=None):
        parser = argparse.ArgumentParser()
        parser.add_argument("--gpu", action="store_true")
        args = parser.parse_args(argv)
        t = torch.zeros(3)
        print("ééééééééééééééééé", args.gpu and t.cuda())  # quiet
        print("ééééééééééééééééé", args.gpu or t.cuda())  # kept
        return t
'''


def test_an_opt_in_gate_after_non_ascii_text_is_read_in_characters(tmp_path):
    # finding columns count characters, ast offsets bytes: seventeen two-byte characters moved
    # the gated call outside the `and` it sits in
    _check(tmp_path, _write(tmp_path, "train.py", _AFTER_NON_ASCII))


_COLUMNS_AFTER_NON_ASCII = '''
    import torch
    import torch.multiprocessing as mp


    def _worker(rank, tag="éééééééééééééééééééé", device="cuda"):  # kept
        return torch.zeros(1, device=device)


    def main():
        mp.spawn(_worker, args=("x",), nprocs=2)


    def build(ds, name, pin_memory, device):
        return ds


    def make(ds, settings):
        loader = build(ds, "éééééééééééééééééééééééééééééé", pin_memory=settings.pin_for_this_dataset, device="cuda" if torch.cuda.is_available() else "cpu")  # kept
        return loader


    def make_quietly(ds):
        return build(ds, "é", pin_memory=torch.cuda.is_available(), device="cpu")  # quiet
'''


def test_positions_after_non_ascii_text_are_read_in_characters(tmp_path):
    # a spawned worker's "cuda" default that spawn does not fill, and a device choice beside a
    # pin_memory= keyword: two-byte characters before them on the line moved them into the wrong node
    _check(tmp_path, _write(tmp_path, "spawned.py", _COLUMNS_AFTER_NON_ASCII))
