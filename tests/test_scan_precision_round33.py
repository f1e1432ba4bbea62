"""CUDA guards in another file, and CUDA checks in tests.  Shapes from the fortieth judge's
verdicts (seed 200569): hippynn's Triton and CuPy kernel modules, imported only under
``if torch.cuda.is_available():``; torchreid's engines, whose base class stores
``self.use_gpu = torch.cuda.is_available() and use_gpu``; deepod's and classy-vision's unit tests
that pick CUDA or the CPU, each judged incorrect at error or silent by both judges."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_KERNELS_INIT = """
    import torch

    KERNELS = {}

    def _check_custom_kernels():
        try:
            from . import env_numba
        except ImportError:
            pass
        # these kernels only work where torch reaches the GPU; env_triton checks the capability
        if torch.cuda.is_available():
            try:
                import triton
                from . import env_triton
            except ImportError:
                pass
            from .env_cupy import envsum as cupy_envsum
            KERNELS["cupy"] = cupy_envsum
"""

_ENV_TRITON = """
    import torch
    import triton

    if torch.cuda.is_available():  # quiet
        major, _ = torch.cuda.get_device_capability()

    @triton.jit  # quiet
    def envsum_kernel(x_ptr):
        pass

    def envsum(x):
        return x.cuda()  # quiet
"""

_ENV_CUPY = """
    import cupy  # quiet

    def envsum(x):
        return x.cuda()  # quiet
"""

# The same module imported without a check in another file of the package: reached without CUDA.
_UNGUARDED_USER = """
    from .kernels import env_plain

    def run(x):
        return env_plain.envsum(x)
"""

_ENV_PLAIN = """
    def envsum(x):
        return x.cuda()  # kept
