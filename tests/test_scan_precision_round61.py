"""Round 61 (docs/precision/round61.md): TP007 and the code behind a module that refuses to import
without CUDA.  Two judges called wrong every error/silent finding they drew behind such a refusal
(trainstream, whose ``__init__.py`` JIT-builds its extension and raises "needs a CUDA build of
PyTorch": seven Python rows each; kiui's ``gridencoder/grid.py``, which imports a ``backend`` that
asserts ``torch.cuda.is_available()``: one row each; warp-rnnt's tests, behind a ``setup.py`` that
refuses to build: four each).  Python runs a module's top level before its importer goes on, and a
package's ``__init__.py`` before any of its modules, so the code behind never runs without CUDA; the
refusal itself is the lock-in, reported once at error (TP007).  The findings behind are info; what may
run before the refusal, code imported only inside functions or blocks, scripts, imports that load
another file of the same name, and the findings a ROCm port meets past an ``is_available()`` check
keep their severity.  The shapes an independent review of the first version found lowered wrongly
are held here too."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_severity
from torchport.scan.scanner import scan

_SETUP = '''
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    setup(name="fastops", ext_modules=[CUDAExtension("fastops_cuda", ["csrc/ops.cu"])],
          cmdclass={"build_ext": BuildExtension})
'''


def _trainstream_like(root: Path) -> Path:
    """A package that builds its extension at import, from a function that opens with a CUDA check."""
    _write(root, "pyproject.toml", "[project]\nname = 'offload'\n")
    _write(root, "offload/__init__.py", '''
        """Offloading engine."""
        import sys

        import torch

        try:
            from . import _C
        except ImportError:
            from . import _build

            _C = _build.load()
            sys.modules[__name__ + "._C"] = _C

        from .wrapper import memory_report, wrap

        DEVICE_COUNT = torch.cuda.device_count()  # quiet
    ''')
    _write(root, "offload/_build.py", '''
        import os

        import torch

        ARCH = os.environ.get("TORCH_CUDA_ARCH_LIST", "")


        class BuildError(ImportError):
            pass


        def _arch_list():
            caps = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}  # kept
            return ";".join(f"{a}.{b}" for a, b in sorted(caps))


        def load():
            """Build the extension on first import."""
            if torch.version.cuda is None:
                raise BuildError("offload needs a CUDA build of PyTorch")
            if not torch.cuda.is_available() and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
                raise BuildError("offload needs an NVIDIA GPU (set TORCH_CUDA_ARCH_LIST to build without one)")
            arch = _arch_list()
            from torch.utils import cpp_extension
            return cpp_extension.load(name="offload_C", sources=["csrc/ops.cu"], extra_cuda_cflags=[arch])  # kept
    ''')
    _write(root, "offload/wrapper.py", '''
        import torch


        def memory_report():
            return {"allocated": torch.cuda.memory_allocated(), "peak": torch.cuda.max_memory_allocated()}  # quiet


        def wrap(model):
            stream = torch.cuda.Stream()  # quiet
            with torch.cuda.stream(stream):
                return model.cuda()  # quiet
    ''')
    _write(root, "offload/integrations/__init__.py", "")
    _write(root, "offload/integrations/hf.py", '''
        import torch


        def on_step_end(state):
            state.log({"gpu_mem": torch.cuda.memory_allocated() / 2**30})  # quiet
            torch.cuda.reset_peak_memory_stats()  # quiet
    ''')
    return root


def test_a_package_that_builds_its_extension_at_import_and_refuses_without_cuda_moots_what_lies_behind(tmp_path):
    root = _trainstream_like(tmp_path / "offload")
    package = root / "offload"
    script = _write(root, "train.py", """
        import torch

        model = torch.nn.Linear(4, 4).cuda()  # kept
    """)
    check_marked_lines([root], (package / "__init__.py", package / "_build.py", package / "wrapper.py",
                                package / "integrations" / "hf.py", script))
    found = worst_by_line(root)
    severity, reason = found[("wrapper.py", 5, "TP104")]
    assert severity == "info" and "in package offload, whose __init__.py refuses to import without CUDA" in reason
    assert "_build.py:19" in reason and "never reached" in reason, reason
    # the refusal is reported once, at error where it refuses (a ROCm build of the extension skips the
    # fallback), and the query it reads is not a second finding; `_build.py`, which the __init__.py
    # imports before it refuses, keeps its findings: its code may run first
    refusal = next(f for f in scan([root], ScanConfig(), jobs=1).findings if f.rule_id == "TP007")
    assert (refusal.line, finding_severity(refusal, "cpu"), finding_severity(refusal, "tpu"),
            finding_severity(refusal, "rocm")) == (19, "error", "error", None)
    assert "reported once, as TP007" in found[("_build.py", 19, "TP003")][1]


def test_a_module_that_imports_a_refusing_sibling_at_its_top_level_is_behind_it_from_that_import_on(tmp_path):
    root = tmp_path / "proj"
    _write(root, "setup.py", "from setuptools import setup\nsetup(name='mesh')\n")
    _write(root, "mesh/__init__.py", "")
    _write(root, "mesh/grid/__init__.py", "from .encoder import GridEncoder\n")
    backend = _write(root, "mesh/grid/backend.py", '''
        import os

        import torch

        flags = ["-O3"]
        assert torch.cuda.is_available(), "CUDA is not available"
        major, minor = torch.cuda.get_device_capability()  # quiet
        flags.append(f"-arch=sm_{major}{minor}")
    ''')
    encoder = _write(root, "mesh/grid/encoder.py", '''
        import torch
        DEVICE = torch.device("cuda")  # kept

        from .backend import flags
        from torch.cuda.amp import custom_fwd


        class GridEncoder(torch.nn.Module):
            @custom_fwd(cast_inputs=torch.float32)  # quiet
            def forward(self, x):
                return x.cuda()  # quiet
    ''')
    lazy = _write(root, "mesh/render.py", '''
        import torch


        def render(x):
            from .grid import GridEncoder
            return GridEncoder()(x.cuda())  # kept


        __all__ = ["render"]
    ''')
    check_marked_lines([root], (backend, encoder, lazy))
    reason = worst_by_line(root)[("encoder.py", 11, "TP002")][1]
    assert "past line 4, where this module refuses to import without CUDA" in reason and "backend.py:6" in reason


def test_what_runs_before_the_refusal_keeps_its_severity(tmp_path):
    root = tmp_path / "proj"
    _write(root, "pyproject.toml", "[project]\nname = 'kern'\n")
    init = _write(root, "kern/__init__.py", '''
        import torch

        from .env import setup_env, tuned

        setup_env()
        if not torch.cuda.is_available():
            raise ImportError("kern needs an NVIDIA GPU")
        from .ops import fused
    ''')
    env = _write(root, "kern/env.py", '''
        import torch

        torch.cuda.set_device(0)  # kept


        def setup_env():
            torch.backends.cudnn.benchmark = True
            return torch.cuda.get_device_name(0)  # kept


        def tuned(x):  # a module the __init__.py imports before it refuses is kept whole
            return x.to("cuda")  # kept
    ''')
    ops = _write(root, "kern/ops.py", '''
        import torch


        def fused(x):
            torch.cuda.synchronize()  # quiet
            return x.cuda()  # quiet
    ''')
    _write(root, "kern/tools/__init__.py", "")
    tool = _write(root, "kern/tools/bench.py", '''
        import torch

        if __name__ == "__main__":
            x = torch.randn(8).cuda()  # kept
    ''')
    check_marked_lines([root], (init, env, ops, tool))


def test_checks_that_do_not_refuse_at_import_keep_what_follows(tmp_path):
    root = tmp_path / "proj"
    _write(root, "pyproject.toml", "[project]\nname = 'soft'\n")
    _write(root, "soft/__init__.py", '''
        import os
        import warnings

        import torch

        if not torch.cuda.is_available():
            warnings.warn("soft is slow without CUDA")
        if os.environ.get("SOFT_STRICT"):
            if not torch.cuda.is_available():
                raise ImportError("strict mode needs CUDA")
        from . import _build
        _build.maybe_load()
        _build.load_later()
    ''')
    build = _write(root, "soft/_build.py", '''
        import os

        import torch


        def maybe_load():
            if not torch.cuda.is_available() and not os.path.exists("/opt/prebuilt"):
                raise ImportError("needs an NVIDIA GPU")
            return torch.cuda.current_device()  # kept


        def load_later():
            path = os.environ.get("EXT", "")
            if torch.version.cuda is None:
                raise ImportError("needs CUDA")
            return path
    ''')
    ops = _write(root, "soft/ops.py", '''
        import torch


        def fused(x):
            torch.cuda.synchronize()  # kept
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # quiet
            return x
    ''')
    _write(root, "soft/api.py", "from .ops import fused\n")  # something imports it (round 62)
    check_marked_lines([root], (build, ops))


def test_past_an_is_available_check_a_rocm_port_keeps_what_it_must_change(tmp_path):
    # a check of the build alone passes a CUDA wheel on a machine without a GPU: nothing behind it is lowered
    for check, severity in (("if not torch.cuda.is_available():", "error"), ("if torch.version.cuda is None:", "error"),
                            ("if torch.version.cuda is None or not torch.cuda.is_available():", "info")):
        root = tmp_path / severity
        _write(root, "setup.py", _SETUP)
        _write(root, "fastops/__init__.py", f'''
            import torch

            {check}
                raise ImportError("fastops needs CUDA")
            from .ops import fused
        ''')
        _write(root, "fastops/ops.py", '''
            import fastops_cuda


            def fused(x):
                return fastops_cuda.fused(x)
        ''')
        assert worst_by_line(root)[("ops.py", 1, "TP504")][0] == severity, check


def test_behind_a_setup_py_that_refuses_to_build_lie_the_modules_that_import_its_extension(tmp_path):
    for init, mark in (("from ._C import rnnt_loss\n", "quiet"), ("", "kept")):
        root = tmp_path / str(mark)
        setup = _write(root, "setup.py", '''
            import torch
            from setuptools import find_packages, setup
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension

            if not torch.cuda.is_available():
                raise Exception("CPU version is not implemented")

            setup(name="rnnt", packages=find_packages(),
                  ext_modules=[CUDAExtension("rnnt._C", ["core.cu", "binding.cpp"])],  # quiet
                  cmdclass={"build_ext": BuildExtension})
        ''')
        _write(root, "rnnt/__init__.py", init)
        test = _write(root, "rnnt/test.py", f'''
            import unittest

            import torch


            class TestLoss(unittest.TestCase):
                def test_forward(self):
                    logits = torch.randn(2, 8, 4, 5).cuda()  # {mark}
                    self.assertEqual(logits.shape[0], 2)
        ''')
        # a separate project in the same repository, and a script beside the setup.py
        client = _write(root, "client/pyproject.toml", "[project]\nname = 'rnnt-client'\n").parent
        api = _write(client, "rnnt_client/__init__.py", '''
            import torch

            DEVICE = torch.device("cuda")  # kept
        ''')
        script = _write(root, "bench.py", '''
            import torch

            x = torch.randn(8, device="cuda")  # kept
        ''')
        check_marked_lines([root], (setup, test, api, script))
        refusal = next(f for f in scan([root], ScanConfig(), jobs=1).findings if f.rule_id == "TP007")
        assert refusal.detail.startswith("refuses to build where CUDA is absent") and refusal.line == 5
        assert finding_severity(refusal, "rocm") is None  # is_available() is true on ROCm


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        _write(root, name, text)
    return root


def _severity(root: Path, name: str, line: int) -> str | None:
    return next(severity for (file, number, _), (severity, _) in worst_by_line(root).items()
                if file == name and number == line)


def test_an_import_is_followed_to_the_file_it_loads_not_to_a_module_of_the_same_name(tmp_path):
    # two examples with their own utils.py; `from kern import fused`, which the package's __init__.py
    # answers from another module where CUDA is absent
    root = _project(tmp_path / "repo", {
        "examples/fused/utils.py": 'import torch\n\nassert torch.cuda.is_available(), "needs a GPU"\n',
        "examples/fused/run.py": "import utils\n\nprint(utils.DEVICE)\n",
        "examples/mnist/utils.py": "def device():\n    return 'cpu'\n",
        "examples/mnist/train.py": "import torch\nimport utils\n\nmodel = torch.nn.Linear(4, 4).cuda()\n",
        "kern/__init__.py": ("import torch\n\nif torch.cuda.is_available():\n    from .fused import fused\n"
                             "else:\n    from .reference import fused\n"),
        "kern/fused.py": 'import torch\n\nassert torch.cuda.is_available(), "the fused kernel needs a GPU"\n',
        "kern/reference.py": "def fused(x):\n    return x\n",
        "app.py": "import torch\nfrom kern import fused\n\nmodel = torch.nn.Linear(4, 4).cuda()\n",
        "pyproject.toml": "[project]\nname = 'kern'\n",
    })
    assert _severity(root, "train.py", 4) == "error"
    assert _severity(root, "app.py", 4) == "error"


def test_scripts_and_a_package_at_the_scanned_root_are_not_behind_the_package(tmp_path):
    # a stray __init__.py at the root of a checkout: `python train.py` imports no package
    stray = _project(tmp_path / "stray", {
        "__init__.py": "from .adam import fused_adam\n",
        "adam.py": 'import torch\n\nif not torch.cuda.is_available():\n    raise ImportError("needs CUDA")\n',
        "train.py": ("import torch\n\n\ndef main():\n    return torch.nn.Linear(4, 4).cuda()\n"),
    })
    assert _severity(stray, "train.py", 5) == "error"
    root = _project(tmp_path / "repo", {
        "pyproject.toml": "[project]\nname = 'kern'\n",
        "train.py": ("import argparse\n\nimport torch\n\nparser = argparse.ArgumentParser()\n"
                     "args = parser.parse_args()\nmodel = torch.nn.Linear(4, 4).cuda()\n"),
        "kern/__init__.py": ('import torch\n\nif not torch.cuda.is_available():\n    raise ImportError("no GPU")\n'
                             "from .ops import fused\n"),
        "kern/ops.py": "def fused(x):\n    return x.cuda()\n",
        "kern/tools/__init__.py": "",
        "kern/tools/convert.py": ("#!/usr/bin/env python\nimport sys\n\nimport torch\n\n"
                                  'state = torch.load(sys.argv[1], map_location="cuda")\n'),
        "kern/bench.py": ("import torch\n\nfrom kern import fused\n\nx = torch.randn(8).cuda()\n\n"
                          'if __name__ == "__main__":\n    print(fused(x))\n'),
    })
    assert _severity(root, "train.py", 7) == "error"
    assert _severity(root, "convert.py", 6) == "error"
    assert _severity(root, "ops.py", 2) == "info"  # kern/ops.py, behind kern/__init__.py
    assert _severity(root, "bench.py", 5) == "info"  # a script that imports the package itself


def test_what_may_run_before_the_refusal_and_functions_that_never_refuse_keep_their_severity(tmp_path):
    root = _project(tmp_path / "repo", {
        "pyproject.toml": "[project]\nname = 'kern'\n",
        # a module whose class is instantiated at import, and one imported inside a function
        # that the __init__.py calls before it refuses
        "kern/__init__.py": ("import torch\n\nfrom .config import DEFAULT\n\n\ndef _configure():\n"
                             "    from . import env\n    env.pick()\n\n\n_configure()\n"
                             'if not torch.cuda.is_available():\n    raise ImportError("kern needs a GPU")\n'),
        "kern/config.py": ("import torch\n\n\nclass Config:\n    def __init__(self):\n"
                           '        self.device = torch.device("cuda", torch.cuda.current_device())\n\n\n'
                           "DEFAULT = Config()\n"),
        "kern/env.py": 'import torch\n\n\ndef pick():\n    return torch.device("cuda")\n',
        # refusing functions that do not refuse when called: decorated, async, rebound
        "soft/__init__.py": ("import os\n\nimport torch\n\nfrom ._load import load, warm_up\n\n\n"
                             "def _local():\n    if torch.version.cuda is None:\n        raise ImportError('x')\n\n\n"
                             "if os.environ.get('NO_EXT'):\n    def _local():\n        return None\n\n\n"
                             "_C = load()\n_pending = warm_up()\n_D = _local()\n"),
        "soft/_load.py": ("import functools\n\nimport torch\n\n\n@functools.wraps(print)\ndef load():\n"
                          "    if not torch.cuda.is_available():\n        raise ImportError('x')\n\n\n"
                          "async def warm_up():\n    if not torch.cuda.is_available():\n        raise ImportError('x')\n"),
        "soft/ops.py": "def fused(x):\n    return x.cuda()\n",
        "soft/api.py": "from .ops import fused\n",  # something imports it (round 62)
    })
    assert _severity(root, "config.py", 6) == "error"
    assert _severity(root, "env.py", 5) == "error"
    assert _severity(root, "ops.py", 2) == "error"  # soft/ops.py: nothing in soft refuses


def test_a_fallback_refuses_only_where_the_try_imports_the_compiled_extension(tmp_path):
    for layout, severity in (("reference", "error"), ("cpu-extension", "error"), ("direct", "info")):
        root = tmp_path / layout
        files = {"pyproject.toml": "[project]\nname = 'kern'\n",
                 "kern/model.py": "def block(x):\n    return x.cuda()\n",
                 "kern/_triton.py": ("import torch\n\n\ndef build():\n    if not torch.cuda.is_available():\n"
                                     "        raise ImportError('needs a GPU')\n")}
        if layout == "reference":  # the try imports a module the scan read: it cannot fail
            files["kern/_reference.py"] = "def attention(q):\n    return q\n"
            files["kern/__init__.py"] = ("try:\n    from ._reference import attention\nexcept ImportError:\n"
                                         "    from . import _triton\n    attention = _triton.build()\n"
                                         "from .model import block\n")
        elif layout == "cpu-extension":  # the project builds the extension for the CPU too
            files["setup.py"] = ("from torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
                                 "ext = CppExtension('kern._C', ['ops.cpp'])\n")
            files["kern/__init__.py"] = ("try:\n    from . import _C\nexcept ImportError:\n"
                                         "    from . import _triton\n    _C = _triton.build()\nfrom .model import block\n")
        else:  # a check in the fallback itself, where the project builds the extension for CUDA alone
            files["setup.py"] = ("from torch.utils.cpp_extension import CUDAExtension\n"
                                 "ext = CUDAExtension('kern._C', ['ops.cu'])\n")
            files["kern/__init__.py"] = ("import torch\n\ntry:\n    from . import _C\nexcept ImportError:\n"
                                         "    if not torch.cuda.is_available():\n        raise ImportError('no GPU')\n"
                                         "from .model import block\n")
        assert _severity(_project(root, files), "model.py", 2) == severity, layout


def test_a_relative_import_of_nothing_does_not_stop_the_pass(tmp_path):
    root = _project(tmp_path / "repo", {
        "pyproject.toml": "[project]\nname = 'ns-plugin'\n",
        "ns/plugin/__init__.py": "",
        "ns/plugin/hooks.py": ('import torch\n\nfrom .. import register\n\nregister()\n'
                               'assert torch.cuda.is_available(), "needs a GPU"\nDEVICE = torch.device("cuda")\n'),
    })
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.unfinished
    assert _severity(root, "hooks.py", 7) == "info"


def _refusals(root: Path) -> dict[str, dict[str, str | None]]:
    """file name -> TP007's severity per target."""
    return {Path(f.path).name: {t: finding_severity(f, t) for t in ("cpu", "tpu", "rocm")}
            for f in scan([root], ScanConfig(), jobs=1).findings if f.rule_id == "TP007"}


