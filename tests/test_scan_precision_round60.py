"""Round 60 (docs/precision/round60.md): tests named for the GPU.  Judges of eight samples called
every error/silent finding in a test file or test folder named for the GPU wrong (41 of 41 rows:
aitoolbox's and aepsych's ``tests_gpu/``, ppq's ``tests/test_cuda_kernel.py``, ColossalAI's
``tests/.../kernels/cuda/``, opacus's ``multigpu_*_test.py``, stable-pretraining's
``test_gpu_transforms.py``): such a suite exists to run CUDA, and running it asks for CUDA.  The
findings are now info with that reason; the same lines elsewhere keep their severity."""
from __future__ import annotations

from scan_marks import worst_by_line
from scan_marks import write_snippet as _write

from torchport.scan.policy import _gpu_named_test

_TEST_BODY = '''
    import torch


    def test_forward():
        model = torch.nn.Linear(4, 4).cuda()
        batch = torch.randn(2, 4, device="cuda")
        assert model(batch).shape == (2, 4)
'''

_LOWERED = ("tests_gpu/models/test_semi_p.py", "tests/test_cuda_kernel.py", "tests/kernels/cuda/test_rms_norm.py",
            "tests/multigpu_clipping_test.py", "tests/unit/test_gpu_transforms.py", "gpu_tests/test_ddp.py",
            "tests/test_nccl_allreduce.py", "tests/test_multi_gpu.py")
_KEPT = ("tests/test_forward.py", "gpuma/tests/test_embed.py", "cuda_ops/tests/test_ops.py", "tests/test_no_gpu.py",
         "tests/test_cpu_vs_gpu.py", "tests/test_gpu_fallback.py", "train_gpu.py", "gpu/utils.py",
         "tests/testGPU.py", "tests/test_gpuma_embed.py")


def test_a_finding_in_a_test_file_or_folder_named_for_the_gpu_is_info_naming_that_name(tmp_path):
    for relative in _LOWERED + _KEPT:
        _write(tmp_path / relative.replace("/", "__"), relative, _TEST_BODY)
    for relative in _LOWERED:
        found = worst_by_line(tmp_path / relative.replace("/", "__"))
        for line in (5, 6):
            severity, reason = next(v for (name, n, _), v in found.items() if n == line)
            assert severity == "info", (relative, line, severity, reason)
            assert "a test named for the GPU (" in reason and "running it asks for CUDA" in reason, reason
            assert f"({_gpu_named_test(relative)})" in reason, reason


def test_the_same_lines_in_tests_not_named_for_the_gpu_and_outside_tests_keep_their_severity(tmp_path):
    for relative in _KEPT:
        _write(tmp_path / relative.replace("/", "__"), relative, _TEST_BODY)
        found = worst_by_line(tmp_path / relative.replace("/", "__"))
        severities = {severity for (name, n, _), (severity, _) in found.items() if n in (5, 6)}
        assert severities & {"error", "silent"}, (relative, found)


def test_the_name_read_is_the_file_or_a_folder_from_the_test_folder_nearest_to_it_down():
    assert _gpu_named_test("tests_gpu/models/test_semi_p.py") == "tests_gpu/"
    assert _gpu_named_test("tests_gpu/test_multi_gpu/test_amp/test_ddp.py") == "test_multi_gpu/"
    assert _gpu_named_test("pkg/tests/kernels/cuda/test_rms.py") == "cuda/"
    assert _gpu_named_test("tests/test_cuda_kernel.py") == "test_cuda_kernel.py"
    assert _gpu_named_test("eigen/unsupported/test/cxx11_tensor_argmax_cuda.cu") == "cxx11_tensor_argmax_cuda.cu"
    assert _gpu_named_test("tests\\test_cuda_graphs.py") == "test_cuda_graphs.py"
    # the package's name above its tests, a word that only contains "gpu", a test of running without one
    assert _gpu_named_test("gpuma-0.8.1/tests/test_embed.py") is None
    assert _gpu_named_test("cuda_ops/tests/test_ops.py") is None
    assert _gpu_named_test("tests/test_gpuma.py") is None
    assert _gpu_named_test("tests/test_non_cuda_path.py") is None
    assert _gpu_named_test("tests/gpu/test_cpu_fallback.py") is None
    # an absolute path: folders above the nearest test folder are the machine's or the project's
    assert _gpu_named_test("/home/me/tests/proj/pkg/gpu/tests/test_ops.py") is None
    assert _gpu_named_test("/tmp/test_run_0/tests/kernels/cuda/test_rms.py") == "cuda/"
    assert _gpu_named_test("/srv/gpu_tests_archive/proj/tests/test_forward.py") is None
    # a test folder named for the GPU and nothing else; a longer name is one test's own folder
    # (pytest's tmp_path for `test_amp_that_needs_cuda`), which names the test that made it
    assert _gpu_named_test("x/gpu_tests/models/test_b.py") == "gpu_tests/"
    assert _gpu_named_test("x/Tests_GPU/models/test_b.py") == "Tests_GPU/"
    assert _gpu_named_test("/tmp/pytest-of-me/pytest-3/test_amp_that_needs_cuda0/test_cast.py") is None
    assert _gpu_named_test("/tmp/pytest-of-me/pytest-3/test_amp_that_needs_cuda0/pkg/tests/test_x.py") is None