"""


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    _write(root, "__init__.py", "")
    for name, source in files.items():
        _write(root, name, source)
    return root


def test_a_module_imported_only_under_a_cuda_check_is_not_reached_without_cuda(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "kernels/__init__.py": _KERNELS_INIT,
        "kernels/env_triton.py": _ENV_TRITON,
        "kernels/env_cupy.py": _ENV_CUPY,
        "kernels/env_plain.py": _ENV_PLAIN,
        "user.py": _UNGUARDED_USER,
        # the package's own tests import it freely: they are not a user's path
        "tests/test_env.py": "from pkg.kernels import env_triton\n\ndef test_it():\n    env_triton.envsum(1)\n",
    })
    check_marked_lines([tmp_path], (root / "kernels/env_triton.py", root / "kernels/env_cupy.py",
                                    root / "kernels/env_plain.py"))
    found = worst_by_line(tmp_path)
    reason = found[("env_cupy.py", 4, "TP002")][1]
    assert "imported only under a CUDA check" in reason and "__init__.py:" in reason


# Imports that leave the module reachable without CUDA, each beside a guarded one.
_REACHED = {
    "else_branch.py": """
        import torch
        if torch.cuda.is_available():
            from .kernels import env_k
        else:
            from .kernels import env_k as fallback
    """,
    "negated.py": """
        import torch
        if not torch.cuda.is_available():
            from .kernels import env_k
    """,
    "or_check.py": """
        import torch
        if torch.cuda.is_available() or torch.backends.mps.is_available():
            from .kernels import env_k
    """,
    "named_in_all.py": """
        import torch
        __all__ = ["env_k"]
        if torch.cuda.is_available():
            from .kernels import env_k
    """,
    "used_outside.py": """
        import torch
        if torch.cuda.is_available():
            from .kernels import env_k

        def run(x):
            return env_k.envsum(x)
    """,
    "other_module_same_name.py": """
        import torch
        if torch.cuda.is_available():
            import env_k  # a top-level module of that name, not the package's
    """,
    "keyword.py": """
        import torch
        if torch.cuda.is_available():
            from .kernels import env_k

        def build(factory):
            return factory(env_k=None)
    """,
    "built_name.py": """
        import importlib
        import torch
        if torch.cuda.is_available():
            from .kernels import env_k

        def load(backend):
            return importlib.import_module(f".kernels.env_{backend}", "pkg")
    """,
    "registry.py": """
        import importlib
        import pkgutil
        import torch
        from . import kernels
        if torch.cuda.is_available():
            from .kernels import env_k
        for info in pkgutil.iter_modules(kernels.__path__):
            importlib.import_module(f"{kernels.__name__}.{info.name}")
    """,
    # library modules whose names look like tests
    "speed_test.py": """
        import torch
        from .kernels import env_k
        if torch.cuda.is_available():
            from .kernels import env_k as fast
    """,
    "testing/__init__.py": """
        import torch
        from ..kernels import env_k
        if torch.cuda.is_available():
            from ..kernels import env_k as fast
    """,
}

# Text files that name the module for something to import it.
_NAMED_ELSEWHERE = {
    "pyproject.toml": '[project.scripts]\npkg-bench = "pkg.kernels.env_k:main"\n',
    "conf/model.yaml": "_target_: pkg.kernels.env_k.envsum\n",
    "examples/demo.ipynb": '{"cells": [{"source": ["from pkg.kernels import env_k"]}]}\n',
}


def test_a_module_also_reached_another_way_stays_reported(tmp_path: Path) -> None:
    for name, importer in _REACHED.items():
        case = tmp_path / name.removesuffix(".py")
        root = _package(case, {
            "kernels/__init__.py": "",
            "kernels/env_k.py": "def envsum(x):\n    return x.cuda()  # kept\n\n\n__all__ = ['envsum']\n",
            name: importer,
        })
        kept_lines_stay(root / "kernels/env_k.py", root=case)


def test_a_module_named_in_a_config_an_entry_point_or_a_notebook_stays_reported(tmp_path: Path) -> None:
    for name, text in _NAMED_ELSEWHERE.items():
        case = tmp_path / name.replace("/", "_").replace(".", "_")
        root = _package(case, {
            "kernels/__init__.py": "import torch\nif torch.cuda.is_available():\n    from . import env_k\n",
            "kernels/env_k.py": "def envsum(x):\n    return x.cuda()  # kept\n\n\n__all__ = ['envsum']\n",
        })
        (case / name).parent.mkdir(parents=True, exist_ok=True)
        (case / name).write_text(text)
        kept_lines_stay(root / "kernels/env_k.py", root=case)


def test_a_module_run_as_a_script_or_scanned_alone_stays_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "kernels/__init__.py": "import torch\nif torch.cuda.is_available():\n    from . import env_s, env_t\n",
        "kernels/env_s.py": "import torch\n\nif __name__ == '__main__':\n    torch.ones(1).cuda()  # kept\n",
        "kernels/env_t.py": "def f(x):\n    return x.cuda()  # kept\n",
    })
    kept_lines_stay(root / "kernels/env_s.py", root=tmp_path)
    # one folder of the package cannot show who imports its modules
    kept_lines_stay(root / "kernels/env_t.py", root=root / "kernels")
    assert worst_by_line(tmp_path)[("env_t.py", 2, "TP002")][0] == "info"


_ENGINE = """
    import torch


    class Engine:
        def __init__(self, datamanager, use_gpu=True):
            self.datamanager = datamanager
            self.use_gpu = (torch.cuda.is_available() and use_gpu)
            if self.__dict__.get("_models") is None:
                self._models = {}
"""

_TRIPLET = """
    from .engine import Engine


    class ImageTripletEngine(Engine):
        def __init__(self, datamanager, model, use_gpu=True):
            super().__init__(datamanager, use_gpu)
            self.model = model

        def forward_backward(self, imgs, pids):
            if self.use_gpu:
                imgs = imgs.cuda()  # quiet
                pids = pids.cuda()  # quiet
            return self.model(imgs), pids
