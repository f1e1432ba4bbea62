"""Test scaffolding that pytest skips without CUDA, and work done once per CUDA device.
Shapes from the twenty-eighth judge's verdicts (seed 501976): a ``pytest.param`` of a CUDA
device marked to skip without CUDA (ai2-olmo-core's ``testing/utils.py``, #082 and #084), an
``if torch.cuda.is_available():`` in a test class that only defines tests (opennmt-py's
translation server tests, #081), and a property read for each of ``range(torch.cuda.device_count())``
in a generator (exllamav2's ``attn.py``, #090): none of them runs without CUDA."""
from __future__ import annotations

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

_PARAMS = """
    import pytest
    import torch

    has_cuda = torch.cuda.is_available()
    has_mps = torch.backends.mps.is_available()
    GPU_MARKS = (pytest.mark.gpu, pytest.mark.skipif(not has_cuda, reason="Requires a GPU"))
    MPS_MARKS = (pytest.mark.skipif(not has_mps, reason="Requires MPS"),)

    DEVICES = [
        pytest.param(torch.device("cpu"), id="cpu"),
        pytest.param(torch.device("cuda"), id="cuda", marks=GPU_MARKS),  # quiet
        pytest.param(torch.device("cuda:1"), marks=[pytest.mark.skipif(not torch.cuda.is_available(), reason="")]),  # quiet
        # marked, but not to skip without CUDA
        pytest.param(torch.device("cuda"), id="cuda-unmarked", marks=pytest.mark.gpu),  # kept
        # skipped without MPS, not without CUDA
        pytest.param(torch.device("cuda"), id="cuda-on-mps", marks=MPS_MARKS),  # kept
    ]


    @pytest.mark.parametrize("device", DEVICES)
    def test_zeros(device):
        assert torch.zeros(2, device=device).sum() == 0
    """


def test_a_cuda_parameter_that_pytest_skips_without_cuda_is_scaffolding(tmp_path):
    path = _write(tmp_path, "test_devices.py", _PARAMS)
    check_marked_lines([path], (path,))


_DEFINED_ONLY_WITH_CUDA = """
    import unittest

    import torch


    class TestServer(unittest.TestCase):
        def test_on_cpu(self):
            self.assertEqual(torch.zeros(1).device.type, "cpu")

        if torch.cuda.is_available():  # quiet

            def test_moving_to_gpu(self):
                torch.cuda.set_device(torch.device("cuda", 0))

            if torch.cuda.device_count() > 1:

                def test_second_gpu(self):
                    torch.cuda.set_device(1)


    class Loader:
        # defines a helper the package calls, not a test
        if torch.cuda.is_available():  # kept

            def place(self, batch):
                return batch.cuda()
    """


def test_tests_defined_only_where_cuda_is_present_are_not_collected_without_it(tmp_path):
    path = _write(tmp_path, "test_server.py", _DEFINED_ONLY_WITH_CUDA)
    check_marked_lines([path], (path,))


_PER_DEVICE = """
    import torch

    newer = any(torch.cuda.get_device_properties(i).major >= 8 for i in range(torch.cuda.device_count()))
    total = sum(torch.cuda.mem_get_info(i)[1] for i in range(torch.cuda.device_count()))
    first_four = [torch.cuda.get_device_properties(i) for i in range(4)]
    devices = [torch.device(f"cuda:{d:d}") for d in range(torch.cuda.device_count())]
    largest = max(torch.cuda.mem_get_info(i)[1] for i in range(torch.cuda.device_count()))
    first = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())][0]
    names = {i: torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())}
    for i in range(torch.cuda.device_count(), 0, -1):
        torch.cuda.set_device(i)
    for i in range(torch.cuda.device_count(), -1, -1):
        torch.cuda.set_device(i)
    """


def test_a_cuda_call_made_once_per_cuda_device_is_never_made_without_cuda(tmp_path):
    _write(tmp_path, "probe.py", _PER_DEVICE)
    found = worst_by_line(tmp_path)
    # any() and sum() answer on no device
    assert found[("probe.py", 3, "TP005")][0] == "info"
    assert found[("probe.py", 4, "TP111")][0] == "info"
    # the count still decides `newer`, which is False without CUDA
    assert found[("probe.py", 3, "TP004")][0] == "silent"
    # four devices asked for by number: it fails without CUDA
    assert found[("probe.py", 5, "TP005")][0] == "error"
    # an empty list kept for later (monai, judged correct), max() of nothing, [][0], a dict kept
    assert found[("probe.py", 6, "TP001")][0] == "error"
    assert found[("probe.py", 7, "TP111")][0] == "error"
    assert found[("probe.py", 8, "TP005")][0] == "error"
    assert found[("probe.py", 9, "TP005")][0] == "error"
    # counting down from the count to 0 runs nothing without CUDA; down to -1 it runs once, for 0
    assert found[("probe.py", 11, "TP004")][0] == "info"
    assert found[("probe.py", 13, "TP004")][0] == "error"


# Shapes from an independent review of the first version.
_BUILT_AT_IMPORT = """
    import pytest
    import torch

    SKIP = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
    PARAMS = [
        # built at import, skipped or not: collection fails without CUDA
        pytest.param(torch.ones(2).cuda(), marks=SKIP),  # kept
        pytest.param(torch.ones(2, device="cuda"), marks=SKIP),  # kept
        pytest.param(torch.cuda.get_device_name(0), marks=SKIP),  # kept
        pytest.param(lambda: torch.ones(2).cuda(), marks=SKIP),  # quiet
        pytest.param(("cuda", torch.device("cuda:0")), marks=SKIP),  # quiet
    ]
    """

_NOT_A_TEST_FILE = """
    import torch


    # a function the package calls, named test
    if torch.cuda.is_available():  # kept

        def test(model, loader):
            return [model(batch.cuda()) for batch in loader]


    def main(model, loader):
        return test(model, loader)


    def starts_elsewhere():
        # the range starts at the count: range(0, 4) without CUDA
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count(), 4)]  # kept
        for i in range(torch.cuda.device_count(), 4):
            torch.cuda.set_device(i)  # kept
        return names
    """


def test_a_parameter_built_at_import_or_a_test_the_package_calls_stays_reported(tmp_path):
    params = _write(tmp_path, "test_params.py", _BUILT_AT_IMPORT)
    train = _write(tmp_path, "train.py", _NOT_A_TEST_FILE)
    check_marked_lines([params, train], (params, train))


# Shapes from a second independent review.
_RUNS_AT_IMPORT = """
    import pytest
    import torch

    skip = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
    PARAMS = [
        # the device's index is asked at import
        pytest.param(torch.device("cuda", torch.cuda.current_device()), marks=skip),  # kept
    ]

    # the condition runs at import, whether the tests are collected or not
    if torch.cuda.get_device_capability() >= (8, 0):  # kept

        def test_bf16():
            assert torch.cuda.is_bf16_supported()


    # counts devices, which answers 0 without CUDA
    if torch.cuda.device_count() > 1:  # quiet

        def test_two_devices():
            assert torch.cuda.device_count() > 1


    class TestKernels:
        if torch.cuda.get_device_name(0):  # kept

            def test_named(self):
                assert torch.cuda.device_count()
    """


def test_what_runs_at_import_stays_reported_in_a_test_file(tmp_path):
    path = _write(tmp_path, "test_import_time.py", _RUNS_AT_IMPORT)
    check_marked_lines([path], (path,))
