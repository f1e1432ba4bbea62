"""Round 24: two guards judge 24 found the scan blind to, each beside neighbours that keep their
severity.

- A C++ source whose every CUDA include sits under the build option its setup defines for the
  CUDA build (``#ifdef WITH_CUDA``) compiles without CUDA: its TP502 finding is info, as a Python
  line under ``if torch.cuda.is_available():`` is.  The compiler's own macros (``__CUDACC__``,
  ``__CUDACC_RTC__``) are no such option: they pick between two CUDA compilers in a header that
  stays CUDA-only.
- The body of a function torch.library registers as an op's CUDA kernel
  (``@torch.library.custom_op(..., device_types="cuda")``, ``@op.register_kernel("cuda")``,
  ``@torch.library.impl(lib, "op", "CUDA")``) runs only for CUDA tensors: its findings are info.
  The registration line itself, and kernels registered for other devices too, keep theirs.
- ``def shard(self, module, device=None): if device is None: device = torch.device("cuda")`` (or
  ``device = device or torch.device("cuda")``, ``device = "cuda" if device is None else device``): the CUDA value
  is the parameter's default in all but name, read as a parameter default is ("default only" where
  every call passes the parameter, in this file or, for a function called only elsewhere, in the
  other scanned files).

The sources are written for these tests, shaped after torchrl's csrc/pybind.cpp (S678904-032),
colossalai's shared CPU/CUDA functor headers, xformers' seqpar.py (S678904-029) and torchrec's
sharders (S678904-012, -028, -086)."""
from __future__ import annotations

import pytest

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_GUARDED = {
    "pybind.cpp": """
        #include <pybind11/pybind11.h>
        #include <torch/extension.h>

        #ifdef WITH_CUDA
        #include "cuda_segment_tree.h"
        #endif
        #include "segment_tree.h"
        """,
    "binary_functor.h": """
        #pragma once

        #if defined(COLOSSAL_WITH_CUDA)
        #include <cuda.h>
        #include <cuda_bf16.h>
        #endif

        #include <functional>
        """,
    "nested.cpp": """
        #if defined(USE_CUDA) || defined(USE_ROCM)
        #  if CUDA_VERSION >= 11000
        #    include <cuda_bf16.h>
        #  endif
        #  include <c10/cuda/CUDAGuard.h>
        #elif defined(WITH_HIP)
        #  include <cub/cub.cuh>
        #endif
        """,
}

_UNGUARDED = {
    # the CPU branch of the option includes cuBLAS: a build without CUDA reaches it
    "else_branch.cpp": """
        #ifdef WITH_CUDA
        #include <cuda_runtime.h>
        #else
        #include <cublas_v2.h>
        #endif
        """,
    "negated.cpp": """
        #ifndef WITH_CUDA
        #include <cuda.h>
        #endif
        #if !defined(USE_CUDA)
        #include <cuda_fp16.h>
        #endif
        """,
    # an alternative that is not a GPU build (an MPS build) would include the CUDA header
    "mixed_alternatives.cpp": """
        #if defined(WITH_CUDA) || defined(WITH_MPS)
        #include <cuda.h>
        #endif
        """,
    # the compiler's macro: this header is CUDA code whichever CUDA compiler reads it
    "epilogue.h": """
        #pragma once
        #if defined(__CUDACC_RTC__)
        #include <cuda/std/cassert>
        #else
        #include <cassert>
        #endif
        #include "cutlass/cutlass.h"
        """,
    # conditions that hold without CUDA, or that the file settles itself (a review's probes)
    "compared.cpp": "#if USE_CUDA == 0\n#include <cuda_runtime.h>\n#endif\n",
    "spelled_not.cpp": "#if not defined(WITH_CUDA)\n#include <cuda_runtime.h>\n#endif\n",
    "spelled_or.cpp": "#if defined(WITH_CUDA) or defined(WITH_MPS)\n#include <cuda_runtime.h>\n#endif\n",
    "bit_or.cpp": "#if USE_CUDA | WITH_MPS\n#include <cuda_runtime.h>\n#endif\n",
    "continued.cpp": "#if defined(WITH_CUDA) \\\n    || defined(WITH_MPS)\n#include <cuda_runtime.h>\n#endif\n",
    "elifdef.cpp": "#ifdef WITH_CUDA\n#include <cuda.h>\n#elifdef WITH_MPS\n#include <cublas_v2.h>\n#endif\n",
    "defined_here.cpp": "#define WITH_CUDA 1\n#ifdef WITH_CUDA\n#include <cuda_runtime.h>\n#endif\n",
    "opposite_name.cpp": "#ifdef DONT_USE_CUDA\n#include <cuda_runtime.h>\n#endif\n",
    "form_feed.cpp": "\f\n\f\n#ifdef WITH_CUDA\nint x;\n#endif\n#include <cuda_runtime.h>\n",
    # one guarded include does not excuse an unguarded one after it
    "partly.cpp": """
        #ifdef WITH_CUDA
        #include <c10/cuda/CUDAStream.h>
        #endif
        #include <ATen/cuda/CUDAContext.h>
        """,
}


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    root = tmp_path_factory.mktemp("csrc")
    for name, source in {**_GUARDED, **_UNGUARDED}.items():
        if "\n" in source and not source.startswith("\n"):
            (root / name).write_text(source)  # written as is: a form feed or a backslash matters
        else:
            _write(root, name, source)
    return worst_by_line(root)


