"""Round 48 (docs/precision/round48.md): an import of a torch.cuda module, and a test skipped on every
machine.  From the verdicts of seed 831176: mmhuman3d's ``import torch.cuda.comm`` (the import
succeeds on a CPU build; the calls fail, and are reported where they are made), and inferno's
``test_multi_gpu`` under ``@unittest.skip("Needs machine with 4 GPUs")``.  Beside them, the calls
that still fail and the decorators that may let the test run."""
from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest
from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_IMPORTS = '''
    import torch
    import torch.cuda.comm  # quiet
    import torch.cuda.nccl  # quiet
    import torch.cuda.nvtx as nvtx  # kept


    def scatter(x):
        nvtx.range_push("scatter")  # kept
        parts = torch.cuda.comm.broadcast(x, [0, 1])  # kept
        nvtx.range_pop()  # kept
        return parts, torch.cuda.nccl.version()  # kept
'''


@pytest.mark.parametrize("module", ["torch.cuda.comm", "torch.cuda.nccl", "torch.cuda.nvtx", "torch.cuda.jiterator",
                                    "torch.cuda.graphs"])
def test_torch_cuda_modules_import_on_a_cpu_build(module: str) -> None:
    # what the lowering rests on, checked on the CPU build of torch this suite runs on
    import torch

    assert not torch.cuda.is_available()
    importlib.import_module(module)


def test_an_import_of_a_torch_cuda_module_is_info_and_its_calls_are_kept(tmp_path: Path) -> None:
    # an alias is kept: its uses may lie where the scanner does not look (a function it parses
    # only in part, another module that imports the alias)
    imports = _write(tmp_path, "imports.py", _IMPORTS)
    check_marked_lines([imports], (imports,))
    _, reason = worst_by_line(tmp_path)[("imports.py", 2, "TP110")]
    assert reason.startswith("the import succeeds in every build of torch"), reason


_SKIPPED = '''
    import unittest
    from unittest import skip

    import pytest
    import torch


    class TestGraph(unittest.TestCase):
        @unittest.skip("Needs machine with 4 GPUs")
        def test_multi_gpu(self):
            model = torch.nn.Linear(2, 2).cuda()  # quiet
            return model(torch.rand(2).cuda())  # quiet

        @skip("flaky")
        def test_imported_skip(self):
            torch.zeros(1).cuda()  # quiet

        def test_runs(self):
            torch.zeros(1).cuda()  # kept


    @unittest.skip("broken")
    class TestSkippedClass(unittest.TestCase):
        def test_inside(self):
            torch.zeros(1).cuda()  # quiet


    @pytest.mark.skip
    def test_bare_mark():
        torch.zeros(1).cuda()  # quiet


    @pytest.mark.skip(reason="needs 4 GPUs")
    def test_called_mark():
        torch.zeros(1).cuda()  # quiet


    @pytest.mark.skipif(True, reason="always")
    def test_skipif_true():
        torch.zeros(1).cuda()  # quiet


    @pytest.mark.skipif(False, reason="never")
    def test_skipif_false():
        torch.zeros(1).cuda()  # kept


    @pytest.mark.skipif(torch.__version__ < "2", reason="old torch")
    def test_skipif_other():
        torch.zeros(1).cuda()  # kept
'''


def test_a_test_skipped_on_every_machine_is_quiet(tmp_path: Path) -> None:
    skipped = _write(tmp_path, "test_skipped.py", _SKIPPED)
    check_marked_lines([skipped], (skipped,))
    _, reason = worst_by_line(tmp_path)[("test_skipped.py", 11, "TP002")]
    assert reason == "inside a test skipped on every machine", reason


def test_a_skipped_test_keeps_the_guards_of_its_fixes() -> None:
    from torchport.scan.config import ScanConfig
    from torchport.scan.fixer import fix_text

    source = textwrap.dedent('''
        import unittest

        import torch


        class TestSync(unittest.TestCase):
            @unittest.skip("flaky")
            def test_sync(self):
                torch.cuda.synchronize()
    ''')
    fixed, applied, _ = fix_text(source, "test_sync.py", ScanConfig(), "2.13")
    assert applied and "torch.accelerator.synchronize()" in fixed
    assert "is_available()" in fixed, fixed  # a skip for flakiness is no CUDA guard