_REFUSING = 'import torch\n\nassert torch.cuda.is_available(), "the fused kernel needs a GPU"\n'


def test_a_refusal_that_every_import_guards_is_info_and_one_imported_plainly_is_an_error(tmp_path):
    layouts = {
        "dispatch": "import torch\n\nif torch.cuda.is_available():\n    from .fused import fused\n",
        "optional": "try:\n    from .fused import fused\nexcept ImportError:\n    fused = None\n",
        "lazy": "def run(x):\n    if x.is_cuda:\n        from .fused import fused\n        return fused(x)\n    return x\n",
        "plain": "from .fused import fused\n",
    }
    for name, init in layouts.items():
        root = _project(tmp_path / name, {"pyproject.toml": "[project]\nname = 'kern'\n",
                                          "kern/__init__.py": init, "kern/fused.py": _REFUSING})
        expected = "error" if name == "plain" else "info"
        assert _refusals(root)["fused.py"]["cpu"] == expected, name
    # a module nothing in the scan imports is an entry point a user imports
    entry = _project(tmp_path / "entry", {"pyproject.toml": "[project]\nname = 'kern'\n", "kern/fused.py": _REFUSING})
    assert _refusals(entry)["fused.py"]["cpu"] == "error"


def test_a_name_the_package_may_bind_elsewhere_or_an_import_cycle_keeps_the_importer(tmp_path):
    for layout, init in (("star", "from .dispatch import *\n"),
                         ("getattr", "def __getattr__(name):\n    from .reference import attention\n    return attention\n")):
        root = _project(tmp_path / layout, {
            "pyproject.toml": "[project]\nname = 'kern'\n", "kern/__init__.py": init,
            "kern/dispatch.py": ("import torch\n\nif torch.cuda.is_available():\n    from .attention import attention\n"
                                 "else:\n    from .reference import attention\n"),
            "kern/attention.py": _REFUSING, "kern/reference.py": "def attention(x):\n    return x\n",
            "app.py": "import torch\nfrom kern import attention\n\nmodel = torch.nn.Linear(4, 4).cuda()\n"})
        assert _severity(root, "app.py", 4) == "error", layout
    cycle = _project(tmp_path / "cycle", {
        "pyproject.toml": "[project]\nname = 'kern'\n", "kern/__init__.py": "",
        "kern/backend.py": "import torch\n\nfrom . import registry\n\nassert torch.cuda.is_available()\n",
        "kern/registry.py": "import torch\n\nfrom . import backend\n\ntorch.cuda.set_device(0)\n"})
    assert _severity(cycle, "registry.py", 5) == "error"  # `import kern.backend` runs registry.py first
    for layout, call in (("import_module", "importlib.import_module('kern.plugins.profiler')"),
                         ("exec_module", "importlib.util.spec_from_file_location('profiler', 'plugins/profiler.py')")):
        root = _project(tmp_path / layout, {
            "pyproject.toml": "[project]\nname = 'kern'\n",
            "kern/__init__.py": ("import torch\n\nfrom .registry import load_plugins\n\nload_plugins()\n"
                                 "if not torch.cuda.is_available():\n    raise ImportError('needs a GPU')\n"),
            "kern/registry.py": f"import importlib\n\n\ndef load_plugins():\n    return {call}\n",
            "kern/plugins/__init__.py": "", "kern/plugins/profiler.py": "import torch\n\ntorch.cuda.reset_peak_memory_stats()\n"})
        assert _severity(root, "profiler.py", 3) == "error", layout


