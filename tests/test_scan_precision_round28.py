"""The CUDA autocast state of an autograd Function, registrations made per device, and inline PTX
only an NVIDIA architecture compiles.  Shapes from the thirtieth judge's verdicts (seed 77419),
all in torch-harmonics: ``@torch.amp.custom_fwd(device_type="cuda")`` and its project wrappers
(14 judged incorrect: nothing fails without CUDA), ``_make_autocast_impl("cuda")`` beside
``_make_autocast_impl("cpu")``, and ``asm volatile(...)`` under ``#if __CUDA_ARCH__ >= 800``
(10 judged incorrect: a HIP build compiles it out, so no ROCm build error)."""
from __future__ import annotations

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

_AUTOCAST_STATE = """
    from functools import partial

    import torch

    # a call of it may add cast_inputs=, which this file uses
    _custom_fwd = partial(torch.amp.custom_fwd, device_type="cuda")  # kept


    class Gather(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda")  # quiet
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")  # quiet
        def backward(ctx, grad):
            return grad * 2


    class Normalize(torch.autograd.Function):
        # casts its inputs to float32 under CUDA autocast only: under MPS autocast they stay half
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)  # kept
        def forward(ctx, x):
            return x / x.norm()


    def run(x):
        # the device of a tensor, not an autocast state
        return Gather.apply(torch.ones(2, device="cuda") + x)  # kept


    def _make_autocast_impl(device_type):
        @torch.library.impl("mylib::attn", "Autocast" + device_type.upper())
        def _(q):
            return q
        return _


    def _make_fused_impl(device_type):
        torch.library.impl("mylib::fused", device_type.upper())(fused)


    def register_kernel(device_type, fused):
        torch.library.impl("mylib::attn", device_type.upper())(fused)


    _make_autocast_impl("cuda")  # quiet
    _make_autocast_impl("cpu")
    # registered for CUDA alone
    _make_fused_impl("cuda")  # kept
    # the other call differs in more than the device
    register_kernel("cuda", fused=True)  # kept
    register_kernel("cpu", fused=False)


    def check_accuracy(model, batches):
        # the same model moved to CUDA, then back (avalanche-lib, judged correct)
        model.to("cuda")  # kept
        accuracy = [model(x.to("cuda")).argmax(-1) for x in batches]
        model.to("cpu")
        return accuracy
    """


_WRAPPERS = """
    from functools import partial

    import torch

    custom_fwd = partial(torch.amp.custom_fwd, device_type="cuda")  # quiet
    custom_bwd = partial(torch.amp.custom_bwd, device_type="cuda")  # quiet
    # keyword arguments that may ask for a cast of the inputs
    cast_fwd = torch.amp.custom_fwd(device_type="cuda", **AMP_KWARGS)  # kept
    """


def test_an_autograd_functions_cuda_autocast_state_and_a_registration_per_device(tmp_path):
    ops = _write(tmp_path, "ops.py", _AUTOCAST_STATE)
    wrappers = _write(tmp_path, "wrappers.py", _WRAPPERS)
    check_marked_lines([ops, wrappers], (ops, wrappers))


_PTX = """
    #pragma once
    __device__ void copy_async(void* dst, const void* src) {
    #if __CUDA_ARCH__ >= 800
      asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src));
    #else
      *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(src);
    #endif
    }
    __device__ void fence() {
    #if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      asm volatile("fence.proxy.async;");
    #endif
    }
    __device__ void older() {
    #if __CUDA_ARCH__ < 800
      asm volatile("membar.gl;");
    #endif
    #if defined(__CUDA_ARCH__) || defined(__HIP__)
      asm volatile("nop;");
    #endif
    #if __CUDA_ARCH__ >= 900
      asm volatile("a;");
    #elif __CUDA_ARCH__ >= 800
      asm volatile("b;");
    #endif
    }
    __device__ void continued() {
    #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 \\
        || defined(__HIP_PLATFORM_AMD__)
      asm volatile("c;");
    #endif
    #if __CUDA_ARCH__ >= 800
    #if __CUDA_ARCH__ >= 900
      asm volatile("n1;");
    #else
      asm volatile("n2;");
    #endif
    #endif
    #if defined(__HIP__)
      hip_fallback();
    #elif __CUDA_ARCH__ >= 800
      asm volatile("after_hip;");
    #endif
    }
    __device__ void commit() {
    #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
      asm volatile("cp.async.commit_group;");
    #else
      assert(("only on Ampere and newer", false));
    #endif
    }
    """


