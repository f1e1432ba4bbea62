"""Round 9: the classes of false error/silent findings in judge-583917's verdicts
(docs/precision/round9.md).  Each test holds a false alarm quiet and a close true lock-in line
at error/silent, so recall does not drop."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def test_an_availability_probe_answering_not_available_is_quiet(tmp_path):
    # axolotl flash_attn_4.fa4_usable, dequant_grouped.deepgemm_grouped_available, autotune _get_gpu_info
    _check(tmp_path, _write(tmp_path, "probes.py", '''
        import torch


        def kernel_usable():
            if not torch.cuda.is_available():  # quiet
                return False
            major, _ = torch.cuda.get_device_capability()
            return major in (9, 10)


        def gpu_info() -> dict:
            if not torch.cuda.is_available():  # quiet
                return {}
            return {"name": torch.cuda.get_device_name()}


        def pick_device():
            if not torch.cuda.is_available():  # kept
                return "cpu"
            return "cuda"


        def setup(model):
            if not torch.cuda.is_available():  # kept
                return
            model.half()
    '''))


def test_a_second_import_of_the_same_triton_names_is_quiet(tmp_path):
    # axolotl/kernels/rms_norm_gated.py: libdevice moved between Triton versions
    _check(tmp_path, _write(tmp_path, "kernels.py", '''
        import os

        if os.environ.get("NEW_TRITON"):
            from triton.language.extra.libdevice import rsqrt  # kept
        else:
            from triton.language.math import rsqrt  # quiet
    '''))


def test_a_type_alias_of_cuda_events_is_quiet(tmp_path):
    # pytorch_pfn_extras/profiler/_time_summary.py
    _check(tmp_path, _write(tmp_path, "summary.py", '''
        from typing import Tuple

        import torch

        Events = Tuple[torch.cuda.Event, torch.cuda.Event]  # quiet


        def record():
            start = torch.cuda.Event(enable_timing=True)  # kept
            start.record()
            return start
    '''))


def test_custom_fwd_with_a_cuda_device_type_is_quiet(tmp_path):
    # axolotl/kernels/utils.py
    _check(tmp_path, _write(tmp_path, "amp.py", '''
        import torch

        custom_fwd = torch.amp.custom_fwd(device_type="cuda")  # quiet


        def run(x):
            with torch.autocast(device_type="cuda"):  # kept
                return x.to("cuda")  # kept
    '''))


def test_the_device_type_of_a_cupy_array_is_quiet(tmp_path):
    # pytorch_pfn_extras/_tensor.py
    _check(tmp_path, _write(tmp_path, "convert.py", '''
        import cupy
        import numpy
        import torch


        def device_type(obj):
            if isinstance(obj, torch.Tensor):
                kind = obj.device.type
            elif isinstance(obj, numpy.ndarray):
                kind = "cpu"
            elif isinstance(obj, cupy.ndarray):
                kind = "cuda"  # quiet
            return kind


        def to_device(obj):
            if isinstance(obj, numpy.ndarray):
                return torch.as_tensor(obj, device="cuda")  # kept
            return obj
    '''))


def test_a_cuda_check_that_only_runs_a_connectivity_check_is_quiet(tmp_path):
    # litgpt/pretrain.py: NVLink check
    _check(tmp_path, _write(tmp_path, "train.py", '''
        import torch


        def setup(fabric, devices, model):
            if torch.cuda.is_available() and devices > 1:  # quiet
                check_nvlink_connectivity(fabric)
            if torch.cuda.is_available() and devices > 1:  # kept
                model.prepare(fabric)
            return model
    '''))


def test_a_cuda_check_after_torch_accelerator_detection_is_quiet(tmp_path):
    # axolotl/monkeypatch/checkpoint_activation_offload.py
    _check(tmp_path, _write(tmp_path, "offload.py", '''
        import torch


        class Offloader:
            def __init__(self):
                if hasattr(torch, "accelerator") and torch.accelerator.is_available():
                    self.kind = torch.accelerator.current_accelerator().type
                elif torch.cuda.is_available():  # quiet
                    self.kind = "cuda"
                else:
                    self.kind = "cpu"


        def choose(x):
            if x.is_mps:
                return "mps"
            elif torch.cuda.is_available():  # kept
                return "cuda"
            return "cpu"
    '''))


def test_a_cuda_check_read_only_by_an_error_message_is_quiet(tmp_path):
    # axolotl/integrations/kernels/libs/scattermoe_lora/grouped_train.py
    _check(tmp_path, _write(tmp_path, "backend.py", '''
        import torch


        def resolve(backend):
            if backend == "cutlass":
                major = (
                    torch.cuda.get_device_capability()[0]
                    if torch.cuda.is_available()  # quiet
                    else 0
                )
                raise RuntimeError(f"no backend resolved on sm{major}x")
            return backend


        def pick(backend):
            major = torch.cuda.get_device_capability()[0] if torch.cuda.is_available() else 0  # kept
            if major >= 9:
                return "fast"
            raise RuntimeError(f"sm{major} is too old")
    '''))


def test_a_kernel_used_only_for_cuda_tensors_is_quiet(tmp_path):
    # axolotl/monkeypatch/trainer/utils.py, axolotl/monkeypatch/models/falcon_h1/modeling.py
    _check(tmp_path, _write(tmp_path, "fused.py", '''
        import torch
        import triton


        @triton.jit  # quiet
        def _fused_kernel(x_ptr, n):
            pass


        def _fused_op(x):
            _fused_kernel[(1,)](x, x.numel())
            return x


        class _Fused(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return _fused_op(x)


        def fused(x):
            if not x.is_cuda or x.dtype == torch.float64:
                return x * 2
            return _Fused.apply(x)


        @triton.jit  # kept
        def _other_kernel(x_ptr, n):
            pass


        def other(x):
            _other_kernel[(1,)](x, x.numel())
            return x


        def patched_fast_forward(self, x):
            with torch.cuda.device(x.device):  # quiet
                return x


        def patched_slow_forward(self, x):
            with torch.cuda.device(x.device):  # kept
                return x


        class Mixer:
            def forward(self, x):
                if "cuda" in self.weight.device.type:
                    return self.fast_forward(x)
                return self.slow_forward(x)


        Mixer.fast_forward = patched_fast_forward
        Mixer.slow_forward = patched_slow_forward
    '''))
