"""Round 57 (docs/precision/round57.md): shapes from the verdicts of seed 564103, where both judges
called the line off the path of a user without CUDA.

- openfold3's tests skip themselves through a project helper, ``@skip_unless_cuda_available()``,
  and build their inputs with ``.cuda()`` in ``tests/utils/data_utils.py``, a module only those tests
  call;
- byteps compiles its CUDA includes only under ``#if HAVE_CUDA`` and
  ``#if (MSHADOW_USE_CUDA && CUDA_VERSION >= 7050)``, and ``#include "cuda_util.h"`` is its own header;
- ``torch.backends.cuda.preferred_blas_library("cublas")`` raises nothing without CUDA.

Beside each, the shapes that keep the line."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_ANCHOR = '''
    import torch

    x = torch.zeros(1).cuda()  # kept
'''

# openfold3's helper, reduced: a mark that skips unless the accelerator is CUDA.
_COMPARE_UTILS = '''
    import pytest
    import torch


    def skip_unless_cuda_available():
        return pytest.mark.skipif(not torch.cuda.is_available(), reason="Requires CUDA")
'''

_DATA_UTILS = '''
    import torch


    def random_attention_inputs(batch, n):
        q = torch.rand(batch, n, 8).cuda()  # {mark}
        mask = torch.randint(0, 2, (batch, n)).cuda()  # {mark}
        return q, mask
'''

_TEST_KERNELS = '''
    import torch

    from tests.utils import compare_utils
    from tests.utils.data_utils import random_attention_inputs


    @compare_utils.skip_unless_cuda_available()
    class TestKernels:
        def test_attention(self):
            q, mask = random_attention_inputs(2, 4)
            assert q.to(device="cuda").shape == (2, 4, 8)  # quiet


    class TestPrimitives:
        @compare_utils.skip_unless_cuda_available()
        def test_lma(self):
            q, _ = random_attention_inputs(1, 3)
            assert q.is_cuda
{extra}
'''


def _project(root: Path, mark: str = "quiet", extra: str = "", helper_folder: str = "tests/utils") -> list[Path]:
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "__init__.py").write_text("")
    folder = root / helper_folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    if helper_folder == "tests/utils":
        _write(root, "tests/utils/compare_utils.py", _COMPARE_UTILS)
    else:  # the skip helper stays a test helper; only the data helper moves
        (root / "tests" / "utils").mkdir(exist_ok=True)
        (root / "tests" / "utils" / "__init__.py").write_text("")
        _write(root, "tests/utils/compare_utils.py", _COMPARE_UTILS)
    data = _write(root, f"{helper_folder}/data_utils.py", _DATA_UTILS.format(mark=mark))
    source = _TEST_KERNELS.format(extra=textwrap.indent(extra, "    "))
    if helper_folder != "tests/utils":
        source = source.replace("tests.utils.data_utils", helper_folder.replace("/", ".") + ".data_utils")
    kernels = _write(root, "tests/test_kernels.py", source)
    return [data, kernels, _write(root, "anchor.py", _ANCHOR)]


def test_a_project_skip_helper_named_for_cuda_skips_its_tests(tmp_path: Path) -> None:
    """``@skip_unless_cuda_available()``, the openfold3 spelling: the test bodies are off the path."""
    paths = _project(tmp_path)
    check_marked_lines([tmp_path], tuple(paths))
    line = next(n for n, text in enumerate(paths[1].read_text().splitlines(), 1) if 'device="cuda"' in text)
    _, reason = worst_by_line(tmp_path)[("test_kernels.py", line, "TP001")]
    assert reason == "inside a test skipped where CUDA is absent", reason


def test_a_helper_only_cuda_tests_call_is_off_the_path(tmp_path: Path) -> None:
    _project(tmp_path)
    found = worst_by_line(tmp_path)
    severity, reason = found[("data_utils.py", 5, "TP002")]
    assert severity == "info" and reason.startswith("a test helper that only tests running only where CUDA is "
                                                    "present use (") \
        and reason.endswith("tests/test_kernels.py)"), (severity, reason)


def test_the_project_runs_on_the_cpu_with_its_cuda_tests_skipped(tmp_path: Path) -> None:
    """pytest itself, on this CPU build of torch: both CUDA tests skip, none fails."""
    _project(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "2 skipped" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize("extra", [
    # a test that runs everywhere calls it
    "\n\ndef test_everywhere():\n    random_attention_inputs(1, 1)",
    # it is handed on, not called, outside the CUDA tests
    "\n\nBUILDERS = [random_attention_inputs]",
    # a string may name it for getattr
    "\n\ndef test_by_name():\n    import tests.utils.data_utils as d\n    getattr(d, 'random_attention_inputs')(1, 1)",
    # called when the module is imported: in a parameter default or a decorator of a CUDA test
    "\n\n@compare_utils.skip_unless_cuda_available()\ndef test_default(inputs=random_attention_inputs(1, 1)):\n"
    "    assert inputs",
    "\n\n@compare_utils.skip_unless_cuda_available()\n@pytest.mark.parametrize('inputs', [random_attention_inputs(1, 1)])\n"
    "def test_cases(inputs):\n    assert inputs",
    # imported under another name by a plain test: the rename's uses are not followed
    "\n\nfrom tests.utils.data_utils import random_attention_inputs as make_inputs\n\n\n"
    "def test_renamed():\n    make_inputs(1, 1)",
    # pytest calls a class's pytest_generate_tests while collecting, skip mark or not
    "\n\n@compare_utils.skip_unless_cuda_available()\nclass TestCases:\n    def pytest_generate_tests(self, metafunc):\n"
    "        metafunc.parametrize('case', [random_attention_inputs(1, 1)])\n\n    def test_case(self, case):\n"
    "        assert case",
    # the module's functions reached by a computed name
    "\n\ndef test_each():\n    import tests.utils.data_utils as d\n    for kind in ('attention',):\n"
    "        getattr(d, f'random_{kind}_inputs')(1, 1)",
    # reached as an attribute of its module
    "\n\ndef test_attribute():\n    from tests.utils import data_utils\n    data_utils.random_attention_inputs(1, 1)",
], ids=["plain-test", "handed-on", "by-name", "default", "parametrize", "renamed", "generate-tests", "computed-name",
        "attribute"])
def test_a_helper_used_outside_cuda_tests_keeps_its_lines(tmp_path: Path, extra: str) -> None:
    data, *_ = _project(tmp_path, mark="kept", extra=extra)
    kept_lines_stay(data, root=tmp_path)


def test_a_helper_a_package_re_exports_under_another_name_keeps_its_lines(tmp_path: Path) -> None:
    data, *_ = _project(tmp_path, mark="kept", extra="\n\nfrom tests.utils import make_inputs\n\n\n"
                        "def test_reexported():\n    make_inputs(1, 1)")
    (tmp_path / "tests" / "utils" / "__init__.py").write_text(
        "from .data_utils import random_attention_inputs as make_inputs\n")
    kept_lines_stay(data, root=tmp_path)


def test_a_conftest_hook_named_like_a_method_of_a_cuda_test_keeps_its_lines(tmp_path: Path) -> None:
    """A ``pytest_generate_tests`` hook in ``conftest.py`` runs at collection: a method of the same
    name in a skipped class is no call of it."""
    _project(tmp_path)
    conftest = _write(tmp_path, "tests/conftest.py", '''
        import torch


        def pytest_generate_tests(metafunc):
            if "case" in metafunc.fixturenames:
                metafunc.parametrize("case", [torch.zeros(1).cuda()])  # kept
    ''')
    _write(tmp_path, "tests/test_cases.py", '''
        from tests.utils import compare_utils


        @compare_utils.skip_unless_cuda_available()
        class TestCases:
            def pytest_generate_tests(self, metafunc):
                pass

            def test_nothing(self):
                pass
    ''')
    kept_lines_stay(conftest, root=tmp_path)


def test_a_helper_outside_the_test_folders_keeps_its_lines(tmp_path: Path) -> None:
    """A library module that only the CUDA tests call is still the library's code."""
    data, *_ = _project(tmp_path, mark="kept", helper_folder="pkg")
    kept_lines_stay(data, root=tmp_path)


