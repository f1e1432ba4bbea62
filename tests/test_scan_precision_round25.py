"""A branch taken only where CUDA is present or where the user opts in through the environment:
``if torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":`` around a CUDA extension
build, the shape of mmcv's setup.py (judge 25's S680243-087) and of many CUDA-extension packages,
which build a CppExtension in the ``else``.  Its findings are info; the same branch is kept where
the test holds without CUDA and without the variable (a default that is on, an operand the scan
cannot read, a file that sets the variable itself), and the ``else`` keeps its findings."""
from __future__ import annotations

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_SETUP = """
    import os

    import torch
    from setuptools import setup
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension


    def get_extensions(args):
        macros = []
        if torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":
            macros += [("WITH_CUDA", None)]
            extension = CUDAExtension  # quiet
        else:
            extension = CppExtension
            torch.cuda.synchronize()  # kept
        if (torch.cuda.is_available() and CUDA_HOME is not None) or os.environ.get("FORCE_CUDA") == "1":
            extension = CUDAExtension  # quiet
        if torch.cuda.is_available() or os.getenv("FORCE_CUDA", "1") == "1":
            extension = CUDAExtension  # kept
        if torch.cuda.is_available() or args.force_cuda:
            extension = CUDAExtension  # kept
        if torch.cuda.device_count() > 0 or os.getenv("WITH_CUDA") == "true":
            extension = CUDAExtension  # quiet
        is_rocm = False
        try:
            from torch.utils.cpp_extension import ROCM_HOME
            is_rocm = True if ((torch.version.hip is not None) and
                               (ROCM_HOME is not None)) else False
        except ImportError:
            pass
        if os.getenv("WITH_NPU", "0") == "1":
            extension = CppExtension
        elif is_rocm or torch.cuda.is_available() or os.getenv(
                "FORCE_CUDA", "0") == "1":
            extension = CUDAExtension  # quiet
        if torch.cuda.is_available() or os.getenv("NO_CUDA", "0") != "1":
            extension = CUDAExtension  # kept
        return [extension(name="pkg._ext", sources=["ops.cpp"], define_macros=macros)]


    setup(name="pkg", ext_modules=get_extensions(None), cmdclass={"build_ext": BuildExtension})
    """

_SETS_IT_ITSELF = """
    import os

    import torch
    from torch.utils.cpp_extension import CUDAExtension

    os.environ["FORCE_CUDA"] = "1"


    def extensions():
        if torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":
            return [CUDAExtension("pkg._ext", ["ops.cu"])]  # kept
        return []
    """


# Tests that hold on a host without CUDA or ROCm, the environment at its defaults, or flags the
# scan cannot show to be false there (a review's probes).
_HOLDS_WITHOUT_CUDA = """
    import os
    import sys

    import torch
    from torch.utils.cpp_extension import CUDA_HOME, CUDAExtension
    from pkg.env import is_rocm_build

    os.environ.setdefault("SET_CUDA", "1")
    FORCE = os.getenv("FORCE_CUDA")
    if sys.platform == "linux":
        FORCE = "1"


    def probe():
        is_rocm_build = torch.version.hip is not None
        return is_rocm_build


    if is_rocm_build or torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":
        ext = CUDAExtension  # kept


    def extensions(args):
        with_cuda = torch.version.hip is None and CUDA_HOME is not None
        if with_cuda or torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":
            ext = CUDAExtension  # kept
        if torch.cuda.is_available() or os.getenv("FORCE_CUDA", default="1") == "1":
            ext = CUDAExtension  # kept
        if torch.cuda.is_available() or os.getenv("SET_CUDA", "0") == "1":
            ext = CUDAExtension  # kept
        if torch.cuda.is_available() or FORCE == "1":
            ext = CUDAExtension  # kept
        is_rocm = torch.version.hip is not None
        if args.rocm: is_rocm = True
        if is_rocm or torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":
            ext = CUDAExtension  # kept
        if torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":
            ext = CUDAExtension  # quiet
        return ext
    """


def test_a_branch_for_cuda_or_an_environment_opt_in_is_info(tmp_path):
    paths = (_write(tmp_path / "a", "setup.py", _SETUP), _write(tmp_path / "b", "build.py", _SETS_IT_ITSELF),
             _write(tmp_path / "c", "setup.py", _HOLDS_WITHOUT_CUDA))
    check_marked_lines([tmp_path], paths)


def test_the_reason_names_both_ways_in(tmp_path):
    from torchport.scan.config import ScanConfig
    from torchport.scan.scanner import scan

    _write(tmp_path, "setup.py", _SETUP)
    lines = (tmp_path / "setup.py").read_text().splitlines()
    quiet = [n for n, text in enumerate(lines, 1) if text.endswith("# quiet")]
    findings = {f.line: f for f in scan([tmp_path], ScanConfig(), jobs=1).findings if f.rule_id == "TP501"}
    assert len(quiet) == 4 and set(quiet) <= set(findings)  # each lowered here, not dropped
    for line in quiet:
        assert findings[line].cap_reason.startswith(
            "only where CUDA or ROCm is present, or when the user opts in through the environment ("), line