"""

# A task that turns the flag on through a setter, and asserts CUDA right after.
_TASK = """
    import torch


    class Task:
        def __init__(self):
            self.use_gpu = torch.cuda.is_available()

        def set_use_gpu(self, use_gpu: bool):
            self.use_gpu = use_gpu
            assert (not self.use_gpu or torch.cuda.is_available()), "CUDA required to train on GPUs"
            return self

        def prepare(self):
            if self.use_gpu:
                self.model = self.model.cuda()  # quiet
            self.buffer = torch.zeros(1, device="cuda")  # kept
"""


def test_a_flag_every_store_of_the_hierarchy_keeps_off_without_cuda(tmp_path: Path) -> None:
    root = _package(tmp_path, {"engine.py": _ENGINE, "triplet.py": _TRIPLET, "task.py": _TASK,
                               # another class's flag of the same name, stored from a parameter
                               "loss.py": "class Loss:\n    def __init__(self, use_gpu=True):\n"
                                          "        self.use_gpu = use_gpu\n"})
    check_marked_lines([tmp_path], (root / "triplet.py", root / "task.py"))
    reason = worst_by_line(tmp_path)[("triplet.py", 11, "TP002")][1]
    assert "engine.py:7" in reason and "if self.use_gpu:" in reason


# Each turns the flag on where CUDA is absent, so the engine's `.cuda()` stays reported.  (A class
# derived from Engine beside ImageTripletEngine does not: its instances never run that method.)
_FLAG_ON = {
    "subclass_store.py": """
        from .triplet import ImageTripletEngine

        class Forced(ImageTripletEngine):
            def __init__(self, datamanager):
                super().__init__(datamanager, None)
                self.use_gpu = True
    """,
    "outside_store.py": """
        from .triplet import ImageTripletEngine

        def build(dm, model):
            engine = ImageTripletEngine(dm, model)
            engine.use_gpu = True
            return engine
    """,
    "option.py": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--use_gpu", action="store_true")
    """,
    "set_by_name.py": """
        from .triplet import ImageTripletEngine

        class Configured(ImageTripletEngine):
            def __init__(self, datamanager, **options):
                super().__init__(datamanager, None)
                for key, value in options.items():
                    setattr(self, key, value)
    """,
    "dataclass_field.py": """
        from dataclasses import dataclass
        from .triplet import ImageTripletEngine

        @dataclass
        class Settings(ImageTripletEngine):
            use_gpu: bool = False
    """,
    "mixin.py": """
        from .triplet import ImageTripletEngine

        class DeviceMixin:
            def set_device(self, use_gpu):
                self.use_gpu = use_gpu

        class MyEngine(DeviceMixin, ImageTripletEngine):
            pass
    """,
    "alias.py": """
        from .triplet import ImageTripletEngine as Base

        class Forced(Base):
            def start(self):
                self.use_gpu = True
    """,
    "in_a_function.py": """
        from .triplet import ImageTripletEngine

        def make():
            class Forced(ImageTripletEngine):
                def start(self):
                    self.use_gpu = True
            return Forced
    """,
    "attached.py": """
        from .triplet import ImageTripletEngine

        def _enable_gpu(self):
            self.use_gpu = True

        ImageTripletEngine.enable_gpu = _enable_gpu
    """,
    "property.py": """
        from .triplet import ImageTripletEngine

        class Configured(ImageTripletEngine):
            @property
            def use_gpu(self):
                return self.cfg.gpu
    """,
    "set_from_config.py": """
        def build(engine, options):
            for key, value in options.items():
                setattr(engine, key, value)
            engine.__dict__.update(options)
            return engine
    """,
    "asserted_late.py": """
        import torch
        from .triplet import ImageTripletEngine

        class Late(ImageTripletEngine):
            def set_use_gpu(self, use_gpu):
                self.use_gpu = use_gpu
                self.start()
                assert not self.use_gpu or torch.cuda.is_available()
    """,
}


