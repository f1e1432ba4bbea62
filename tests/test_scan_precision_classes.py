"""Precision on the classes of mistake a second independent judge found (C/C++
headers reported once per #include and on the wrong line, code in comments,
multi-backend packages taken for CUDA-only ones, explicit errors and diagnostics
called silent, skip helpers, CUDA-only implementations of an abstraction).  Each
test also keeps a true lock-in line found, so recall does not drop."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

ALL_TARGETS = ScanConfig().targets


def _scan(tmp_path: Path, source: str, name: str):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    result = scan([path], ScanConfig())
    assert not result.skipped, result.skipped
    return result.findings


def _by_rule(findings, rule: str) -> list[tuple[int, str | None]]:
    return [(f.line, finding_worst(f, ALL_TARGETS)) for f in findings if f.rule_id == rule]


HEADER = '''
// Copyright (c) the authors.
/*! \\brief Helpers for the fused softmax.
    This block names cutlass::epilogue and #include <cuda.h> in prose only.
*/
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>

#include "cutlass/numeric_types.h"
'''


def test_cpp_header_is_one_finding_at_its_first_real_include(tmp_path: Path) -> None:
    findings = _scan(tmp_path, HEADER, "csrc/includes/softmax_helpers.h")
    assert [line for line, _ in _by_rule(findings, "TP502")] == [7]
    assert findings[0].snippet.startswith("#include <cuda.h>")
    # CUTLASS is reported where the code uses it, not in the comment above.
    assert [line for line, _ in _by_rule(findings, "TP505")] == [11]


def test_cpp_include_after_blank_lines_is_reported_on_its_own_line(tmp_path: Path) -> None:
    source = "#include <torch/extension.h>\n\n\n#include <ATen/cuda/CUDAContext.h>\n"
    findings = _scan(tmp_path, source, "ops.cpp")
    assert [line for line, _ in _by_rule(findings, "TP502")] == [4]


def test_cuda_code_inside_block_comment_is_not_reported(tmp_path: Path) -> None:
    source = '''
    /* Old implementation:
       asm volatile("bar.sync 0;");
       cutlass::gemm::GemmShape<128, 128, 32> shape;
    */
    __global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }
    '''
    findings = _scan(tmp_path, source, "scale.cu")
    assert _by_rule(findings, "TP505") == []
    assert [line for line, _ in _by_rule(findings, "TP502")] == [1]  # the whole file


def test_bitsandbytes_is_multi_backend_not_cuda_only(tmp_path: Path) -> None:
    source = '''
    import bitsandbytes as bnb
    from bitsandbytes.nn import Linear4bit
    import flash_attn
    '''
    findings = _scan(tmp_path, source, "quant.py")
    assert [line for line, _ in _by_rule(findings, "TP601")] == [3]
    (tmp_path / "requirements.txt").write_text("bitsandbytes>=0.45\napex\n")
    result = scan([tmp_path / "requirements.txt"], ScanConfig())
    assert [f.line for f in result.findings if f.rule_id == "TP601"] == [2]


def test_deepspeed_configs_and_builder_base_are_not_cuda_imports(tmp_path: Path) -> None:
    source = '''
    from deepspeed.ops.transformer.inference.config import DeepSpeedInferenceConfig
    from deepspeed.ops.op_builder.builder import OpBuilder
    from deepspeed.ops.transformer import DeepSpeedTransformerConfig
    from deepspeed.ops.transformer.inference import DeepSpeedSelfAttention
    from deepspeed.ops.op_builder import CPUAdamBuilder, AsyncIOBuilder
    from deepspeed.ops.op_builder import FusedLambBuilder
    '''
    findings = _scan(tmp_path, source, "model_impl.py")
    assert [(line, worst) for line, worst in _by_rule(findings, "TP601")] == [(4, "error"), (6, "error")]


def _tp003(findings) -> dict[int, str | None]:
    return dict(_by_rule(findings, "TP003"))


def test_cuda_check_whose_other_branch_raises_is_not_silent(tmp_path: Path) -> None:
    source = '''
    import torch

    def enable_cpu_offload(module, device):
        if device.type != "cuda":
            raise ValueError("CPU offload streams need a CUDA device; disable offload_streams")
        return module

    def check_gds(config):
        assert torch.cuda.is_available(), "GPUDirect Storage needs an NVIDIA GPU"

    def pick(x):
        if torch.cuda.is_available():
            return x.cuda()
        else:
            raise RuntimeError("this kernel has no CPU implementation")

    def fallback(x):
        if torch.cuda.is_available():
            x = x.cuda()
        return x * 2
    '''
    worst = _tp003(_scan(tmp_path, source, "offload.py"))
    assert worst[4] == "info" and worst[9] == "info" and worst[12] == "info"
    assert worst[18] == "silent"  # a real silent fallback to the CPU stays


def test_cuda_check_gating_diagnostics_is_not_silent(tmp_path: Path) -> None:
    source = '''
    import os
    import torch

    class Trainer:
        def setup(self, cfg, device):
            self.track_peak_memory = cfg.get("track_peak_memory", False)
            if self.track_peak_memory and device.type != "cuda":
                print("peak memory tracking needs CUDA; turning it off")
                self.track_peak_memory = False

        def step(self, batch):
            if self.profile_memory and batch.device.type == "cuda":
                torch.cuda.memory._record_memory_history(max_entries=1000)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            if torch.cuda.is_available():
                torch.cuda.synchronize()

    threads_per_rank = os.cpu_count() // (torch.cuda.device_count() if torch.cuda.is_available() else 1)
    '''
    worst = _tp003(_scan(tmp_path, source, "trainer.py"))
    assert worst[7] == "info" and worst[12] == "info" and worst[14] == "info"
    assert worst[16] == "silent"  # synchronising before timing is not a diagnostic
    assert worst[19] == "info"


def test_cuda_version_checks_in_extension_builders_are_info(tmp_path: Path) -> None:
    source = '''
    import torch

    class FusedLayerNormBuilder(CUDAOpBuilder):
        def is_compatible(self, verbose=False):
            ok = True
            if torch.cuda.is_available():
                major = int(torch.version.cuda.split(".")[0])
                ok = major >= 11
            return ok

    def train(model):
        if torch.cuda.is_available():
            model = model.cuda()
        return model
    '''
    worst = _tp003(_scan(tmp_path, source, "layer_norm_builder.py"))
    assert worst[6] == "info"
    assert worst[12] == "silent"


def test_env_opt_in_cuda_kernels_are_a_feature_gate(tmp_path: Path) -> None:
    source = '''
    import os
    import torch

    use_fast_kernels = os.environ.get("MYLIB_FAST_KERNELS", "0") == "1" and torch.cuda.is_available()
    '''
    assert _tp003(_scan(tmp_path, source, "kernels.py"))[4] == "info"


def test_skip_helpers_and_checks_listing_other_accelerators_are_info(tmp_path: Path) -> None:
    source = '''
    import unittest
    import torch

    def require_accelerator(test_case):
        if not (torch.cuda.is_available() or torch.xpu.is_available()):
            return unittest.skip("test requires an accelerator")(test_case)
        return test_case

    def require_cuda(test_case):
        if not torch.cuda.is_available():
            return unittest.skip("test requires CUDA")(test_case)
        return test_case

    def has_accelerator():
        return torch.cuda.is_available() or torch.backends.mps.is_available()

    def device():
        return "cuda" if torch.cuda.is_available() else "cpu"
    '''
    worst = _tp003(_scan(tmp_path, source, "testing_utils.py"))
    assert worst[5] == "info" and worst[10] == "info" and worst[15] == "info"
    assert worst[18] == "silent"


def test_code_after_a_nested_cuda_exit_is_cuda_only(tmp_path: Path) -> None:
    source = '''
    import os
    import torch

    def local_device_index(backend):
        if backend == "xccl":
            return 0
        else:
            rank = int(os.getenv("LOCAL_RANK", "0"))
            if not torch.cuda.is_available():
                return rank
            return torch.zeros(1, device="cuda").new_tensor(rank)

    def enable_fast_attention(self, enabled):
        if enabled:
            if not self.kernels_installed:
                raise ImportError("install the kernels package")
            elif not torch.cuda.is_available():
                raise ValueError("fast attention needs a CUDA device")
            else:
                probe = torch.randn(1, 2, 8, device="cuda")

    def unguarded(x):
        return x.to("cuda")
    '''
    findings = _scan(tmp_path, source, "runtime.py")
    worst = {line: w for line, w in (*_by_rule(findings, "TP001"), *_by_rule(findings, "TP404"))}
    assert worst[11] == "info"
    assert worst[20] == "info"
    assert worst[23] == "error"


def test_cuda_implementation_of_an_abstraction_is_cuda_only(tmp_path: Path) -> None:
    source = '''
    import torch

    class Accelerator:
        def synchronize(self):
            raise NotImplementedError

    class CUDA_Accelerator(Accelerator):
        def synchronize(self):
            return torch.cuda.synchronize()

        def memory_allocated(self):
            return torch.cuda.memory_allocated()

    class Trainer:
        def step(self):
            torch.cuda.synchronize()
    '''
    findings = _scan(tmp_path, source, "accelerators.py")
    worst = {f.line: finding_worst(f, ALL_TARGETS) for f in findings}
    assert worst[9] == "info" and worst[12] == "info"
    assert worst[16] != "info"  # the same call in ordinary code is still reported


def test_backend_folder_beside_other_devices_is_cuda_only(tmp_path: Path) -> None:
    kernel = '''
    import torch

    def dequantize(x):
        return x.to("cuda").half()
    '''
    (tmp_path / "lib" / "backends" / "cpu").mkdir(parents=True)
    cuda = _scan(tmp_path, kernel, "lib/backends/cuda/ops.py")
    assert [w for _, w in _by_rule(cuda, "TP001")] == ["info"]
    triton = _scan(tmp_path, "import triton\n", "lib/backends/triton/kernels.py")
    assert [w for _, w in _by_rule(triton, "TP503")] == ["info"]
    alone = _scan(tmp_path, kernel, "other/cuda/ops.py")  # no other device beside it
    assert [w for _, w in _by_rule(alone, "TP001")] == ["error"]


def test_annotations_handled_cuda_home_and_disabled_autocast_are_not_lock_in(tmp_path: Path) -> None:
    source = '''
    import torch
    from torch.utils import cpp_extension

    def prefetch(batch, stream: torch.cuda.Stream | None = None) -> None:
        side: torch.cuda.Stream = torch.cuda.Stream()
        return side

    def link_flags():
        home = cpp_extension.CUDA_HOME
        if home is None:
            return ["-lcpu_only"]
        return [f"-L{home}/lib64"]

    def stable_cholesky(cov):
        with torch.autocast("cuda", enabled=False):
            return torch.linalg.cholesky(cov.float())

    def forward(model, x):
        with torch.autocast("cuda"):
            return model(x)
    '''
    findings = _scan(tmp_path, source, "utils.py")
    worst = {(f.line, f.rule_id, f.detail): finding_worst(f, ALL_TARGETS) for f in findings}
    assert worst[(4, "TP107", "torch.cuda.Stream")] == "info"
    assert worst[(5, "TP107", "torch.cuda.Stream()")] == "error"  # creating one is still found
    assert {w for (line, rule, _), w in worst.items() if rule == "TP501"} == {"info"}
    assert worst[(15, "TP201", 'autocast("cuda")')] == "info"
    assert worst[(19, "TP201", 'autocast("cuda")')] == "silent"


def test_unhandled_cuda_home_is_still_an_error(tmp_path: Path) -> None:
    source = '''
    from torch.utils import cpp_extension

    NVCC = cpp_extension.CUDA_HOME + "/bin/nvcc"
    '''
    assert {w for _, w in _by_rule(_scan(tmp_path, source, "build.py"), "TP501")} == {"error"}


def test_support_flag_or_ed_with_other_accelerators_and_caught_probes(tmp_path: Path) -> None:
    source = '''
    import torch

    def fp8_supported():
        cuda_ok = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)
        xpu_ok = torch.xpu.is_available()
        return cuda_ok or xpu_ok

    def nccl_version():
        try:
            return torch.cuda.nccl.version()
        except Exception:
            return None

    def cuda_only():
        use_gpu = torch.cuda.is_available()
        return use_gpu

    def pick_backend():
        return torch.cuda.nccl.version()
    '''
    findings = _scan(tmp_path, source, "support.py")
    worst = {f.line: finding_worst(f, ALL_TARGETS) for f in findings}
    assert worst[4] == "info" and worst[10] == "info"
    assert worst[15] == "silent" and worst[19] == "error"


def test_float64_inside_a_cpu_device_context_is_host_side(tmp_path: Path) -> None:
    source = '''
    import torch

    def rope_table(dim, length):
        with torch.device("cpu"):
            steps = torch.arange(length, dtype=torch.float64)
            return torch.outer(steps, steps).float()

    def on_device(x):
        return x.to(torch.float64)
    '''
    findings = _by_rule(_scan(tmp_path, source, "rope.py"), "TP701")
    assert [line for line, w in findings if w == "error"] == [9]


def test_float64_through_a_dtype_for_device_helper_is_not_an_error(tmp_path: Path) -> None:
    source = '''
    import torch
    from mylib.utils import dtype_for_device

    def timestep_tensor(t, sample):
        dtype = dtype_for_device(torch.float64 if isinstance(t, float) else torch.int64, sample.device)
        return torch.tensor([t], dtype=dtype, device=sample.device)

    def unadjusted(t, sample):
        return torch.tensor([t], dtype=torch.float64, device=sample.device)
    '''
    findings = _by_rule(_scan(tmp_path, source, "embeddings.py"), "TP701")
    assert [line for line, w in findings if w == "error"] == [9]


def test_import_of_an_availability_shim_is_info(tmp_path: Path) -> None:
    source = '''
    from deepspeed.ops.triton_ops._triton import _TRITON_AVAILABLE, triton
    from deepspeed.ops.lamb import FusedLamb
    '''
    assert _by_rule(_scan(tmp_path, source, "loss.py"), "TP601") == [(1, "info"), (2, "error")]


def test_cuda_entry_of_a_per_device_table_is_info(tmp_path: Path) -> None:
    source = '''
    import torch

    PEAK_MEMORY = {
        "cuda": torch.cuda.max_memory_allocated,
        "xpu": torch.xpu.max_memory_allocated,
        "cpu": None,
    }
    ONLY_CUDA = {"peak": torch.cuda.max_memory_allocated}
    '''
    findings = _scan(tmp_path, source, "backend_utils.py")
    worst = {f.line: finding_worst(f, ALL_TARGETS) for f in findings}
    assert worst[4] == "info"
    assert worst[8] != "info"


def test_accelerator_abstraction_asked_for_cuda_is_a_feature_gate(tmp_path: Path) -> None:
    source = '''
    import torch
    from mylib.accelerator import get_accelerator

    def use_graphs(config):
        return get_accelerator().device_name() == "cuda" and config.enable_graphs

    def pick(device):
        return device if device.type == "cuda" else torch.device("cpu")
    '''
    worst = _tp003(_scan(tmp_path, source, "engine.py"))
    assert worst[5] == "info"
    assert worst[8] == "silent"


def test_float64_chosen_per_device_or_by_option_is_not_an_error(tmp_path: Path) -> None:
    source = '''
    import torch

    def rope(dim, x, use_double):
        is_mps = x.device.type == "mps"
        freqs_dtype = torch.float32 if is_mps else torch.float64
        other = torch.float32 if torch.backends.mps.is_available() else torch.float64
        asked = torch.float64 if use_double else torch.float32
        return torch.arange(dim, dtype=freqs_dtype, device=x.device)

    def always(x):
        return torch.arange(4, dtype=torch.float64, device=x.device)
    '''
    findings = _by_rule(_scan(tmp_path, source, "rope.py"), "TP701")
    assert [line for line, w in findings if w == "error"] == [11]
