"""Round 17: CUDA code a user must opt into (docs/precision/round17.md).  A CUDA source whose every
loader in the package runs only under an opt-in (an environment variable off by default, a
command that only builds, a caught try) is info, and so are the build calls under that opt-in;
a source the package builds on its default path stays an error.  In an example script, CUDA used
only when an option whose default means "unset" was given (``if args.gpu is not None:``) is
info; against an option with a real default it stays.  The snippets are written for these
tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import worst_by_line
from scan_marks import write_snippet as _write

_KERNEL = '''
    #include <cuda_runtime.h>
    __global__ void scale_kernel(float *x, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
'''
_HEADER = '''
    #pragma once
    #include <cuda_fp16.h>
    void scale(float *x, float a, int n);
'''
_BINDING = '''
    #include <torch/extension.h>
    #include <c10/cuda/CUDAGuard.h>
    #include "scale.h"
'''



def _kernel_package(root: Path, loader: str) -> Path:
    for name, text in (("scale.cu", _KERNEL), ("scale.h", _HEADER), ("binding.cpp", _BINDING)):
        _write(root, f"fastscale/kernels/{name}", text)
    _write(root, "fastscale/__init__.py", "")
    _write(root, "fastscale/ops.py", loader)
    return root / "fastscale"


_ENVIRONMENT_LOADER = '''
    import os
    import torch

    here = os.path.dirname(__file__)
    if os.environ.get("FASTSCALE_CUDA", "0") == "1":
        from torch.utils.cpp_extension import load
        scale_ext = load(name="scale_ext", sources=[f"{here}/kernels/binding.cpp", f"{here}/kernels/scale.cu"])


    def scale(x, a):
        if os.environ.get("FASTSCALE_CUDA", "0") == "1" and x.is_cuda:
            return scale_ext.scale(x, a)
        return x * a
'''

_DEFAULT_LOADER = '''
    import os
    from torch.utils.cpp_extension import load

    here = os.path.dirname(__file__)
    scale_ext = load(name="scale_ext", sources=[f"{here}/kernels/binding.cpp", f"{here}/kernels/scale.cu"])
'''

_SELF_ENABLED_LOADER = '''
    import os
    from torch.utils.cpp_extension import load

    os.environ["FASTSCALE_CUDA"] = "1"
    here = os.path.dirname(__file__)
    if os.environ.get("FASTSCALE_CUDA") == "1":
        scale_ext = load(name="scale_ext", sources=[f"{here}/kernels/binding.cpp", f"{here}/kernels/scale.cu"])
'''


def test_sources_built_only_under_an_environment_opt_in_are_info(tmp_path: Path) -> None:
    found = worst_by_line(_kernel_package(tmp_path, _ENVIRONMENT_LOADER))
    sources = {key: value for key, value in found.items() if key[2] == "TP502"}
    # the kernel, the binding named beside it and the header no Python file names
    assert {key[0] for key in sources} == {"scale.cu", "binding.cpp", "scale.h"}
    for (name, _, _), (worst, reason) in sources.items():
        assert worst == "info", name
        assert "FASTSCALE_CUDA=1" in reason and "ops.py:7" in reason, reason
    build = found[("ops.py", 7, "TP501")]
    assert build[0] == "info" and "FASTSCALE_CUDA=1" in build[1]


def test_sources_built_on_the_default_path_stay_errors(tmp_path: Path) -> None:
    found = worst_by_line(_kernel_package(tmp_path, _DEFAULT_LOADER))
    assert found[("scale.cu", 1, "TP502")][0] == "error"
    assert found[("ops.py", 5, "TP501")][0] == "error"


def test_an_environment_switch_the_package_turns_on_itself_is_no_opt_in(tmp_path: Path) -> None:
    found = worst_by_line(_kernel_package(tmp_path, _SELF_ENABLED_LOADER))
    assert found[("scale.cu", 1, "TP502")][0] == "error"
    assert found[("ops.py", 7, "TP501")][0] == "error"


_COMMAND_LOADER = '''
    import os

    import click


    @click.group()
    def cli():
        pass


    @cli.command("compile-kernels")
    def compile_kernels():
        """Build the CUDA kernels ahead of time."""
        import torch
        from torch.utils.cpp_extension import load
        here = os.path.dirname(__file__)
        include = torch.utils.cpp_extension.include_paths(device_type="cuda")
        _ = load(name="scale_ext", sources=[f"{here}/kernels/binding.cpp", f"{here}/kernels/scale.cu"],
                 extra_include_paths=include, with_cuda=True, is_python_module=False)
'''

_COMMAND_USING_BUILD = '''
    import os

    import click


    @click.group()
    def cli():
        pass


    @cli.command("run")
    def run():
        from torch.utils.cpp_extension import load
        here = os.path.dirname(__file__)
        ext = load(name="scale_ext", sources=[f"{here}/kernels/binding.cpp", f"{here}/kernels/scale.cu"])
        ext.scale()
'''


def test_sources_built_only_by_an_explicit_build_command_are_info(tmp_path: Path) -> None:
    found = worst_by_line(_kernel_package(tmp_path, _COMMAND_LOADER))
    worst, reason = found[("scale.cu", 1, "TP502")]
    assert worst == "info" and "`compile-kernels`" in reason, reason
    assert found[("scale.h", 2, "TP502")][0] == "info"
    worst, reason = found[("ops.py", 18, "TP501")]
    assert worst == "info" and "compile-kernels" in reason, reason


def test_a_command_that_uses_what_it_builds_stays(tmp_path: Path) -> None:
    found = worst_by_line(_kernel_package(tmp_path, _COMMAND_USING_BUILD))
    assert found[("scale.cu", 1, "TP502")][0] == "error"
    assert found[("ops.py", 15, "TP501")][0] == "error"


_EXAMPLE = '''
    import argparse

    import torch
    from torch.backends import cudnn

    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", default=None, type=int, help="GPU id to use.")
    parser.add_argument("--cuda-id", default=-1, type=int, help="GPU id, -1 for the CPU.")
    parser.add_argument("--local-rank", default=0, type=int)


    def main():
        args = parser.parse_args()
        model = torch.nn.Linear(4, 4)
        if args.gpu is not None:
            torch.cuda.set_device(args.gpu)  # opt-in set_device
            model = model.cuda(args.gpu)  # opt-in cuda
            loc = "cuda:{}".format(args.gpu)  # opt-in string
            cudnn.benchmark = True
        else:
            loc = "cpu"
        if args.cuda_id >= 0:
            model.cuda(args.cuda_id)  # opt-in minus one
        if args.local_rank is not None:
            model.cuda(args.local_rank)  # kept
        return model, loc
'''


def test_cuda_only_when_an_unset_option_is_given_is_info(tmp_path: Path) -> None:
    path = _write(tmp_path, "examples/evaluate.py", _EXAMPLE)
    lines = path.read_text().splitlines()
    found = worst_by_line(path)
    for mark, rule in (("set_device", "TP004"), ("cuda", "TP002"), ("string", "TP001"), ("minus one", "TP002")):
        line = next(n for n, text in enumerate(lines, 1) if text.endswith(f"# opt-in {mark}"))
        worst, reason = found[("evaluate.py", line, rule)]
        assert worst == "info", (mark, reason)
        assert "only when `args." in reason, reason
    kept = next(n for n, text in enumerate(lines, 1) if text.endswith("# kept"))
    assert found[("evaluate.py", kept, "TP002")][0] == "error"


_BUILD_SCRIPT = '''
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    setup(
        name="scale_ext",
        ext_modules=[CUDAExtension("scale_ext", ["binding.cpp", "scale.cu"])],
        cmdclass={"build_ext": BuildExtension},
    )
'''


def test_sources_built_by_a_setup_script_inside_the_package_are_info(tmp_path: Path) -> None:
    package = _kernel_package(tmp_path, "import torch\n")
    _write(package, "kernels/__init__.py", "")
    _write(package, "kernels/setup_kernels.py", _BUILD_SCRIPT)
    found = worst_by_line(package)
    worst, reason = found[("scale.cu", 1, "TP502")]
    assert worst == "info" and "setup_kernels.py" in reason, reason
    worst, reason = found[("setup_kernels.py", 6, "TP501")]
    assert worst == "info" and "build script" in reason, reason


def test_a_setup_script_at_the_distribution_root_stays(tmp_path: Path) -> None:
    package = _kernel_package(tmp_path, "import torch\n")
    _write(package, "kernels/setup.py", _BUILD_SCRIPT)  # kernels/ is no package: this is the build
    found = worst_by_line(package)
    assert found[("scale.cu", 1, "TP502")][0] == "error"
    assert found[("setup.py", 6, "TP501")][0] == "error"


_NAMED_SWITCH = '''
    import os
    from torch.utils.cpp_extension import load

    JIT_BUILD = os.getenv("FASTSCALE_JIT")
    STRICT = os.getenv("FASTSCALE_STRICT", "1")
    if JIT_BUILD == "True":
        scale_ext = load("scale_ext", sources=["kernels/binding.cpp", "kernels/scale.cu"])
    if STRICT == "1":
        strict_ext = load("strict_ext", sources=["kernels/binding.cpp", "kernels/scale.cu"])
'''


def test_an_environment_switch_held_in_a_name_is_opt_in_unless_on_by_default(tmp_path: Path) -> None:
    path = _write(tmp_path, "ops.py", _NAMED_SWITCH)
    found = worst_by_line(path)
    worst, reason = found[("ops.py", 7, "TP501")]
    assert worst == "info" and "FASTSCALE_JIT=True" in reason, reason
    assert found[("ops.py", 9, "TP501")][0] == "error"  # FASTSCALE_STRICT is "1" unless set
