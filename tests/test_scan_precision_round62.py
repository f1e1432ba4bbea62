"""Round 62 (docs/precision/round62.md): findings in a module that nothing imports, in a package
whose ``__init__.py`` chooses what it exports, are info.  Judges called such findings unreachable
(torchkm's wheel ships ``cvkhuber.py`` and ``cvksqsvm.py`` beside the estimators it exports, with no
file that imports them; alphapose's wheel ships ``utils/env.py``).  A module something names (a
test, a string, a config, a Dockerfile, a CI script, a document, a wheel's METADATA, a pickle), a
package that finds its modules at run time (a registry that lists its folder, a name built before
the import, ``find_spec``, ``resolve_name``, ``exec`` of plugin files), a program (a ``__main__``
test, work at its top level, a server module, doctests), a package without a curated
``__init__.py`` and a project not scanned from its root (or its repository's) keep their findings;
each shape the two independent reviews found lowered wrongly is held here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

from torchport.scan import unimported_modules
from torchport.scan.config import ScanConfig
from torchport.scan.scanner import scan

_USED = '''
    import torch


    class SVM:
        def fit(self, x):
            return x.cuda()  # kept
'''

_UNUSED = '''
    import torch

    from .functions import kernel


    class cvkhuber:
        def fit(self, x):
            return kernel(x).cuda()  # {mark}
'''

_MODEL = '''
    import torch


    class Model:
        def forward(self, x):
            return x.cuda()  # kept
'''


def _package(root: Path, init: str = "from .estimators import SVM\n", unused: str = _UNUSED,
             mark: str = "quiet") -> Path:
    _write(root, "kmlib/__init__.py", init)
    _write(root, "kmlib/estimators.py", _USED)
    _write(root, "kmlib/functions.py", "def kernel(x):\n    return x\n")
    return _write(root, "kmlib/cvkhuber.py", unused.replace("{mark}", mark))


def test_a_module_nothing_imports_beside_a_curated_init_is_info(tmp_path):
    unused = _package(tmp_path)
    check_marked_lines([tmp_path], (tmp_path / "kmlib/estimators.py", unused))
    reason = worst_by_line(tmp_path)[("cvkhuber.py", 8, "TP002")][1]
    assert "no file below the scanned folders imports or names module kmlib.cvkhuber" in reason
    assert "imports it by its full name" in reason


def test_logging_set_up_at_the_top_level_is_no_program(tmp_path):
    unused = _package(tmp_path, unused='''
        import logging

        logger = logging.getLogger(__name__)
        logger.addHandler(logging.StreamHandler())
        logger.setLevel(logging.INFO)


        def fit(x):
            return x.cuda()  # quiet
    ''')
    check_marked_lines([tmp_path], (tmp_path / "kmlib/estimators.py", unused))


def test_a_distribution_listing_does_not_count_as_naming_the_module(tmp_path):
    _write(tmp_path, "kmlib-1.0.dist-info/RECORD", "kmlib/cvkhuber.py,sha256=abc,120\n")
    _write(tmp_path, "kmlib-1.0.dist-info/METADATA", "Name: kmlib\n")
    unused = _package(tmp_path)
    check_marked_lines([tmp_path], (tmp_path / "kmlib/estimators.py", unused))


def test_a_module_a_test_imports_keeps_its_findings(tmp_path):
    unused = _package(tmp_path, mark="kept")
    _write(tmp_path, "tests/test_huber.py", "from kmlib.cvkhuber import cvkhuber\n")
    kept_lines_stay(unused, root=tmp_path)


def test_a_file_that_names_the_module_keeps_it_whatever_its_kind(tmp_path):
    for number, (name, text) in enumerate((
            ("kmlib/registry.py", 'MODELS = {"huber": "kmlib.cvkhuber:cvkhuber"}\n'),
            ("pyproject.toml", '[project.scripts]\nhuber = "kmlib.cvkhuber:main"\n'),
            ("README.md", "Run `python -m kmlib.cvkhuber` to fit the Huber model.\n"),
            ("Dockerfile", 'CMD ["celery", "-A", "kmlib.cvkhuber", "worker"]\n'),
            ("Makefile", "serve:\n\tgunicorn -w 2 kmlib.cvkhuber:app\n"),
            ("Procfile", "web: gunicorn kmlib.cvkhuber:app\n"),
            ("scripts/train.slurm", "#!/bin/bash\npython -m kmlib.cvkhuber\n"),
            ("configs/train.gin", "import kmlib.cvkhuber\n"),
            ("kmlib/_ext.pyx", "from kmlib.cvkhuber import cvkhuber\n"),
            ("bin/kmfit", "#!/usr/bin/env python\nfrom kmlib.cvkhuber import main\nmain()\n"),
            ("kmlib-1.0.dist-info/METADATA", "Usage\n\n    from kmlib.cvkhuber import cvkhuber\n"),
            ("docs/usage.mdx", "`from kmlib.cvkhuber import cvkhuber`\n"),
            (".github/scripts/smoke.sh", "python -c 'from kmlib.cvkhuber import cvkhuber'\n"),
            ("kmlib/weights/old.pt", "PK\x03\x04 ckmlib.cvkhuber\ncvkhuber\nq\x00"),
            ("examples/fit.py", "from kmlib.cvkhuber import cvkhuber\n"))):
        root = tmp_path / str(number)
        unused = _package(root, mark="kept")
        _write(root, name, text)
        if name == "examples/fit.py":  # excluded from the scan, read all the same
            _write(root, "pyproject.toml", '[tool.torchport.scan]\nexclude = ["examples"]\n')
        kept_lines_stay(unused, root=root)
    unused = _package(tmp_path / "utf16", mark="kept")
    (tmp_path / "utf16" / "smoke.ps1").write_bytes("python -m kmlib.cvkhuber\n".encode("utf-16"))
    kept_lines_stay(unused, root=tmp_path / "utf16")


def test_a_package_without_a_chosen_export_keeps_its_findings(tmp_path):
    for number, init in enumerate(("", '"""Kernel machines."""\n', "from ._version import __version__\n",
                                   "from kmlibx import helper\n", "from .. import other\n")):
        root = tmp_path / str(number)
        unused = _package(root, init=init, mark="kept")
        kept_lines_stay(unused, root=root)


def test_a_program_keeps_its_findings(tmp_path):
    programs = (
        '''
        import torch


        def main():
            return torch.zeros(1).cuda()  # kept


        if __name__ == "__main__":
            main()
        ''',
        '''
        import argparse

        import torch

        args = argparse.ArgumentParser().parse_args()
        model = torch.nn.Linear(2, 2).cuda()  # kept
        ''',
        '''
        import torch

        for step in range(3):
            torch.zeros(1).cuda()  # kept
        ''',
        '''
        """Serve the model: uvicorn cvkhuber:app --port 8000"""
        import torch


        def predict(x):
            return x.cuda()  # kept
        ''',
        '''
        import torch
        from fastapi import FastAPI

        app = FastAPI()
        model = torch.nn.Linear(4, 1).cuda()  # kept
        ''',
        '''
        import torch

        from .state import app


        @app.post("/fit")
        def fit(x):
            return torch.zeros(1).cuda()  # kept
        ''',
        '''
        import torch


        def rbf(x):
            """
            >>> rbf(torch.ones(2)).shape
            torch.Size([2])
            """
            return x.cuda()  # kept
        ''',
    )
    for number, program in enumerate(programs):
        root = tmp_path / str(number)
        unused = _package(root, unused=program)
        kept_lines_stay(unused, root=root)


def test_a_test_module_beside_the_code_keeps_its_findings(tmp_path):
    _package(tmp_path, mark="kept")
    test = _write(tmp_path, "kmlib/estimators_test.py", '''
        import torch


        def test_fit():
            torch.zeros(1).cuda()  # kept
    ''')
    kept_lines_stay(test, root=tmp_path)


_FINDERS = (
    ("kmlib/models/__init__.py", '''
        import importlib
        import os

        from .base import Base

        for file in os.listdir(os.path.dirname(__file__)):
            if file.endswith(".py") and not file.startswith("_"):
                importlib.import_module(f"{__name__}.{file[:-3]}")
    '''),
    ("kmlib/models/__init__.py", '''
        import importlib
        import os

        from .base import Base


        def import_models(models_dir, namespace):
            for file in os.listdir(models_dir):
                name = file[: file.find(".py")] if file.endswith(".py") else file
                importlib.import_module(namespace + "." + name)


        import_models(os.path.dirname(__file__), "kmlib.models")
    '''),
    ("kmlib/models/__init__.py", '''
        import glob
        from os.path import basename, dirname, join

        from .base import Base

        __all__ = [basename(f)[:-3] for f in glob.glob(join(dirname(__file__), "*.py"))]
    '''),
    ("kmlib/build.py", '''
        import importlib


        def build(name):
            module_name = f"kmlib.models.{name}"
            return importlib.import_module(module_name).Model()
    '''),
    ("kmlib/build.py", '''
        import importlib


        def build(name):
            return importlib.import_module(
                "kmlib.models." + name
            ).Model()
    '''),
    ("kmlib/build.py", '''
        def build(name):
            return __import__("kmlib.models", fromlist=[name])
    '''),
    ("kmlib/build.py", '''
        from hydra.utils import get_class


        def build(name):
            return get_class(f"kmlib.models.{name}.Model")()
    '''),
    ("kmlib/models/__init__.py", '''
        import sys

        from ._lazy import LazyModule
        from .base import Base

        sys.modules[__name__] = LazyModule(__name__, globals()["__file__"])
    '''),
    ("kmlib/build.py", '''
        import importlib.util


        def build(name):
            spec = importlib.util.find_spec("kmlib.models." + name)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.Model()
    '''),
    ("kmlib/build.py", '''
        import pkgutil


        def build(name):
            return pkgutil.resolve_name(f"kmlib.models.{name}:Model")()
    '''),
    ("kmlib/build.py", '''
        from importlib import import_module as fetch


        def build(name):
            return fetch(f"kmlib.models.{name}").Model()
    '''),
    ("kmlib/build.py", '''
        import os

        from kmlib.paths import MODEL_DIR


        def load_all():
            for name in os.listdir(MODEL_DIR):
                path = os.path.join(MODEL_DIR, name)
                with open(path) as handle:
                    exec(compile(handle.read(), path, "exec"), {})
    '''),
    ("setup.py", '''
        from pathlib import Path

        from setuptools import setup

        commands = [p.stem for p in Path("kmlib/models").glob("*.py") if not p.stem.startswith("_")]
        setup(name="kmlib", entry_points={"console_scripts": [f"km-{c}=kmlib.models.{c}:main" for c in commands]})
    '''),
    ("kmlib/build.py", '''
        import importlib.util


        def load(path):
            spec = importlib.util.spec_from_file_location("plugin", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    '''),
)


def test_a_package_that_finds_its_modules_at_run_time_keeps_their_findings(tmp_path):
    for number, (name, finder) in enumerate(_FINDERS):
        root = tmp_path / str(number)
        _write(root, "kmlib/__init__.py", "from .estimators import SVM\nfrom .models import *\n")
        _write(root, "kmlib/estimators.py", _USED)
        _write(root, "kmlib/models/__init__.py", "from .base import Base\n")
        _write(root, "kmlib/models/base.py", "class Base:\n    pass\n")
        _write(root, name, finder)
        model = _write(root, "kmlib/models/huber.py", _MODEL)
        kept_lines_stay(model, root=root)


def test_the_same_package_without_its_finder_is_lowered(tmp_path):
    """The shape the finders above keep, lowered where nothing finds the module."""
    _write(tmp_path, "kmlib/__init__.py", "from .estimators import SVM\nfrom .models import Base\n")
    _write(tmp_path, "kmlib/estimators.py", _USED)
    _write(tmp_path, "kmlib/models/__init__.py", "from .base import Base\n")
    _write(tmp_path, "kmlib/models/base.py", "class Base:\n    pass\n")
    model = _write(tmp_path, "kmlib/models/huber.py", _MODEL.replace("# kept", "# quiet"))
    check_marked_lines([tmp_path], (tmp_path / "kmlib/estimators.py", model))


def test_a_package_below_its_repository_root_keeps_its_findings(tmp_path):
    """A package in `python/` with its own setup.py, its tests in the repository's `tests/` (DGL, TVM)."""
    (tmp_path / ".git").mkdir()
    _write(tmp_path, "python/setup.py", "from setuptools import setup\n\nsetup(name='kmlib')\n")
    unused = _package(tmp_path / "python", mark="kept")
    kept_lines_stay(unused, root=tmp_path / "python")