def _tp502(found, name):
    hits = [(line, severity, reason) for (file, line, rule), (severity, reason) in found.items()
            if file == name and rule == "TP502"]
    assert len(hits) == 1, hits  # one finding per file, as before
    return hits[0]


@pytest.mark.parametrize("name", sorted(_GUARDED))
def test_cuda_includes_only_under_a_cuda_build_option_are_info(found, name):
    line, severity, reason = _tp502(found, name)
    assert severity == "info"
    assert "compiled only under #if" in reason and "a build without CUDA leaves it out" in reason


def test_the_guard_named_is_the_one_around_the_reported_include(found):
    assert _tp502(found, "pybind.cpp")[2].startswith("every CUDA include is compiled only under #ifdef WITH_CUDA")
    assert "#if defined(USE_CUDA) || defined(USE_ROCM)" in _tp502(found, "nested.cpp")[2]


@pytest.mark.parametrize("name", sorted(_UNGUARDED))
def test_cuda_includes_a_build_without_the_option_reaches_stay_errors(found, name):
    line, severity, reason = _tp502(found, name)
    assert severity == "error" and reason == ""


def test_the_unguarded_include_is_the_one_reported(found):
    assert _tp502(found, "partly.cpp")[0] == 4  # ATen/cuda, not the guarded c10/cuda on line 2
    assert _tp502(found, "else_branch.cpp")[0] == 4  # cublas in the #else


_KERNELS = """
    import torch
    from torch.library import custom_op, register_kernel


    @torch.library.custom_op("xlib::trailing_matmul_bwd", mutates_args=(), device_types="cuda")
    def trailing_matmul_bwd(grad: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        stream = torch.cuda.current_stream()  # quiet
        event = torch.cuda.Event()  # quiet
        out = grad @ weight
        event.record(stream)
        return out


    @custom_op("xlib::merge", mutates_args=(), device_types=["cuda"])  # kept
    def merge(x: torch.Tensor) -> torch.Tensor:
        torch.cuda.synchronize()  # quiet
        return x.clone()


    @merge.register_fake
    def _(x):
        return torch.empty_like(x)


    @torch.library.custom_op("xlib::scale", mutates_args=())
    def scale(x: torch.Tensor) -> torch.Tensor:
        torch.cuda.synchronize()  # kept
        return x * 2


    @scale.register_kernel("cuda")
    def _scale_cuda(x):
        torch.cuda.synchronize()  # quiet
        return x * 2


    @register_kernel("xlib::scale", ("cuda", "cpu"))
    def _scale_both(x):
        torch.cuda.synchronize()  # kept
        return x * 2


    lib = torch.library.Library("xlib2", "DEF")
    lib.define("mul(Tensor x) -> Tensor")


    @torch.library.impl(lib, "mul", "CUDA")
    def mul_cuda(x):
        torch.cuda.synchronize()  # quiet
        return x * 3


    @torch.library.impl("xlib2::mul", "default")
    def mul_any(x):
        torch.cuda.synchronize()  # kept
        return x * 3


    DEVICE = "cuda"


    @torch.library.custom_op("xlib::pick", mutates_args=(), device_types=DEVICE)
    def pick(x: torch.Tensor) -> torch.Tensor:
        torch.cuda.synchronize()  # kept
        return x
    """


def test_the_body_of_a_cuda_kernel_registered_with_torch_library_is_info(tmp_path):
    path = _write(tmp_path, "seqpar.py", _KERNELS)
    check_marked_lines([tmp_path], (path,))
    lines = path.read_text().splitlines()
    stream = lines.index("    stream = torch.cuda.current_stream()  # quiet") + 1
    scale_cuda = lines.index("def _scale_cuda(x):") + 2
    found = worst_by_line(tmp_path)
    assert found[("seqpar.py", stream, "TP107")][1] == (
        "in trailing_matmul_bwd, registered with torch.library as an op's CUDA kernel: the dispatcher runs it only "
        "for CUDA tensors")
    assert found[("seqpar.py", scale_cuda, "TP101")][1].startswith("in _scale_cuda, registered")


