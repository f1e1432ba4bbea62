"""TP5xx, native code and kernels: CUDA C++ extension builds and Triton kernels.
(CUDA source files, TP502, are found by ``textfiles.py``: they are not Python.)"""
from __future__ import annotations

import ast

from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import string_value, walk_nodes
from torchport.scan.rules import CUDA_EXTENSION_BUILD, TRITON_KERNEL

RULE_IDS = (CUDA_EXTENSION_BUILD, TRITON_KERNEL)

_CPP_LOAD = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}


def rule_for_name(qualname: str) -> str | None:
    if qualname in ("torch.utils.cpp_extension.CUDAExtension", "torch.utils.cpp_extension.CUDA_HOME"):
        return CUDA_EXTENSION_BUILD
    return None


class NativeCodeDetector(AnalyzerState):
    CALLS = dict.fromkeys(_CPP_LOAD, "_cpp_load")
    IMPORTS = ("_triton_import",)
    FUNCTIONS = ("_triton_decorators",)

    def _triton_import(self, node, module: str) -> bool:
        if module.split(".", 1)[0] != "triton":
            return False
        # `import triton` then `import triton.language as tl`: one dependency, one finding
        # per block of statements (the module's imports, or one function's lazy imports).
        block = id(self.blocks.get(id(node), node))
        seen = self.__dict__.setdefault("_triton_import_blocks", set())
        if block not in seen:
            seen.add(block)
            self.report(TRITON_KERNEL, node, f"import {module}")
        return True

    def _triton_decorators(self, node) -> None:
        triton = []
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            qualname = self.qualname(target)
            if qualname and qualname.split(".")[0] == "triton":
                triton.append((decorator, qualname))
                self.claimed.add(id(target))
                self.claimed.add(id(decorator))
        if triton:
            # `@triton.autotune(...)` above `@triton.jit`: one kernel, one finding, at the
            # decorator that makes it a kernel (the one nearest the def).
            decorator, qualname = triton[-1]
            self.report(TRITON_KERNEL, decorator, f"@{qualname} kernel {node.name}")

    def _cpp_load(self, node: ast.Call, qualname: str) -> bool:
        cuda = False
        for kw in node.keywords:
            if kw.arg in ("cuda_sources", "extra_cuda_cflags") or (
                    kw.arg == "with_cuda" and isinstance(kw.value, ast.Constant) and kw.value.value):
                cuda = True
        for value in walk_nodes(node):
            text = string_value(value)
            if text and text.endswith((".cu", ".cuh")):
                cuda = True
        if cuda:
            self.report(CUDA_EXTENSION_BUILD, node.func, f"{qualname}() with CUDA sources")
            return True
        return False