def test_a_helper_its_own_module_calls_keeps_its_lines(tmp_path: Path) -> None:
    data, *_ = _project(tmp_path, mark="kept")
    data.write_text(data.read_text() + "\n\nDEFAULT = random_attention_inputs(1, 1)\n")
    kept_lines_stay(data, root=tmp_path)


def test_a_skip_helper_not_named_for_cuda_keeps_the_test(tmp_path: Path) -> None:
    test = _write(tmp_path, "tests/test_any.py", '''
        import torch
        from tests.utils import marks


        @marks.skip_unless_available()
        def test_any():
            assert torch.zeros(1).to(device="cuda").is_cuda  # kept
    ''')
    kept_lines_stay(test, root=tmp_path)


# byteps's C++ sources, reduced: the guards of ready_event.h, adapter.cc and half.h.
_BYTEPS = {
    "ready_event.h": "#pragma once\n#if HAVE_CUDA\n#include \"cuda_runtime.h\"  // quiet\n#endif\n",
    "adapter.cc": "#if HAVE_CUDA\n#include \"cuda.h\"  // quiet\n#endif\n#include \"cuda_util.h\"\n",
    "cuda_util.h": "#pragma once\nvoid Sync();\n",
    "half.h": "#if (MSHADOW_USE_CUDA && CUDA_VERSION >= 7050)\n#include <cuda_fp16.h>  // quiet\n#endif\n",
    "defined_and.h": "#if defined(HAVE_CUDA) && (TORCH_VERSION >= 1005000000)\n#include <c10/cuda/CUDAStream.h>  // quiet\n"
                     "#endif\n",
    # kept: an alternative, a negation, a version test alone, an option the file defines
    "either.h": "#if (HAVE_CUDA && CUDA_VERSION >= 7050) || FORCE_FP16\n#include <cuda_fp16.h>  // kept\n#endif\n",
    "unbracketed_either.h": "#if HAVE_CUDA && CUDA_VERSION >= 7050 || FORCE_FP16\n#include <cuda_fp16.h>  // kept\n"
                            "#endif\n",
    "negated.h": "#if HAVE_CUDA && !defined(CPU_ONLY_BUILD)\n#include <cuda_fp16.h>  // kept\n#endif\n",
    "version.h": "#if CUDA_VERSION >= 7050\n#include <cuda_fp16.h>  // kept\n#endif\n",
    "defined_here.h": "#define HAVE_CUDA 1\n#if HAVE_CUDA && CUDA_VERSION >= 7050\n#include <cuda_fp16.h>  // kept\n#endif\n",
    "common.h": "#include <cuda_runtime.h>  // kept\n#include <nccl.h>\n",
    # a quoted header that no file beside it provides is the toolkit's
    "missing_local.cc": "#include \"cuda_helpers.h\"  // kept\n",
    # a file beside it that the scan does not read (.inl) would hide its CUDA includes
    "inline_header.cc": "#include \"cuda_helpers.inl\"  // kept\n",
    "cuda_helpers.inl": "#include <cuda_runtime.h>\n",
    # a condition continued on the next line, or a choice, may hold without the option
    "continued.h": "#if defined(MSHADOW_USE_CUDA) && CUDA_VERSION >= 7050 \\\n    || defined(HALF_CUDA_LAYOUT)\n"
                   "#include <cuda_fp16.h>  // kept\n#endif\n",
    "choice.h": "#if USE_CUDA && (FORCE ? 1 : 0)\n#include <cuda_fp16.h>  // kept\n#endif\n",
    # brackets search the include path, not the file's folder
    "bracketed.cc": "#include <cuda_util.h>  // kept\n",
}