def test_a_project_scanned_below_its_root_keeps_its_findings(tmp_path):
    """`torchport scan src` leaves out the project's entry points, tests and documents."""
    _write(tmp_path, "pyproject.toml", '[project]\nname = "kmlib"\n')
    unused = _package(tmp_path / "src", mark="kept")
    kept_lines_stay(unused, root=tmp_path / "src")
    kept_lines_stay(unused, root=tmp_path / "src" / "kmlib")
    lowered = _package(tmp_path / "whole")
    found = scan([tmp_path / "whole" / "kmlib"], ScanConfig(), jobs=1).findings
    assert any(f.path.endswith("cvkhuber.py") and f.severity_cap != "info" for f in found), lowered


def test_a_module_outside_a_package_or_scanned_alone_keeps_its_findings(tmp_path):
    _write(tmp_path / "scripts", "run.py", _USED)
    script = _write(tmp_path / "scripts", "old_run.py", _UNUSED.replace("from .functions import kernel\n", "")
                    .replace("kernel(x)", "x").replace("{mark}", "kept"))
    kept_lines_stay(script)
    unused = _package(tmp_path / "alone", mark="kept")
    kept_lines_stay(unused, root=unused)


def test_a_tree_too_large_to_read_keeps_the_findings(tmp_path, monkeypatch):
    monkeypatch.setattr(unimported_modules, "_MAX_FILES", 8)
    unused = _package(tmp_path / "files", mark="kept")
    for number in range(10):
        _write(tmp_path / "files", f"labels/{number}.txt", "0 0.5 0.5 0.1 0.1\n")
    kept_lines_stay(unused, root=tmp_path / "files")
    monkeypatch.setattr(unimported_modules, "_MAX_FILES", 20_000)
    monkeypatch.setattr(unimported_modules, "_MAX_BYTES", 1_000)
    unused = _package(tmp_path / "bytes", mark="kept")
    for number in range(3):
        _write(tmp_path / "bytes", f"data/{number}.json", "[" + "0, " * 400 + "0]\n")
    kept_lines_stay(unused, root=tmp_path / "bytes")


def test_a_named_pipe_below_the_scanned_folder_is_not_read(tmp_path):
    _package(tmp_path)
    os.mkfifo(tmp_path / "train_log.txt")
    os.mkfifo(tmp_path / "kmlib" / "pipe_worker.py")
    run = subprocess.run([sys.executable, "-m", "torchport", "scan", "--show-info", "--fail-on", "never",
                          str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "no file below the scanned folders imports or names module kmlib.cvkhuber" in " ".join(run.stdout.split())