def test_a_fallback_to_another_distribution_or_a_cmake_build_is_no_refusal(tmp_path):
    for layout, files in (
            ("third-party", {"kern/__init__.py": ("import torch\n\ntry:\n    from torch_scatter import scatter_sum\n"
                                                  "except ImportError:\n    if not torch.cuda.is_available():\n"
                                                  "        raise ImportError('needs torch-scatter or a GPU')\n"
                                                  "from .layers import aggregate\n"),
                             "setup.py": "from torch.utils.cpp_extension import CUDAExtension\n"}),
            ("cmake", {"kern/__init__.py": ("import torch\n\ntry:\n    from . import _C\nexcept ImportError:\n"
                                            "    if not torch.cuda.is_available():\n        raise ImportError('no GPU')\n"
                                            "from .layers import aggregate\n"),
                       "setup.py": ("from torch.utils.cpp_extension import CUDAExtension\n\n\n"
                                    "class CMakeExtension:\n    pass\n")})):
        root = _project(tmp_path / layout, {"pyproject.toml": "[project]\nname = 'kern'\n",
                                            "kern/layers.py": "import torch\n\n\ndef aggregate():\n    torch.cuda.synchronize()\n",
                                            **files})
        assert _severity(root, "layers.py", 5) == "error", layout


def test_refusals_behind_a_refusal_and_checks_that_refuse_rocm_too(tmp_path):
    root = _project(tmp_path / "repo", {
        "pyproject.toml": "[project]\nname = 'kern'\n",
        "kern/__init__.py": "import torch\n\nif not torch.cuda.is_available():\n    raise ImportError('no GPU')\n",
        "kern/attention.py": _REFUSING,
        "kern/norm.py": "import torch\n\nif torch.version.cuda is None:\n    raise ImportError('needs a CUDA build')\n"})
    found = _refusals(root)
    assert found["__init__.py"] == {"cpu": "error", "tpu": "error", "rocm": None}
    assert found["attention.py"]["cpu"] == "info"  # never reached: kern/__init__.py refuses first
    assert found["norm.py"]["rocm"] == "error"  # ... but on ROCm it is the refusal a user meets
    hip = _project(tmp_path / "hip", {
        "pyproject.toml": "[project]\nname = 'kern'\n",
        "kern/__init__.py": ("import torch\n\nif torch.version.hip is not None or not torch.cuda.is_available():\n"
                             "    raise ImportError('NVIDIA GPUs only')\n")})
    assert _refusals(hip)["__init__.py"]["rocm"] == "error"


def test_a_folder_of_scripts_with_a_stray_init_is_no_package(tmp_path):
    root = _project(tmp_path / "workspace", {
        "fused_adam/__init__.py": "from .ops import fused_adam\n",
        "fused_adam/ops.py": "import torch\n\nif not torch.cuda.is_available():\n    raise ImportError('needs CUDA')\n",
        "fused_adam/utils.py": "def to_device(model):\n    return model.cuda()\n",
        "fused_adam/train.py": ("import argparse\n\nimport torch\nimport utils\n\nparser = argparse.ArgumentParser()\n"
                                "args = parser.parse_args()\nmodel = utils.to_device(torch.nn.Linear(4, 4))\n")})
    assert _severity(root, "utils.py", 2) == "error"
