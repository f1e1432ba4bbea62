"""Precision on the classes of mistake a third independent judge found: tests that
run only where CUDA is (module-level skips, skip helpers, hardware checks), one
Triton kernel or one Triton import reported more than once, opt-in NVIDIA features,
and consequences that do not happen.  Each test keeps a true lock-in line found,
so recall does not drop."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

ALL_TARGETS = ScanConfig().targets


def _scan(tmp_path: Path, source: str, name: str = "mod.py"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    result = scan([path], ScanConfig())
    assert not result.skipped, result.skipped
    return result.findings


def _worst(findings) -> dict[int, set]:
    by_line: dict[int, set] = {}
    for f in findings:
        by_line.setdefault(f.line, set()).add(finding_worst(f, ALL_TARGETS))
    return by_line


def _serious(findings) -> set[int]:
    return {line for line, worst in _worst(findings).items() if worst - {"info", "perf", None}}


MODULE_SKIP = '''
import pytest
import torch
from kernels_lib.utils import is_sm_at_least_90

if not (torch.cuda.is_available() and is_sm_at_least_90()):
    pytest.skip("needs an SM90 GPU", allow_module_level=True)


def test_grouped_mm():
    offs = torch.arange(0, 64, 16, device="cuda", dtype=torch.int32)
'''

UNGUARDED_TEST = '''
import torch


def test_grouped_mm():
    offs = torch.arange(0, 64, 16, device="cuda", dtype=torch.int32)
'''


def test_module_level_skip_unless_cuda_makes_the_module_info(tmp_path: Path) -> None:
    assert _serious(_scan(tmp_path, MODULE_SKIP, "test_a.py")) == set()
    assert _serious(_scan(tmp_path, UNGUARDED_TEST, "test_b.py")) == {5}


SKIP_HELPERS = '''
import unittest

import torch
from mylib.testing.utils import skip_if_no_cuda


def _is_hopper() -> bool:
    if not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability()[0] == 9


def needs_gpu(test):
    def wrapper(*args, **kwargs):
        if not torch.cuda.is_available():
            raise unittest.SkipTest("no GPU")
        return test(*args, **kwargs)
    return wrapper


class TestKernels(unittest.TestCase):
    @skip_if_no_cuda()
    def test_imported_helper(self):
        x = torch.ones(3, device="cuda")

    @unittest.skipUnless(_is_hopper(), "needs Hopper")
    def test_hardware_check(self):
        x = torch.ones(3).cuda()

    @needs_gpu
    def test_local_helper(self):
        x = torch.ones(3).cuda()

    def test_everywhere(self):
        x = torch.ones(3).cuda()
'''


def test_skip_helpers_and_hardware_checks_make_tests_info(tmp_path: Path) -> None:
    findings = _scan(tmp_path, SKIP_HELPERS, "test_kernels.py")
    serious = _serious(findings)
    assert {24, 28, 32} & serious == set()
    assert 35 in serious  # the test with no guard still fails without CUDA


def test_assert_cuda_at_import_makes_the_module_info(tmp_path: Path) -> None:
    source = '''
    import torch

    assert torch.cuda.is_available(), "these kernels need CUDA"

    def test_rms():
        x = torch.ones(3, device="cuda")
    '''
    assert _serious(_scan(tmp_path, source, "test_rms.py")) == set()


TRITON = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def other_kernel(x_ptr, n):
    pass
'''


def test_triton_kernel_and_import_are_reported_once(tmp_path: Path) -> None:
    findings = [f for f in _scan(tmp_path, TRITON) if f.rule_id == "TP503"]
    lines = sorted(f.line for f in findings)
    assert lines == [2, 7, 12]  # `import triton` once; each kernel once, at @triton.jit


CONSEQUENCES = '''
import torch
from torch.cuda import _lazy_call


def set_rng_state(new_state, device=0):
    def cb():
        idx = torch.cuda.current_device()
        torch.cuda.default_generators[idx].set_state(new_state)

    _lazy_call(cb)


def seed_everything(seed):
    torch.random.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def seed_cuda_only(seed):
    torch.cuda.manual_seed(seed)


def build_datasets(threads):
    num_workers = threads
    num_workers *= min(2, max(1, torch.cuda.device_count()))
    return num_workers


def shard(n):
    world = torch.cuda.device_count()
    return n // world


def load_state(state):
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and not value.is_cuda:
            state[key] = value.cuda()
'''


def test_consequences_that_do_not_happen_are_lowered(tmp_path: Path) -> None:
    worst = _worst(_scan(tmp_path, CONSEQUENCES))
    assert worst[7] == {"info"} and worst[8] == {"info"} and worst[10] == {"info"}  # queued callback
    assert worst[15] == {"info"}  # torch.random.manual_seed above seeds every device
    assert worst[19] == {"silent"}  # only the CUDA generator seeded: still reported
    assert worst[24] == {"perf"}  # a thread count
    assert worst[29] == {"silent"}  # a shard size from device_count is still silent
    assert worst[35] == {"info"}  # the check: its branch has its own finding
    assert worst[36] == {"error"}  # the .cuda() in that branch


OPT_IN = '''
import torch


class GradBuffer:
    def __init__(self, size, nccl_ub, config):
        self.nccl_ub = nccl_ub
        if self.nccl_ub:
            self.pool = torch.cuda.MemPool()
            self.data = torch.empty(size, device="cuda")
        if config.cuda_graph_impl == "local":
            torch.cuda.synchronize()
        self.grad = torch.empty(size, device="cuda")
'''


def test_opt_in_nvidia_features_are_info(tmp_path: Path) -> None:
    findings = _scan(tmp_path, OPT_IN)
    serious = _serious(findings)
    assert {8, 9, 11} & serious == set()
    assert 12 in serious  # the buffer every configuration allocates
    reasons = {f.line: f.cap_reason for f in findings}
    assert reasons[9].startswith("an opt-in NVIDIA feature")


GATED_TRITON = '''
import torch
from mylib.utils import has_triton


def _build_triton_impls():
    if not has_triton():
        return None
    import triton

    @triton.jit
    def quant_kernel(x_ptr):
        pass

    return quant_kernel


def ceil_half(x):
    if has_triton():
        import triton
        return triton.cdiv(x, 2)
    else:
        return -(-x // 2)


import triton


@triton.jit
def only_kernel(x_ptr):
    pass
'''


def test_triton_behind_an_availability_check_or_with_a_fallback_is_info(tmp_path: Path) -> None:
    serious = _serious(_scan(tmp_path, GATED_TRITON))
    assert {8, 10, 19} & serious == set()
    assert {25, 28} <= serious  # the module-level import and the kernel with no fallback


def test_assert_that_cuda_is_present_is_explicit_and_guards_what_follows(tmp_path: Path) -> None:
    source = '''
    import torch

    def test_fp8_cast():
        assert torch.cuda.is_available()
        x = torch.ones(3, device="cuda")

    def test_fp8_cast_anywhere():
        x = torch.ones(3, device="cuda")
    '''
    worst = _worst(_scan(tmp_path, source, "test_cast.py"))
    assert worst[4] == {"info"} and worst[5] == {"info"}
    assert worst[8] == {"error"}


def test_helper_called_only_from_cuda_only_tests_is_info(tmp_path: Path) -> None:
    source = '''
    import unittest

    import torch
    from mylib.testing import skip_if_no_cuda


    class TestImpls(unittest.TestCase):
        def _check_impls(self, t):
            return t.to(device="cuda")

        def _check_anywhere(self, t):
            return t.to(device="cuda")

        @skip_if_no_cuda()
        def test_impls(self):
            self._check_impls(torch.ones(3))

        def test_anywhere(self):
            self._check_anywhere(torch.ones(3))
    '''
    serious = _serious(_scan(tmp_path, source, "test_impls.py"))
    assert 9 not in serious
    assert 12 in serious  # also called from a test that runs everywhere


def test_implementation_named_for_an_opt_in_nvidia_feature_is_info(tmp_path: Path) -> None:
    source = '''
    import torch


    class CudaGraphRunner:
        def capture(self, fn):
            self.graph = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()


    def create_cuda_graphs(engine):
        stats = torch.cuda.memory_stats()
        engine.warmup(device=torch.cuda.current_device())


    def step(model, batch):
        torch.cuda.synchronize()
        return model(batch.cuda())
    '''
    serious = _serious(_scan(tmp_path, source))
    assert {6, 7, 11, 12} & serious == set()
    assert {16, 17} <= serious  # the training step every configuration runs
