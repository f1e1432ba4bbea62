"""Round 60 (docs/precision/round60.md): tests named for the GPU.  Judges of eight samples called
every error/silent finding in a test file or test folder named for the GPU wrong (39 of 39 rows:
aitoolbox's and aepsych's ``tests_gpu/``, ppq's ``tests/test_cuda_kernel.py``, ColossalAI's
``tests/.../kernels/cuda/``, opacus's ``multigpu_*_test.py``, stable-pretraining's
``test_gpu_transforms.py``): such a suite exists to run on a GPU that torch.cuda serves, and
running it asks for one.  The findings are now info with that reason; the same lines elsewhere
(helpers, non-tests, projects inside folders with such names), and the findings a ROCm port must
still change, keep their severity."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scan_marks import worst_by_line
from scan_marks import write_snippet as _write

from torchport.scan.config import ScanConfig
from torchport.scan.gpu_test_names import gpu_suite_name
from torchport.scan.rules import finding_severity
from torchport.scan.scanner import scan

_TEST_BODY = '''
    import torch


    def test_forward():
        model = torch.nn.Linear(4, 4).cuda()
        batch = torch.randn(2, 4, device="cuda")
        assert model(batch).shape == (2, 4)
'''

_LOWERED = ("tests_gpu/models/test_semi_p.py", "tests/test_cuda_kernel.py", "tests/kernels/cuda/test_rms_norm.py",
            "tests/multigpu_clipping_test.py", "tests/unit/test_gpu_transforms.py", "gpu_tests/test_ddp.py",
            "tests/test_nccl_allreduce.py", "tests/test_multi_gpu.py", "tests/kernels/cuda/test_layernorm_no_bias.py",
            "tests_gpu/test_ddp_no_sync.py", "tests/test_cuda_non_blocking.py", "tests_gpu_v2/test_amp.py",
            "unit_tests/cuda/test_kernels.py", "tests/test_cuda118_build.py", "tests/kernels/cuda/utils.py")
_KEPT = ("tests/test_forward.py", "gpuma/tests/test_embed.py", "cuda_ops/tests/test_ops.py", "tests/test_no_gpu.py",
         "tests/test_cpu_vs_gpu.py", "tests/test_gpu_fallback.py", "train_gpu.py", "gpu/utils.py",
         "tests/testGPU.py", "tests/test_gpuma_embed.py", "tests/test_non_cuda_path.py", "tests/gpu_utils.py",
         "tests/multigpu_fsdpcheck.py", "tests/test_cuda_unavailable.py", "tests/test_mock_gpu.py",
         "tests/test_cuda_to_mps.py", "tests/gpu-trainer/train.py")


def _project(root: Path, relative: str) -> Path:
    """A project of one file: its root holds a pyproject.toml, so the path from it is what is read."""
    project = root / relative.replace("/", "__")
    _write(project, "pyproject.toml", "[project]\nname = 'demo'\n")
    _write(project, relative, _TEST_BODY)
    return project


def _severities(project: Path, lines=(5, 6)) -> set:
    return {severity for (_, n, _), (severity, _) in worst_by_line(project).items() if n in lines}


def test_a_finding_in_a_test_file_or_folder_named_for_the_gpu_is_info_naming_that_name(tmp_path):
    for relative in _LOWERED:
        found = worst_by_line(_project(tmp_path, relative))
        for line in (5, 6):
            severity, reason = next(v for (name, n, _), v in found.items() if n == line)
            assert severity == "info", (relative, line, severity, reason)
            assert "a test named for the GPU (" in reason and "a GPU test suite by its name" in reason, reason
            assert f"({gpu_suite_name(relative)})" in reason, reason


def test_the_same_lines_in_tests_not_named_for_the_gpu_and_outside_tests_keep_their_severity(tmp_path):
    for relative in _KEPT:
        assert _severities(_project(tmp_path, relative)) & {"error", "silent"}, relative


def test_folders_above_the_project_root_or_the_scan_root_never_decide(tmp_path):
    # a checkout inside a folder named `test/` or `tests/`, with and without its own pyproject.toml
    for marked in (True, False):
        for project in (tmp_path / f"marked{marked}" / "test" / "myproj", tmp_path / f"marked{marked}" / "tests" / "gpu-trainer"):
            if marked:
                _write(project, "pyproject.toml", "[project]\nname = 'demo'\n")
            for relative in ("train_gpu.py", "mypkg/cuda_utils.py", "train.py"):
                _write(project, relative, _TEST_BODY)
            found = worst_by_line(project)
            assert {severity for (_, n, _), (severity, _) in found.items() if n in (5, 6)} == {"error"}, found
    # a project without its own root file inside a workspace that has one (a `.git` above it)
    workspace = tmp_path / "workspace"
    _write(workspace, ".git", "gitdir: elsewhere\n")
    for relative in ("test/myproj/train_gpu.py", "test/myproj/mypkg/cuda_utils.py", "tests/gpu-trainer/train.py"):
        _write(workspace, relative, _TEST_BODY)
    found = worst_by_line(workspace)
    assert {severity for (_, n, _), (severity, _) in found.items() if n in (5, 6)} == {"error"}, found
    # without a project root only the file's own name is read, wherever the scan starts
    bare = tmp_path / "bare"
    _write(bare, "tests_gpu/models/test_semi_p.py", _TEST_BODY)
    _write(bare, "tests/test_cuda_kernel.py", _TEST_BODY)
    found = worst_by_line(bare)
    assert {severity for (name, n, _), (severity, _) in found.items() if name == "test_semi_p.py"} == {"error"}
    assert {severity for (name, n, _), (severity, _) in found.items() if name == "test_cuda_kernel.py"} == {"info"}


def test_the_answer_does_not_depend_on_where_the_scan_starts(tmp_path):
    project = _project(tmp_path, "tests_gpu/models/test_semi_p.py")
    _write(project, "tests/kernels/cuda/utils.py", _TEST_BODY)  # a test only by its folders
    worst = set()
    for cwd, target in ((project, "."), (project / "tests_gpu", "."), (project / "tests_gpu" / "models", "test_semi_p.py"),
                        (project / "tests", "."), (project / "tests" / "kernels" / "cuda", "utils.py")):
        result = subprocess.run([sys.executable, "-m", "torchport", "scan", target, "--format", "json", "--fail-on", "never"],
                                cwd=cwd, capture_output=True, text=True, timeout=120,
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
        assert result.returncode == 0, result.stderr
        findings = json.loads(result.stdout)["findings"]
        worst |= {max((s for s in f["severity"].values() if s), key=("info", "perf", "silent", "error").index)
                  for f in findings if f["line"] in (5, 6)}
    assert worst == {"info"}


def test_findings_a_rocm_port_must_still_change_and_cuda_sources_keep_their_severity(tmp_path):
    """On ROCm torch.cuda is HIP: running a GPU suite there is the port itself."""
    project = tmp_path / "proj"
    _write(project, "pyproject.toml", "[project]\nname = 'demo'\n")
    _write(project, "tests_gpu/test_memory.py", '''
        import flash_attn
        import torch


        def test_memory():
            assert torch.randn(2, device="cuda").is_cuda
    ''')
    _write(project, "tests_gpu/test_compare.py", '''
        import torch_xla.core.xla_model as xm


        def test_xla_matches_gpu():
            assert xm.xla_device() is not None
    ''')
    _write(project, "setup.py", '''
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(name="demo", ext_modules=[CUDAExtension("fused_ops_cuda", ["csrc/fused.cu"])],
              cmdclass={"build_ext": BuildExtension})
    ''')
    _write(project, "tests_gpu/test_fused.py", '''
        import fused_ops_cuda


        def test_fused():
            assert fused_ops_cuda.version()
    ''')
    _write(project, "tests/kernels/cuda/warp_kernel.cu", '''
        #include <cuda_runtime.h>
        __device__ unsigned lane() {
            unsigned id;
            asm("mov.u32 %0, %%laneid;" : "=r"(id));
            return id;
        }
    ''')
    result = scan([project], ScanConfig(), jobs=1)
    by_line = {(Path(f.path).name, f.line, f.rule_id): f for f in result.findings}
    cuda_string = by_line[("test_memory.py", 6, "TP001")]
    assert cuda_string.severity_cap == "info", cuda_string
    kernel_findings = [f for (name, _, _), f in by_line.items() if name == "warp_kernel.cu"]
    assert kernel_findings and all("named for the GPU" not in (f.cap_reason or "") for f in kernel_findings)
    rocm_blockers = [f for f in result.findings if finding_severity(f, "rocm") in ("error", "silent")]
    assert all("named for the GPU" not in (f.cap_reason or "") for f in rocm_blockers)
    # the compiled extension a GPU test imports (hipify must build it for ROCm) and torch_xla calls,
    # which no GPU suite's name excuses
    held = {(Path(f.path).name, f.line, f.rule_id) for f in rocm_blockers}
    assert {("test_fused.py", 1, "TP504"), ("test_compare.py", 1, "TP802"), ("test_compare.py", 5, "TP801")} <= held


def test_the_name_read_is_the_file_or_a_folder_from_the_test_folder_nearest_to_it_down():
    assert gpu_suite_name("tests_gpu/models/test_semi_p.py") == "tests_gpu/"
    assert gpu_suite_name("tests_gpu/test_multi_gpu/test_amp/test_ddp.py") == "test_multi_gpu/"
    assert gpu_suite_name("pkg/tests/kernels/cuda/test_rms.py") == "cuda/"
    assert gpu_suite_name("tests/test_cuda_kernel.py") == "test_cuda_kernel.py"
    assert gpu_suite_name("tests\\test_cuda_graphs.py") == "test_cuda_graphs.py"
    assert gpu_suite_name("x/gpu_tests/models/test_b.py") == "gpu_tests/"
    assert gpu_suite_name("x/Tests_GPU/models/test_b.py") == "Tests_GPU/"
    assert gpu_suite_name("tests/test_cuda_non_blocking.py") == "test_cuda_non_blocking.py"
    # the package's name above its tests, a word that only contains "gpu", a test of running without one
    assert gpu_suite_name("gpuma-0.8.1/tests/test_embed.py") is None
    assert gpu_suite_name("cuda_ops/tests/test_ops.py") is None
    assert gpu_suite_name("tests/test_gpuma.py") is None
    assert gpu_suite_name("tests/test_non_cuda_path.py") is None
    assert gpu_suite_name("tests/test_cpu_vs_gpu.py") is None
    # a folder with other words is one test's own folder (pytest's tmp_path), not a suite;
    # `cuda0` is pytest's counter, not a toolkit version
    assert gpu_suite_name("test_amp_that_needs_cuda0/test_cast.py") is None
    assert gpu_suite_name("test_cuda0/test_model.py") is None
    assert gpu_suite_name("tests/test_cuda0/test_model.py") is None
    # a folder counts only when named for the GPU alone; a file's name only where it makes the file a test
    assert gpu_suite_name("tests/gpu-trainer/train.py") is None
    assert gpu_suite_name("test/myproj/train_gpu.py") is None
    assert gpu_suite_name("tests/gpu_utils.py") is None
    assert gpu_suite_name("tests/helpers/gpu.py") is None
    assert gpu_suite_name("tests/gpu/helpers.py") == "gpu/"
    # names that speak of running without a GPU, or on another device
    for name in ("test_cuda_not_available", "test_gpu_unavailable", "test_cuda_missing", "test_cuda_disabled",
                 "test_without_a_gpu", "test_mock_cuda", "test_fake_gpu", "test_xpu_vs_cuda", "test_cuda_to_mps"):
        assert gpu_suite_name(f"tests/{name}.py") is None, name