# `self` in a nested class or function is another object, with its own flag.
_NESTED_SELF = {
    "nested_class.py": """
        from .engine import Engine


        class ImageTripletEngine(Engine):
            class Prefetcher:
                def __init__(self, use_gpu):
                    self.use_gpu = use_gpu

                def fetch(self, imgs):
                    if self.use_gpu:
                        imgs = imgs.cuda()  # kept
                    return imgs
    """,
    "nested_function.py": """
        from .engine import Engine


        class ImageTripletEngine(Engine):
            def make_hook(self):
                def hook(self, imgs):  # self: the module the hook is registered on
                    if self.use_gpu:
                        imgs.cuda()  # kept
                return hook
    """,
}

def test_another_objects_flag_keeps_the_finding(tmp_path: Path) -> None:
    for name, source in _NESTED_SELF.items():
        case = tmp_path / name.removesuffix(".py")
        root = _package(case, {"engine.py": _ENGINE, name: source})
        kept_lines_stay(root / name, root=case)


def test_a_flag_turned_on_anywhere_keeps_the_finding(tmp_path: Path) -> None:
    kept = _TRIPLET.replace("# quiet", "# kept")
    for name, source in _FLAG_ON.items():
        case = tmp_path / name.removesuffix(".py")
        root = _package(case, {"engine.py": _ENGINE, "triplet.py": kept, name: source})
        kept_lines_stay(root / "triplet.py", root=case)


_DEEPOD_TEST = """
    import unittest
    import torch


    class TestUSAD(unittest.TestCase):
        def setUp(self):
            device = 'cuda' if torch.cuda.is_available() else 'cpu'  # quiet
            self.clf = USAD(epochs=1, device=device)

        def test_fit(self):
            for use_gpu in {False, torch.cuda.is_available()}:  # quiet
                run(use_gpu)
            if torch.cuda.is_available():  # quiet
                model = self.clf.cuda()  # quiet
            torch.ones(1).cuda()  # kept


    def train_with_batch(task):
        task.set_use_gpu(torch.cuda.is_available())  # quiet
"""


_LOAD_TEST_SCRIPT = """
    import torch


    def run_load(model, batches):
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
        return [model.to(device)(b.to(device)) for b in batches]
"""


_BENCH_TEST_SCRIPT = """
    import torch


    def test_throughput(model, batches):
        if torch.cuda.is_available():
            model = model.cuda()
        return [model(b) for b in batches]
"""


def test_a_cuda_check_in_a_test_file_is_a_test_that_runs_on_the_cpu(tmp_path: Path) -> None:
    path = _write(tmp_path / "tests", "test_usad.py", _DEEPOD_TEST)
    check_marked_lines([path], (path,))
    # a `*_test.py` file that imports a test framework and defines tests is a test file (absl's
    # naming; autonomous-learning-library's replay_buffer_test.py)
    path = _write(tmp_path / "all", "usad_test.py", _DEEPOD_TEST)
    check_marked_lines([path], (path,))
    # outside a test file the same check still silently picks the CPU: a library module, scripts
    # named like a test (one defines no test, one no framework: `def test_throughput(model)`), and
    # a project whose checkout lies in a folder named tests
    _write(tmp_path / "lib", "usad.py", _DEEPOD_TEST)
    assert worst_by_line(tmp_path / "lib")[("usad.py", 7, "TP003")][0] == "silent"
    _write(tmp_path / "lib", "load_test.py", _LOAD_TEST_SCRIPT)
    _write(tmp_path / "lib", "bench_test.py", _BENCH_TEST_SCRIPT)
    found = worst_by_line(tmp_path / "lib")
    assert found[("load_test.py", 5, "TP003")][0] == found[("bench_test.py", 5, "TP003")][0] == "silent"
    project = tmp_path / "tests" / "checkout" / "proj"
    _write(project, "usad.py", _DEEPOD_TEST)
    assert worst_by_line(project)[("usad.py", 7, "TP003")][0] == "silent"
