"""Precision on the classes of false alarm the author found in a fresh development corpus
(accelerate, pytorch-lightning, torchmetrics, trl, timm, sentence-transformers from PyPI;
see docs/evidence.md): XLA/TPU implementations of an abstraction, the CUDA default of a
dispatch over accelerators, opt-in NVIDIA features (TensorRT, TransformerEngine, NVTX),
float64 that the user asked for, explicit errors, defaults every call overrides, and
guards not recognised.  Each test keeps a true lock-in line found, so recall does not drop."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

ALL_TARGETS = ScanConfig().targets


def _serious(tmp_path: Path, source: str, name: str = "mod.py") -> set[int]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    result = scan([path], ScanConfig())
    assert not result.skipped, result.skipped
    return {f.line for f in result.findings if finding_worst(f, ALL_TARGETS) in ("error", "silent")}


XLA_STRATEGY = '''
from mylib.strategies.ddp import DDPStrategy


def _wrap_policy(policy):
    from torch_xla.distributed.fsdp.wrap import size_based_auto_wrap_policy
    return size_based_auto_wrap_policy


class XLAFSDPStrategy(DDPStrategy):
    def barrier(self):
        import torch_xla.core.xla_model as xm
        xm.mark_step()
'''

XLA_APP = '''
import torch_xla.core.xla_model as xm


def train(model):
    device = xm.xla_device()
    return model.to(device)
'''


def test_the_xla_implementation_of_an_abstraction_is_info(tmp_path: Path) -> None:
    assert _serious(tmp_path, XLA_STRATEGY, "strategies/xla_fsdp.py") == set()
    # an application that uses torch_xla directly still has to move to TorchTPU
    assert _serious(tmp_path, XLA_APP, "train_xla.py") == {1, 5}


LAUNCHERS = '''
import torch_xla.distributed.xla_multiprocessing as xmp_top


def tpu_launcher(args):
    import torch_xla.distributed.xla_multiprocessing as xmp
    xmp.spawn(args.fn)


def multi_gpu_launcher(args):
    args.fn()
'''


def test_a_function_of_a_family_named_for_its_device_is_info(tmp_path: Path) -> None:
    assert _serious(tmp_path, LAUNCHERS, "launch.py") == {1}


DISPATCH = '''
import os

import torch
from mylib.imports import is_hpu_available, is_npu_available, is_xpu_available


def visible_devices(env, ids):
    if is_xpu_available():
        env["ZE_AFFINITY_MASK"] = ids
    elif is_npu_available():
        env["ASCEND_RT_VISIBLE_DEVICES"] = ids
    elif is_hpu_available():
        env["HABANA_VISIBLE_MODULES"] = ids
    else:
        env["CUDA_VISIBLE_DEVICES"] = ids


def move(model):
    if is_xpu_available():
        return model.to("xpu")
    elif is_npu_available():
        return model.to("npu")
    else:
        return model.cuda()
'''


def test_the_cuda_default_of_a_dispatch_is_info_unless_it_fails_on_the_cpu(tmp_path: Path) -> None:
    # the environment variable is harmless where CUDA is absent; .cuda() in the same
    # position still raises on a CPU-only host, which the chain does not handle
    assert _serious(tmp_path, DISPATCH) == {24}


OPT_IN = '''
import torch


class TransformerEnginePrecision:
    def forward_context(self):
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)


class Module:
    def to_tensorrt(self, sample, default_device="cuda"):
        import torch_tensorrt
        return torch_tensorrt.compile(self, inputs=[sample])

    def profile(self):
        if self._emit_nvtx:
            self._parent = torch.cuda.profiler.profile()
        return torch.cuda.Stream()
'''


def test_opt_in_nvidia_features_are_info(tmp_path: Path) -> None:
    assert _serious(tmp_path, OPT_IN) == {17}


DOUBLE = '''
import torch


class Plugin:
    pass


class DoublePrecision(Plugin):
    def convert_module(self, module):
        return module.double()


def input_dtype(plugin):
    if isinstance(plugin, DoublePrecision):
        return torch.double
    return torch.float32


def distance(x):
    return x.to(torch.float64)
'''


def test_float64_the_user_asked_for_is_info(tmp_path: Path) -> None:
    assert _serious(tmp_path, DOUBLE) == {20}


EXPLICIT = '''
import torch


def check(strategy, accelerator):
    if strategy == "fsdp" and accelerator not in ("cuda", "gpu"):
        raise ValueError("FSDP needs a GPU")


def pick():
    return "cuda" if torch.cuda.is_available() else "cpu"
'''


def test_a_raise_when_the_accelerator_is_not_cuda_is_not_silent(tmp_path: Path) -> None:
    assert _serious(tmp_path, EXPLICIT) == {10}


FINFO = '''
import torch

EPS = torch.finfo(torch.float64).eps


def stats(x):
    return torch.zeros(3, dtype=torch.float64, device=x.device)
'''


def test_finfo_of_float64_makes_no_tensor(tmp_path: Path) -> None:
    assert _serious(tmp_path, FINFO) == {7}


DEFAULTS = '''
import torch


class Prefetcher:
    def __init__(self, loader, device: torch.device = torch.device("cuda")):
        self.device = device


def make(loader, device):
    return Prefetcher(loader, device=device)


def autocast_on(device: str = "cuda"):
    try:
        return torch.is_autocast_enabled(device)
    except TypeError:
        return torch.is_autocast_enabled()


def norm(x):
    return autocast_on(x.device.type)


def make_default(loader, device=torch.device("cuda")):
    return loader, device
'''


def test_defaults_that_every_call_overrides_are_info(tmp_path: Path) -> None:
    # torch.is_autocast_enabled() is torch's function, not a call of autocast_on
    assert _serious(tmp_path, DEFAULTS) == {24}


CUDA_METHOD = '''
import torch
from torch import nn


class DeviceMixin(nn.Module):
    def cuda(self, device=None):
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        return super().cuda(device=device)

    def place(self):
        return self.to(torch.device("cuda", torch.cuda.current_device()))
'''


def test_a_class_own_cuda_method_is_info(tmp_path: Path) -> None:
    assert _serious(tmp_path, CUDA_METHOD) == {12}


GATES = '''
import torch
from mylib import is_triton_available

if is_triton_available():
    import triton


def accumulate(acc, a, b):
    if FAST_MM and acc.device.type == "cuda":
        torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)
    else:
        acc.addmm_(a.float(), b.float())


def place(x):
    if x.device.type == "cuda":
        return x
    return x.to("cuda")


def host_unless_cuda(x):
    if x.device.type == "cuda":
        return x
    return x.cpu()
'''


def test_device_feature_gates_and_guarded_triton_imports_are_info(tmp_path: Path) -> None:
    # a test of the given device chooses none, unless the code falls back to the CPU (line 22)
    assert _serious(tmp_path, GATES) == {18, 22}


STREAM_AND_RNG = '''
import torch


def setup(model, device_ids):
    ctx = torch.cuda.stream(torch.cuda.Stream())
    return ctx


def restore(state):
    torch.cuda.set_rng_state_all(state["torch.cuda"])
    return torch.cuda.get_rng_state()
'''


def test_one_finding_per_call_and_rng_restores_that_do_not_raise_are_silent(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(textwrap.dedent(STREAM_AND_RNG).lstrip("\n"))
    findings = scan([path], ScanConfig()).findings
    worst = sorted((f.line, finding_worst(f, ALL_TARGETS)) for f in findings)
    assert [w for line, w in worst if line == 5] == ["error", "info"]
    assert [w for line, w in worst if line == 10] == ["silent"]  # deferred: no error without CUDA
    assert [w for line, w in worst if line == 11] == ["error"]  # torch.cuda.get_rng_state() raises


DDP_IDS = '''
import torch
from torch.nn.parallel import DistributedDataParallel


class Strategy:
    def setup(self, module, rank):
        device_ids = self.determine_ddp_device_ids()
        wrapped = DistributedDataParallel(module, device_ids=device_ids)
        return wrapped, DistributedDataParallel(module, device_ids=[rank])
'''


def test_ddp_device_ids_from_a_helper_that_decides_them_are_not_reported(tmp_path: Path) -> None:
    assert _serious(tmp_path, DDP_IDS) == {9}


HELPERS = '''
import os

import torch


def override_numa_affinity(rank):
    if torch.cuda.is_available():
        os.sched_setaffinity(0, {rank})


def is_rocm_available():
    return torch.version.hip is not None and torch.cuda.is_available()


def is_cuda_available():
    """Whether CUDA is usable."""
    return torch.cuda.is_available()


class Loader:
    def __init__(self, device):
        self.is_cuda = device.type == "cuda" and torch.cuda.is_available()
        self.is_npu = device.type == "npu" and torch.npu.is_available()


def pick():
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"
'''


def test_affinity_gates_rocm_checks_named_checks_and_per_device_flags_are_info(tmp_path: Path) -> None:
    assert _serious(tmp_path, HELPERS) == {27}


def test_a_module_the_package_imports_only_with_triton_is_info(tmp_path: Path) -> None:
    kernel = '''
    import triton
    import triton.language as tl


    @triton.jit
    def _kernel(x_ptr):
        tl.store(x_ptr, 1)
    '''
    package = tmp_path / "kernels"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from mylib import is_triton_available\n\nif is_triton_available():\n    from .fused import run\n")
    assert _serious(tmp_path, kernel, "kernels/fused.py") == set()
    (package / "__init__.py").write_text("from .fused import run\n")
    assert _serious(tmp_path, kernel, "kernels/fused.py") == {1, 5}


FLAGS_AND_DTYPE_LISTS = '''
import torch


class Trainer:
    def __init__(self, cfg):
        self.cuda = torch.cuda.is_available() and not cfg.cpu
        if self.cuda:
            self.device = torch.device("cuda")
        else:
            self.device = torch.device(cfg.fallback)
        acceptable = [torch.float32, torch.float64]
        self.stats = torch.zeros(3, dtype=torch.float64, device=self.device)

    def step(self):
        if self.cuda and torch.cuda.get_device_capability(0)[0] < 7:
            print("slow")
        if self.other:
            torch.cuda.synchronize()
'''


def test_a_cuda_flag_held_on_self_guards_and_a_list_of_dtypes_makes_no_tensor(tmp_path: Path) -> None:
    # the flag itself picks the CPU over other accelerators (6); what it guards is info;
    # a float64 tensor on the device (12; the fallback may be MPS) and an unguarded synchronize (18) stay
    assert _serious(tmp_path, FLAGS_AND_DTYPE_LISTS) == {6, 12, 18}