def _marks_of(root: Path) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    quiet: dict[str, set[int]] = {}
    kept: dict[str, set[int]] = {}
    for name in _BYTEPS:
        for number, line in enumerate((root / name).read_text().splitlines(), 1):
            for mark, table in (("// quiet", quiet), ("// kept", kept)):
                if line.endswith(mark):
                    table.setdefault(name, set()).add(number)
    return quiet, kept


def test_includes_compiled_only_in_a_cuda_build_are_info(tmp_path: Path) -> None:
    for name, source in _BYTEPS.items():
        (tmp_path / name).write_text(source)
    found = worst_by_line(tmp_path)
    quiet, kept = _marks_of(tmp_path)
    for name, lines in quiet.items():
        for line in lines:
            assert found[(name, line, "TP502")][0] == "info", (name, found.get((name, line, "TP502")))
    for name, lines in kept.items():
        for line in lines:
            assert found[(name, line, "TP502")][0] == "error", (name, found.get((name, line, "TP502")))
    assert ("adapter.cc", 4, "TP502") not in found  # the project's own cuda_util.h
    assert ("cuda_util.h", 1, "TP502") not in found


# torch.backends.cuda settings: what each line does on this CPU build decides its mark.
_SETTINGS = '''
    import torch

    torch.backends.cuda.preferred_blas_library("cublas")  # quiet
    torch.backends.cuda.preferred_blas_library()  # quiet
    torch.backends.cuda.preferred_linalg_library("default")  # quiet
    torch.backends.cuda.preferred_rocm_fa_library("aotriton")  # quiet
    if torch.backends.cuda.is_built():  # quiet
        print("built with CUDA")
    torch.backends.cuda.preferred_blas_library("cublaslt")  # kept
    torch.backends.cuda.preferred_blas_library("cublas", "cublaslt")  # kept
    torch.backends.cuda.preferred_blas_library("cuBLAS")  # kept
    torch.backends.cuda.preferred_blas_library("cublas"); torch.backends.cuda.cufft_plan_cache.clear()  # kept
    torch.backends.cuda.preferred_linalg_library(backend="cusolver")  # kept
    torch.backends.cuda.cufft_plan_cache.clear()  # kept
    x = torch.zeros(1).cuda()  # kept
'''


