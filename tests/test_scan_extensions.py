"""A package that builds its own CUDA extensions: the Python imports of the built
modules are blockers everywhere, CUDA code that hipify does not port blocks ROCm,
and a CPU-only (CppExtension) module is not confused with them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchport.cli import main

SETUP = '''\
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

setup(
    name="fusedpkg",
    packages=find_packages(),
    ext_modules=[
        CUDAExtension(
            name="fused_dense_cuda",
            sources=["csrc/fused_dense.cpp", "csrc/fused_dense_kernel.cu"],
        ),
        CUDAExtension("fusedpkg._C", ["csrc/ops.cpp", "csrc/ops_kernel.cu"]),
        CppExtension("fusedpkg._cpu_ops", ["csrc/cpu_ops.cpp"]),
    ],
    cmdclass={"build_ext": BuildExtension},
)
'''
INIT = '''\
"""Fused layers."""
from . import _C, _cpu_ops
from .dense import FusedDense

__all__ = ["FusedDense", "_C", "_cpu_ops"]
'''
DENSE = '''\
import importlib

import torch
import fused_dense_cuda

_C = importlib.import_module("fusedpkg._C")


class FusedDenseFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return fused_dense_cuda.linear_bias_forward(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return fused_dense_cuda.linear_bias_backward(x, weight, grad)


class FusedDense(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(features, features))
        self.bias = torch.nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return FusedDenseFunction.apply(x, self.weight, self.bias)
'''
KERNEL = '''\
#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <nccl.h>

// asm volatile in a comment is not code
__device__ __forceinline__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

void exchange(float *buf, int n, int peer, ncclComm_t comm, cudaStream_t stream) {
  ncclSend(buf, n, ncclFloat, peer, comm, stream);
  ncclRecv(buf, n, ncclFloat, peer, comm, stream);
}
'''
PLAIN_KERNEL = "__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    (tmp_path / "setup.py").write_text(SETUP)
    (tmp_path / "fusedpkg").mkdir()
    (tmp_path / "fusedpkg" / "__init__.py").write_text(INIT)
    (tmp_path / "fusedpkg" / "dense.py").write_text(DENSE)
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "fused_dense_kernel.cu").write_text(KERNEL)
    (tmp_path / "csrc" / "ops_kernel.cu").write_text(PLAIN_KERNEL)
    for name in ("fused_dense.cpp", "ops.cpp", "cpu_ops.cpp"):
        (tmp_path / "csrc" / name).write_text("#include <torch/extension.h>\nvoid f() { asm(\"nop\"); }\n")
    return tmp_path


def _scan_json(capsys, *args) -> dict:
    main(["scan", *map(str, args), "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_the_package_is_blocked_on_every_target(package, capsys):
    document = _scan_json(capsys, package)
    for target, row in document["summary"]["targets"].items():
        assert row["error"] > 0 and row["score"] < 100, target
    found = {(f["path"].rsplit("/", 1)[-1], f["line"], f["rule"]) for f in document["findings"]}
    assert ("dense.py", 4, "TP504") in found and ("dense.py", 6, "TP504") in found
    assert ("__init__.py", 2, "TP504") in found
    rocm = sorted((f["line"], f["detail"]) for f in document["findings"]
                  if f["rule"] == "TP505" and f["severity"]["rocm"] == "error")
    assert rocm == [(2, "the cuDNN frontend (first use in the file)"), (8, "inline PTX assembly"),
                    (13, "NCCL point-to-point"), (14, "NCCL point-to-point")]
    imports = [f for f in document["findings"] if f["rule"] == "TP504"]
    assert len(imports) == 3 and all(set(f["severity"].values()) == {"error"} for f in imports)
    # `_cpu_ops` is a CppExtension: importing it is portable
    assert not any("_cpu_ops" in f["detail"] for f in document["findings"])


def test_rocm_fails_the_run(package, capsys):
    assert main(["scan", str(package), "--target", "rocm", "--fail-on", "error"]) == 1
    out = capsys.readouterr().out
    assert "TP505" in out and "TP504" in out


def test_a_subfolder_is_judged_by_the_setup_py_above_it(package, capsys):
    document = _scan_json(capsys, package / "fusedpkg")
    assert sorted(f["path"].rsplit("/", 1)[-1] for f in document["findings"] if f["rule"] == "TP504") == [
        "__init__.py", "dense.py", "dense.py"]


def test_same_names_without_a_cuda_build_are_not_flagged(tmp_path, capsys):
    (tmp_path / "setup.py").write_text(SETUP.replace("CUDAExtension(", "CppExtension(").replace(
        "_kernel.cu", ".cpp"))
    (tmp_path / "fusedpkg").mkdir()
    (tmp_path / "fusedpkg" / "__init__.py").write_text(INIT)
    (tmp_path / "fusedpkg" / "dense.py").write_text(DENSE)
    document = _scan_json(capsys, tmp_path)
    assert not [f for f in document["findings"] if f["rule"] == "TP504"]