def test_a_decorator_named_like_torch_library_s_is_not_read_without_torch_library(tmp_path):
    _write(tmp_path, "ops.py", """
        import torch
        from mylib import custom_op


        @custom_op("x", device_types="cuda")
        def op(x):
            torch.cuda.synchronize()  # kept
            return x
        """)
    found = worst_by_line(tmp_path)
    assert found[("ops.py", 7, "TP101")][0] == "error", found


_SHARDERS = {
    "pkg/__init__.py": "",
    "pkg/sharder.py": """
        from typing import Optional

        import torch


        class EmbeddingSharder:
            def shard(self, module, params, device: Optional[torch.device] = None):
                if device is None:
                    device = torch.device("cuda")  # quiet
                return module.to(device)


        def place(module, device=None):
            device = device or torch.device("cuda")  # quiet
            return module.to(device)


        def place_ternary(module, device=None):
            device = torch.device("cuda") if device is None else device  # quiet
            return module.to(device)


        def place_for_everyone(module, device=None):
            if device is None:
                device = torch.device("cuda")  # kept
            return module.to(device)


        def rebound_first(module, device=None):
            device = module.device
            if device is None:
                device = "cuda:0"  # kept
            return module.to(device)


        def local_helper(module, device=None):
            device = device or torch.device("cuda")  # quiet
            return module.to(device)


        def run_here(module, device):
            return local_helper(module, device=device)


        __all__ = ["rebound_first"]
        """,
    "pkg/model_parallel.py": """
        import torch

        from pkg.sharder import EmbeddingSharder, place, place_for_everyone, place_ternary


        class DistributedModelParallel:
            def __init__(self, module, device: torch.device):
                self.device = device
                self.module = EmbeddingSharder().shard(module, {}, device=self.device)
                self.copy = place(module, self.device)
                self.other = place_ternary(module, device=self.device)
                self.everyone = place_for_everyone(module)
        """,
}


def test_a_none_default_that_falls_back_to_cuda_is_read_as_the_parameter_s_default(tmp_path):
    paths = [_write(tmp_path, name, source) for name, source in _SHARDERS.items()]
    check_marked_lines([tmp_path], tuple(paths[1:]))
    found = worst_by_line(tmp_path)
    reasons = {line: reason for (name, line, rule), (_, reason) in found.items() if name == "sharder.py"}
    lines = paths[1].read_text().splitlines()
    sharder = lines.index('            device = torch.device("cuda")  # quiet') + 1
    helper = len(lines) - lines[::-1].index('    device = device or torch.device("cuda")  # quiet')
    quiet = [n for n, text in enumerate(lines, 1) if text.endswith("# quiet")]
    assert len(quiet) == 4 and all(reasons.get(n, "").startswith("default only") for n in quiet)
    assert reasons[sharder] == "default only: every call in the scanned files passes device"
    assert reasons[helper] == "default only: every call in this file passes device"


# The body of each holds a CUDA call that runs off CUDA: another registration runs it on other
# devices, the function is called (or registered) by name, or the decorator is not torch.library's.
_KERNELS_THAT_RUN_ELSEWHERE = {
    "stacked_cpu_cuda.py": """
        import torch

        lib = torch.library.Library("mylib", "DEF")
        lib.define("fused(Tensor x) -> Tensor")


        @torch.library.impl(lib, "fused", "CPU")
        @torch.library.impl(lib, "fused", "CUDA")
        def fused(x):
            torch.cuda.synchronize()  # kept
            return x * 2
        """,
    "fake_stacked.py": """
        import torch


        @torch.library.register_fake("mylib3::op")
        @torch.library.register_kernel("mylib3::op", "cuda")
        def op_kernel(x):
            torch.cuda.synchronize()  # kept
            return torch.empty_like(x)
        """,
    "direct_call.py": """
        import torch

        lib = torch.library.Library("mylib2", "DEF")
        lib.define("fused(Tensor x) -> Tensor")


        @torch.library.impl(lib, "fused", "CUDA")
        def fused_cuda(x):
            stream = torch.cuda.current_stream()  # kept
            return x * 2


        def forward(x):
            return fused_cuda(x)
        """,
    "registered_again.py": """
        import torch


        @torch.library.custom_op("mylib4::op", mutates_args=())
        def op(x: torch.Tensor) -> torch.Tensor:
            return x.clone()


        @op.register_kernel("cuda")
        def op_cuda(x):
            torch.cuda.synchronize()  # kept
            return x.clone()


        op.register_kernel("cpu")(op_cuda)
        """,
    "lookalike_registry.py": """
        import torch
        import torch.library


        class Registry:
            def __init__(self):
                self.kernels = {}

            def register_kernel(self, name):
                def wrap(fn):
                    self.kernels[name] = fn
                    return fn
                return wrap


        registry = Registry()


        @registry.register_kernel("cuda")
        def default_kernel(x):
            return x.cuda() * 2  # kept
        """,
    "lookalike_import.py": """
        import torch
        from torch.library import Library
        from mylib.ops import custom_op


        @custom_op("mine::op", device_types="cuda")
        def op(x):
            return x.cuda()  # kept
        """,
    # a default is evaluated where the function is defined, on every device
    "one_line.py": """
        import torch


        @torch.library.custom_op("mylib5::op", mutates_args=(), device_types="cuda")
        def op(x: torch.Tensor, s: int = torch.cuda.current_device()) -> torch.Tensor: return x.clone()  # kept
        """,
}