def test_cuda_library_settings_that_raise_nothing_are_info(tmp_path: Path) -> None:
    check_marked_lines([tmp_path], (_write(tmp_path, "settings.py", _SETTINGS),))


def test_the_settings_marks_match_this_cpu_build(tmp_path: Path) -> None:
    """Each marked line run alone on the CPU build of torch: the quiet ones raise nothing, each kept
    one raises (the marks are measurements, not guesses)."""
    script = _write(tmp_path, "settings.py", _SETTINGS)
    lines = script.read_text().splitlines()
    probe = ["import torch", "results = []"]
    for line in lines:
        if line.endswith(("# quiet", "# kept")) and not line.startswith(("if ", " ")):
            statement = line.rsplit("  #", 1)[0]
            probe += ["try:", f"    {statement}", "    results.append('ok')", "except Exception:",
                      "    results.append('raised')"]
    probe.append("print(results)")
    done = subprocess.run([sys.executable, "-c", "\n".join(probe)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    import torch
    if torch.cuda.is_available():
        pytest.skip("measures the CPU build's behaviour")
    assert done.stdout.strip() == str(["ok"] * 4 + ["raised"] * 7), done.stdout


def test_a_setting_beside_another_cuda_name_in_its_statement_keeps_its_finding(tmp_path: Path) -> None:
    """The statement's second CUDA name is folded into the first finding: lowering it would hide the
    ``cufft_plan_cache`` read, which raises on the CPU build."""
    script = _write(tmp_path, "report_env.py", '''
        import torch

        print(torch.backends.cuda.preferred_blas_library(),  # kept
              torch.backends.cuda.cufft_plan_cache.size)
        if torch.backends.cuda.is_built() or torch.backends.cuda.cufft_plan_cache.size:  # kept
            pass
    ''')
    kept_lines_stay(script)
