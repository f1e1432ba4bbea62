"""Round 11: false error/silent classes of judges 340627, 417392, 583917 and 937892
(docs/precision/round11.md).  Each test holds a false alarm quiet and a close true lock-in
line at error/silent, so recall does not drop."""
from __future__ import annotations

import textwrap
from pathlib import Path

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def _filler(count: int) -> str:
    """Methods enough to make a class longer than the parser reads whole."""
    return "".join(f"\n    def test_shape_{n}(self):\n        self.assertEqual(2 + {n}, {n} + 2)\n"
                   for n in range(count))


def test_a_multi_line_skip_decorator_on_a_method_of_a_long_test_class_guards_its_body(tmp_path):
    # a Hopper-only attention test class: @unittest.skipUnless(\n version and _is_hopper() ..., "msg"\n)
    source = '''
        import unittest

        import torch

        from kernels.utils import _is_hopper, torch_version_at_least


        class TestAttention(unittest.TestCase):
            @unittest.skipUnless(
                torch_version_at_least("2.11.0") and _is_hopper(),
                "needs a Hopper GPU",
            )
            def test_fused(self):
                q = torch.randn(2, 8, device="cuda")  # quiet
                layer = (
                    torch.nn.Linear(8, 8)
                    .to(device="cuda")  # quiet
                )
                self.assertEqual(layer(q).shape, q.shape)

            def test_unguarded(self):
                x = torch.ones(3, device="cuda")  # kept
                self.assertEqual(x.sum().item(), 3)
        '''
    _check(tmp_path, _write(tmp_path, "tests/test_attention.py", textwrap.dedent(source).rstrip() + "\n" + _filler(12)))


def test_code_built_on_the_cutlass_dsl_is_quiet_and_the_files_other_code_kept(tmp_path):
    # an sm120 grouped-GEMM engine whose cute helpers are imported lazily
    _check(tmp_path, _write(tmp_path, "grouped.py", '''
        import torch


        def _helpers():
            import cutlass.cute as cute
            import cutlass.torch as cutlass_torch

            return cute, cutlass_torch


        class GroupedGemm:
            def __init__(self, m, n):
                cute, cutlass_torch = _helpers()
                from cutlass import BFloat16

                ref = cutlass_torch.matrix(1, m, n, False, BFloat16)
                self.c = ref.cuda()  # quiet

            def _operand(self, m, k):
                cute, cutlass_torch = _helpers()
                ref = cutlass_torch.matrix(1, m, k, False, None)
                return ref.cuda()  # quiet


        def reference(a, b):
            return (a @ b.t()).cuda()  # kept
    '''))


def test_a_function_wrapped_by_a_decorator_that_returns_where_cuda_is_absent_is_quiet(tmp_path):
    # a memory probe decorated by a factory whose wrapper returns its default off CUDA
    _check(tmp_path, _write(tmp_path, "memory.py", '''
        import functools

        import torch


        def when_on_cuda(default):
            def wrap(func):
                @functools.wraps(func)
                def call(*args, **kwargs):
                    device = kwargs.get("device", args[0] if args else None)
                    if device is None or not torch.cuda.is_available():
                        return default
                    return func(*args, **kwargs)

                return call

            return wrap


        def logged(func):
            @functools.wraps(func)
            def call(*args, **kwargs):
                print("calling", func.__name__)
                return func(*args, **kwargs)

            return call


        @when_on_cuda(0.0)
        def allocated_gib(device=0):
            return torch.cuda.memory_allocated(device) / 2**30  # quiet


        @logged
        def reserved_gib(device=0):
            return torch.cuda.memory_reserved(device) / 2**30  # kept
    '''))


def test_a_cuda_check_that_only_chooses_a_log_message_is_quiet(tmp_path):
    # resuming from a checkpoint: the CUDA RNG state is restored, or a warning says why not
    _check(tmp_path, _write(tmp_path, "resume.py", '''
        import logging

        import torch

        logger = logging.getLogger(__name__)


        def restore_rng(checkpoint):
            state = checkpoint["cuda_rng_state"]
            if state is not None and torch.cuda.is_available():  # kept
                torch.cuda.set_rng_state(state)
            elif state is None and torch.cuda.is_available():  # quiet
                logger.warning("the checkpoint has no CUDA random state: results may differ")
    '''))


def test_a_branch_switched_off_by_a_constant_is_quiet(tmp_path):
    # a converter whose CUDA branch was disabled by hand: `if False:  # torch.cuda.is_available():`
    _check(tmp_path, _write(tmp_path, "convert.py", '''
        import torch


        def main(use_gpu):
            if False:  # torch.cuda.is_available():
                device = torch.device("cuda:{}".format(torch.cuda.current_device()))  # quiet
            else:
                device = torch.device("cpu")
            if use_gpu:
                device = torch.device("cuda:0")  # kept
            return device
    '''))


def test_a_capability_read_for_a_jit_build_of_cuda_sources_is_quiet_and_the_build_kept(tmp_path):
    # a vendored GEMM extension built for the running GPU's arch
    _check(tmp_path, _write(tmp_path, "ext.py", '''
        import os

        import torch

        _HERE = os.path.dirname(__file__)


        def _gencode():
            major, minor = torch.cuda.get_device_capability()  # quiet
            return f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"


        def load_ext():
            from torch.utils.cpp_extension import load

            major, minor = torch.cuda.get_device_capability()  # quiet
            return load(name=f"gemm_sm{major}{minor}", sources=[os.path.join(_HERE, "gemm.cu")],  # kept
                        extra_cuda_cflags=["-O3", _gencode()])


        def pick_tile():
            major, _ = torch.cuda.get_device_capability()  # kept
            return 128 if major >= 9 else 64
    '''))