def test_a_kernel_body_that_also_runs_elsewhere_keeps_its_findings(tmp_path):
    paths = tuple(_write(tmp_path, name, source) for name, source in _KERNELS_THAT_RUN_ELSEWHERE.items())
    kept = {(p.name, n) for p in paths for n, text in enumerate(p.read_text().splitlines(), 1)
            if text.endswith("# kept")}
    serious = {(name, line) for (name, line, _), (severity, _) in worst_by_line(tmp_path).items()
               if severity in ("error", "silent")}
    assert len(kept) == len(paths) and kept <= serious, sorted(kept - serious)


def test_the_registration_of_a_cuda_only_kernel_is_the_finding(tmp_path):
    """The op has no kernel for other devices: its registration is the line to change, at error,
    in each spelling (the list form was a finding already)."""
    _write(tmp_path, "ops.py", """
        import torch
        from torch import nn, library

        lib = torch.library.Library("xlib3", "DEF")
        lib.define("mul(Tensor x) -> Tensor")


        @torch.library.custom_op("xlib3::a", mutates_args=(), device_types="cuda")
        def a(x: torch.Tensor) -> torch.Tensor:
            torch.cuda.synchronize()
            return x


        @torch.library.impl(lib, "mul", "CUDA")
        def mul_cuda(x):
            torch.cuda.synchronize()
            return x


        @library.impl("xlib3::b", "cuda")
        def b_cuda(x):
            torch.cuda.synchronize()
            return x


        @a.register_kernel("cuda")
        def a_again(x):
            torch.cuda.synchronize()
            return x


        @torch.library.register_kernel("xlib3::a", ("cuda", "cpu"))
        def a_both(x):
            return x
        """)
    found = worst_by_line(tmp_path)
    lines = (tmp_path / "ops.py").read_text().splitlines()
    registrations = [n for n, text in enumerate(lines, 1) if text.startswith("@") and "cpu" not in text]
    assert len(registrations) == 4
    for line in registrations:
        severity, reason = found[("ops.py", line, "TP001")]
        assert severity == "error" and reason == "", line
    bodies = [n for n, text in enumerate(lines, 1) if "synchronize" in text]
    assert all(found[("ops.py", n, "TP101")][0] == "info" for n in bodies)
    assert not any(key[1] == len(lines) - 2 for key in found)  # ("cuda", "cpu"): a kernel for both


# Calls that reach the CUDA fallback although they name the parameter, or that the file hides
# (a review's probes): None passed, a None-defaulted parameter handed on, **kwargs that may not
# hold it, the function used as a value, a subclass, a call through the class.
_FALLBACKS_STILL_REACHED = {
    "pkg/__init__.py": "",
    "pkg/lib.py": """
        import functools

        import torch


        def place(x, device=None):
            if device is None:
                device = torch.device("cuda")  # kept
            return x.to(device)


        def run(x, dev=None):
            return place(x, device=None), place(x, dev), place(x, device=dev)


        def callback(x, device=None):
            device = device or torch.device("cuda")  # kept
            return x.to(device)


        def use(x, d, model):
            model.apply(callback)
            return callback(x, device=d), functools.partial(callback)


        class Base:
            def __init__(self, device=None):
                if device is None:
                    device = torch.device("cuda")  # kept
                self.device = device

            def move(self, x, device=None):
                if device is None:
                    device = torch.device("cuda")  # kept
                return x.to(device)


        class Child(Base):
            pass


        def build(d, x):
            Base(device=d).move(x, d)
            Base.move(Base(d), x)
            return Child()


        def by_kwargs(x, device=None):
            if device is None:
                device = torch.device("cuda")  # kept
            return x.to(device)


        def forwarded(x, device=None):
            device = torch.device("cuda") if device is None else device  # kept
            return x.to(device)
        """,
    "pkg/app.py": """
        from pkg.lib import by_kwargs, forwarded


        def a(x, **kw):
            return by_kwargs(x, **kw)


        def b(x, device=None):
            return forwarded(x, device=device)
        """,
}


def test_a_fallback_a_call_can_still_reach_keeps_its_finding(tmp_path):
    paths = [_write(tmp_path, name, source) for name, source in _FALLBACKS_STILL_REACHED.items()]
    kept_lines_stay(paths[1], "TP001", root=tmp_path)
