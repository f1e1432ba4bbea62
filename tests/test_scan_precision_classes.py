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
    assert [line for line, _ in _by_rule(findings, "TP502")] == [5]


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
    '''
    findings = _scan(tmp_path, source, "model_impl.py")
    assert [(line, worst) for line, worst in _by_rule(findings, "TP601")] == [(4, "error")]