def test_a_skip_of_the_files_own_is_kept(tmp_path: Path) -> None:
    own = _write(tmp_path, "test_own.py", '''
        import torch
        import unittest
        from unittest import skip


        def skip(reason):  # replaces unittest's
            def wrap(test):
                return test
            return wrap


        class unittest:  # replaces the module
            skip = skip


        @skip("runs anyway")
        def test_own_skip():
            torch.zeros(1).cuda()  # kept


        @unittest.skip("runs anyway")
        def test_own_module():
            torch.zeros(1).cuda()  # kept
    ''')
    kept_lines_stay(own)


# From the independent review of the first version: code that a skip everywhere does not keep from
# running.
_MAY_RUN = '''
    import os
    import unittest

    import pytest
    import torch


    @unittest.skip("needs 4 GPUs")
    class TestPlain:  # no TestCase: pytest ignores unittest's skip on it
        def test_runs_under_pytest(self):
            torch.zeros(1).cuda()  # kept


    @pytest.mark.skip
    def make_tensor():  # a helper, not a test: a mark does not keep a call from running
        return torch.zeros(1).cuda()  # kept


    @pytest.mark.skip(reason="run by test_all")
    def test_part():
        torch.zeros(1).cuda()  # kept


    def test_all():
        test_part()
        make_tensor()


    @pytest.mark.skip
    class TestSkippedClass:
        shared = torch.zeros(1).cuda()  # kept

        @staticmethod
        def make():
            return torch.zeros(1).cuda()  # kept

        def test_inside(self):
            torch.zeros(1).cuda()  # quiet


    @pytest.mark.skip
    def make_batch():  # called from another module only
        return torch.zeros(1).cuda()  # kept


    def test_uses_the_staticmethod():
        TestSkippedClass.make()


    def build_model():
        return torch.nn.Linear(2, 2).cuda()  # kept


    @unittest.skip("flaky")
    def test_build():
        build_model()


    def logged(test):
        def inner():
            return test()
        return inner


    @logged
    @pytest.mark.skip
    def test_logged():
        torch.zeros(1).cuda()  # kept
'''


def test_code_a_skip_everywhere_does_not_keep_from_running_is_kept(tmp_path: Path) -> None:
    may_run = _write(tmp_path, "test_may_run.py", _MAY_RUN)
    _write(tmp_path, "test_user.py", ("from test_may_run import build_model, make_batch\n\n\n"
                                        "def test_it():\n    build_model()\n    make_batch()\n"))
    check_marked_lines([tmp_path], (may_run,))


def test_a_skip_the_file_binds_in_a_block_is_not_the_librarys(tmp_path: Path) -> None:
    own = _write(tmp_path, "test_block.py", '''
        import os
        import unittest
        from unittest import skip

        import torch

        if os.environ.get("RUN_ALL"):
            def skip(reason):
                return lambda test: test

            class unittest:
                skip = skip


        @skip("runs with RUN_ALL")
        def test_a():
            torch.zeros(1).cuda()  # kept


        @unittest.skip("runs with RUN_ALL")
        def test_b():
            torch.zeros(1).cuda()  # kept
    ''')
    kept_lines_stay(own)


def test_a_flag_set_by_importing_nvtx_is_no_opt_in(tmp_path: Path) -> None:
    # `import torch.cuda.nvtx` succeeds on this CPU build, so `HAS_NVTX` is True here and the calls
    # under it raise (checked below); a flag the user sets (`use_nvtx`) is still an opt-in
    import torch.cuda.nvtx as nvtx

    with pytest.raises(RuntimeError, match="NVTX functions not installed"):
        nvtx.range_push("step")
    module = _write(tmp_path, "profiled.py", '''
        import torch

        try:
            import torch.cuda.nvtx as nvtx
            HAS_NVTX = True
        except ImportError:
            HAS_NVTX = False


        def step(model, x, use_nvtx=False):
            if HAS_NVTX:
                nvtx.range_push("step")  # kept
            if use_nvtx:
                nvtx.range_pop()  # quiet
            return model(x)
    ''')
    check_marked_lines([tmp_path], (module,))