def test_inline_ptx_that_only_an_nvidia_architecture_compiles(tmp_path):
    _write(tmp_path, "ptx.cuh", _PTX)
    found = worst_by_line(tmp_path)
    # HIP leaves the test false and compiles the #else
    assert found[("ptx.cuh", 4, "TP505")][0] == "info"
    # HIP compiles it out and nothing takes its place
    assert found[("ptx.cuh", 11, "TP505")][0] == "silent"
    assert found[("ptx.cuh", 22, "TP505")][0] == "silent"
    assert found[("ptx.cuh", 24, "TP505")][0] == "silent"
    # true without __CUDA_ARCH__ (undefined is 0), or with __HIP__: HIP compiles the PTX and fails
    assert found[("ptx.cuh", 16, "TP505")][0] == "error"
    assert found[("ptx.cuh", 19, "TP505")][0] == "error"
    # HIP compiles the #else, which asserts when it runs (DeepSpeed's cp.async helpers)
    assert found[("ptx.cuh", 47, "TP505")][0] == "error"
    # an || on the next line that HIP makes true
    assert found[("ptx.cuh", 30, "TP505")][0] == "error"
    # inside an outer test with no other branch: HIP compiles neither inner branch
    assert found[("ptx.cuh", 34, "TP505")][0] == "silent"
    assert found[("ptx.cuh", 36, "TP505")][0] == "silent"
    # HIP compiles the branch before it
    assert found[("ptx.cuh", 42, "TP505")][0] == "info"


# Shapes from a second independent review.
_NOT_ONLY_A_REGISTRATION = """
    import torch

    lib = torch.library.Library("mylib", "IMPL")


    def make_autocast(device_type):
        lib.impl("op", kernel, "Autocast" + device_type.upper())
        return torch.empty(1 << 20, device=device_type)


    def register_autocast(device_type):
        lib.impl("op", kernel, f"Autocast{device_type.upper()}")


    def run(function, x, device_type):
        return function(x.to(device_type))


    # it makes a tensor on the device as well
    make_autocast("cuda")  # kept
    make_autocast("cpu")
    # not a partial: the device goes to run
    run(torch.amp.custom_fwd, torch.ones(2), device_type="cuda")  # kept
    # registers only, for each device
    register_autocast("cuda")  # quiet
    register_autocast("cpu")
    """


def test_a_call_per_device_that_does_more_than_register_stays_reported(tmp_path):
    path = _write(tmp_path, "setup.py", _NOT_ONLY_A_REGISTRATION)
    check_marked_lines([path], (path,))
    found = worst_by_line(tmp_path)
    assert found[("setup.py", 25, "TP001")][0] == "info"  # reported, as one registration per device


_MORE_PTX = """
    __device__ void empty_else() {
    #if __CUDA_ARCH__ >= 800
      asm volatile("a;");
    #else
      // not supported
    #endif
    #if __CUDA_ARCH__ >= 900
      asm volatile("b;");
    #elif defined(__CUDA_ARCH__) && !defined(NO_PTX)
      asm volatile("c;");
    #endif
    #if __CUDA_ARCH__ >= 800
      asm volatile("d;");
    #else
      assert(p);
      p[0] = 1;
    #endif
    }
    """


def test_what_hip_compiles_in_place_of_the_ptx(tmp_path):
    _write(tmp_path, "more.cuh", _MORE_PTX)
    found = worst_by_line(tmp_path)
    # a comment compiles nothing
    assert found[("more.cuh", 3, "TP505")][0] == "silent"
    # HIP compiles neither branch
    assert found[("more.cuh", 8, "TP505")][0] == "silent"
    assert found[("more.cuh", 10, "TP505")][0] == "silent"
    # an #else that asserts and then works is a branch of its own
    assert found[("more.cuh", 13, "TP505")][0] == "info"
