"""Round 54 (docs/precision/round54.md): vendored code that imports its own project by a name the
installed package lacks.  From the verdicts of seed 446061: deep-image-matching copies DeDoDe into
``deep_image_matching/thirdparty/DeDoDe/`` (its package at ``.../DeDoDe/DeDoDe/``) with its training
scripts, which start ``from DeDoDe.utils import *``; installed, no ``DeDoDe`` is importable, so they
fail at that line, before their ``.cuda()`` calls.  Beside it, what makes the name importable."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_TRAINING = '''
    import torch

    from DeDoDe.utils import get_gt_warp


    def train(model, batch):
        model.cuda()  # {mark}
        return get_gt_warp(batch["depth"].cuda())  # {mark}
'''


def _vendored(root: Path, *, mark: str = "quiet") -> dict[str, Path]:
    """A host package with DeDoDe copied into ``host/thirdparty/DeDoDe``."""
    home = root / "host" / "thirdparty" / "DeDoDe"
    for folder in (root / "host", root / "host" / "thirdparty", home / "DeDoDe"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (home / "setup.py").write_text("from setuptools import setup\n\nsetup(name='dedode', packages=['DeDoDe'])\n")
    _write(home / "DeDoDe", "utils.py", '''
    import torch


    def get_gt_warp(depth):
        return depth.double()
    ''')
    return {
        "training": _write(home / "experiments", "train_detector.py", _TRAINING.format(mark=mark)),
        "extractor": _write(root / "host" / "extractors", "dedode_extractor.py", '''
    import torch

    from ..thirdparty.DeDoDe.DeDoDe.utils import get_gt_warp


    def extract(image):
        return get_gt_warp(image.cuda())  # kept
    '''),
    }


def test_vendored_training_code_importing_its_project_by_name_is_info(tmp_path: Path) -> None:
    written = _vendored(tmp_path)
    demo = _write(tmp_path / "host" / "thirdparty" / "DeDoDe", "demo.py", '''
    import torch

    from DeDoDe.utils import get_gt_warp

    print(get_gt_warp(torch.ones(2).cuda()))  # kept
    ''')
    guarded = _write(tmp_path / "host" / "thirdparty" / "DeDoDe" / "experiments", "optional.py", '''
    import torch

    try:
        from DeDoDe.utils import get_gt_warp
    except ImportError:
        get_gt_warp = None

    x = torch.ones(2).cuda()  # kept
    ''')
    before = _write(tmp_path / "host" / "thirdparty" / "DeDoDe" / "experiments", "early.py", '''
    import torch

    DEVICE = torch.zeros(1).cuda().device  # kept

    from DeDoDe.utils import get_gt_warp  # noqa: E402
    ''')
    check_marked_lines([tmp_path], (written["training"], written["extractor"], demo, guarded, before))
    _, reason = worst_by_line(tmp_path)[("train_detector.py", 7, "TP002")]
    assert reason == ("past `from DeDoDe.utils import get_gt_warp` (line 3): the scanned files hold `DeDoDe` only "
                      "inside a package (here at host/thirdparty/DeDoDe/DeDoDe), so nothing that imports the package "
                      "makes `DeDoDe` importable: this module fails at that import, before any CUDA line, unless it is "
                      "run as its own project from host/thirdparty/DeDoDe or DeDoDe is installed on its own"), reason


def test_the_vendored_training_script_really_fails_at_its_import(tmp_path: Path) -> None:
    """Imported through the host package, or run as a script: ModuleNotFoundError for DeDoDe, before
    any CUDA call (this CPU build would raise AssertionError there)."""
    _vendored(tmp_path)
    for command in (["-c", "import host.thirdparty.DeDoDe.experiments.train_detector"],
                    ["host/thirdparty/DeDoDe/experiments/train_detector.py"]):
        run = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert run.returncode != 0
        assert "ModuleNotFoundError: No module named 'DeDoDe'" in run.stderr, run.stderr


_HERE = 'os.path.join(os.path.dirname(os.path.abspath(__file__)), "thirdparty", "DeDoDe")'
# What makes `DeDoDe` importable after all, each written into the host package (file, text); the
# independent review of the round's first version ran each and reached the CUDA line.
_MAKES_IMPORTABLE = {
    "slice": ("__init__.py", f"import os\nimport sys\n\nsys.path[0:0] = [{_HERE}]\n"),
    "rebound": ("__init__.py", f"import os\nimport sys\n\nsys.path = [{_HERE}] + sys.path\n"),
    "from_sys": ("__init__.py", f"import os\nfrom sys import path\n\npath.insert(0, {_HERE})\n"),
    "extended": ("__init__.py", f"import os\nimport sys\n\nsys.path.extend([{_HERE}])\n"),
    "modules_alias": ("__init__.py", "import sys\n\nfrom .thirdparty.DeDoDe import DeDoDe as _d\n\n"
                                     "sys.modules.setdefault(\"DeDoDe\", _d)\n"),
    "modules_computed": ("__init__.py", "import sys\n\nfrom .thirdparty.DeDoDe import DeDoDe as _d\n\n"
                                        "sys.modules[_d.__name__.rsplit('.', 1)[-1]] = _d\n"),
    "launcher_env": ("launch.py", "import os\nimport subprocess\n\n"
                                  "subprocess.run(['python', 'train.py'], env=dict(os.environ, PYTHONPATH='x'))\n"),
    "modules_update": ("__init__.py", "import sys\n\nfrom .thirdparty.DeDoDe import DeDoDe as _d\n\n"
                                      "sys.modules.update({'DeDoDe': _d})\n"),
    "site_unreadable": ("__init__.py", "import site\n\nfrom host.config import vendored\n\n"
                                       "site.addsitedir(vendored())\n"),
    "reassigned_in_a_branch": ("__init__.py", "import os\nimport sys\n\nVENDOR = os.path.dirname(os.path.abspath(__file__))\n"
                               "if os.path.isdir(os.path.join(VENDOR, 'thirdparty')):\n"
                               "    VENDOR = os.path.join(VENDOR, 'thirdparty', 'DeDoDe')\nsys.path.insert(0, VENDOR)\n"),
    "a_local_of_the_same_name": ("__init__.py", "import os\nimport sys\n\npath = os.path.dirname(os.path.abspath(__file__))\n\n\n"
                                 "def _add_vendored(name):\n"
                                 "    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'thirdparty', name)\n"
                                 "    sys.path.insert(0, path)\n\n\n_add_vendored('DeDoDe')\n"),
    "chdir_then_relative": ("__init__.py", f"import os\nimport sys\n\nos.chdir({_HERE})\nsys.path.insert(0, '.')\n"),
    "run_from_its_folder": ("cli.py", f"import os\nimport subprocess\nimport sys\n\nVENDOR = {_HERE}\n\n\n"
                                      "def train():\n    subprocess.run([sys.executable, '-m', 'experiments.train_detector'], "
                                      "cwd=VENDOR, check=True)\n"),
    "meta_path_finder": ("__init__.py", "import sys\n\n\nclass _Finder:\n    @classmethod\n"
                                        "    def find_spec(cls, name, path=None, target=None):\n        return None\n\n\n"
                                        "sys.meta_path.append(_Finder)\n"),
    "case_insensitive": ("__init__.py", "import os\nimport sys\n\n"
                                        "sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'thirdparty', 'dedode'))\n"),
    "run_from_its_folder_without_sys": ("cli.py", f"import os\nimport shutil\nimport subprocess\n\n\n"
                                                  "def train():\n    subprocess.run([shutil.which('python'), '-m', "
                                                  f"'experiments.train_detector'], cwd={_HERE})\n"),
    "path_aliased": ("__init__.py", f"import os\nimport sys\n\n_path = sys.path\n_path.insert(0, {_HERE})\n"),
    "modules_aliased": ("__init__.py", "import importlib\nimport sys\n\n_mods = sys.modules\n"
                                       "_mods['DeDoDe'] = importlib.import_module('.thirdparty.DeDoDe.DeDoDe', __name__)\n"),
    "site_aliased": ("__init__.py", f"import os\nfrom site import addsitedir as _add\n\n_add({_HERE})\n"),
    "loader": ("__init__.py", "import os\nfrom importlib.machinery import SourceFileLoader\n\n"
                              "SourceFileLoader('DeDoDe', os.path.join(os.path.dirname(__file__), 'thirdparty', 'DeDoDe', "
                              "'DeDoDe', '__init__.py')).load_module()\n"),
    "chdir_unreadable_then_relative": ("__init__.py", "import os\nimport sys\n\nos.chdir(os.environ['VENDOR'])\n"
                                                      "sys.path.insert(0, '.')\n"),
    "run_from_a_folder_built_in_a_function": ("cli.py", "import os\nimport subprocess\nimport sys\n\n\ndef train():\n"
                                              "    here = os.path.dirname(os.path.abspath(__file__))\n"
                                              "    subprocess.run([sys.executable, '-m', 'experiments.train_detector'], "
                                              "cwd=os.path.join(here, 'thirdparty', 'DeDoDe'))\n"),
    "run_from_parents": ("cli.py", "import subprocess\nimport sys\nfrom pathlib import Path\n\n"
                                   "VENDOR = Path(__file__).resolve().parents[0] / 'thirdparty' / 'DeDoDe'\n\n\n"
                                   "def train():\n    subprocess.run([sys.executable, '-m', 'experiments.train_detector'], "
                                   "cwd=VENDOR)\n"),
    "chdir_into_an_argument_then_relative": ("__init__.py", "import os\nimport sys\n\n\ndef enter(folder):\n"
                                                            "    os.chdir(folder)\n    sys.path.insert(0, '.')\n"),
    "run_from_a_global_the_reader_cannot_follow": ("cli.py", "import subprocess\nimport sys\n\nfrom host.config import vendor\n\n"
                                                             "VENDOR = vendor()\n\n\ndef train():\n"
                                                             "    subprocess.run([sys.executable, '-m', 'x'], cwd=VENDOR)\n"),
    "run_from_the_environment": ("cli.py", "import os\nimport subprocess\nimport sys\n\n\ndef train(name):\n"
                                           "    subprocess.run([sys.executable, '-m', name], cwd=os.environ['VENDOR'])\n"),
    "pytest_prepend": ("conftest.py", "def pytest_configure(config):\n    pass\n\n\n"
                                      "def fixture(monkeypatch):\n    monkeypatch.syspath_prepend('thirdparty')\n"),
}


@pytest.mark.parametrize("case", sorted(_MAKES_IMPORTABLE))
def test_a_path_or_module_change_the_reader_cannot_rule_out_keeps_the_findings(tmp_path: Path, case: str) -> None:
    written = _vendored(tmp_path, mark="kept")
    name, text = _MAKES_IMPORTABLE[case]
    (tmp_path / "host" / name).write_text(text)
    kept_lines_stay(written["training"], root=tmp_path)


@pytest.mark.parametrize("case", ["conftest_in_the_project", "tests_package_in_the_project", "pytest_ini",
                                  "shell_script", "pth_file", "requirements_folder", "conda_environment", "git_url",
                                  "ci_workflow", "notebook", "readme", "doctest_modules", "makefile_enters",
                                  "editable_install", "ci_working_directory", "makefile_variable", "pushd"])
def test_pytest_a_setting_or_a_declaration_keeps_the_findings(tmp_path: Path, case: str) -> None:
    written = _vendored(tmp_path, mark="kept")
    home = tmp_path / "host" / "thirdparty" / "DeDoDe"
    if case == "conftest_in_the_project":  # pytest puts its folder on sys.path
        (home / "conftest.py").write_text("")
    elif case == "tests_package_in_the_project":  # tests/__init__.py: pytest inserts DeDoDe's folder
        (home / "tests").mkdir()
        (home / "tests" / "__init__.py").write_text("")
        (home / "tests" / "test_utils.py").write_text("from DeDoDe.utils import get_gt_warp\n")
    elif case == "pytest_ini":
        (home / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    elif case == "shell_script":
        (home / "train.sh").write_text("PYTHONPATH=. python experiments/train_detector.py\n")
    elif case == "pth_file":
        (tmp_path / "host" / "vendored.pth").write_text("thirdparty/DeDoDe\n")
    elif case == "requirements_folder":
        (tmp_path / "requirements").mkdir()
        (tmp_path / "requirements" / "base.txt").write_text("dedode==0.1\n")
    elif case == "conda_environment":
        (tmp_path / "environment.yml").write_text("dependencies:\n  - pip:\n    - dedode\n")
    elif case == "git_url":
        (tmp_path / "requirements.txt").write_text("git+https://github.com/Parskatt/DeDoDe.git\n")
    elif case == "ci_workflow":
        (tmp_path / ".github" / "workflows").mkdir(parents=True)
        (tmp_path / ".github" / "workflows" / "test.yml").write_text("env:\n  PYTHONPATH: host/thirdparty/DeDoDe\n")
    elif case == "notebook":
        (tmp_path / "demo.ipynb").write_text('{"cells": [{"source": ["import sys\\n", '
                                             '"sys.path.append(\'host/thirdparty/DeDoDe\')"]}]}')
    elif case == "readme":
        (tmp_path / "README.md").write_text("Run `PYTHONPATH=host/thirdparty/DeDoDe python -m experiments.train`.\n")
    elif case == "doctest_modules":  # pytest then imports every module, and prepends their folders
        (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --doctest-modules\n")
    elif case == "makefile_enters":
        (tmp_path / "Makefile").write_text("train-dedode:\n\tcd host/thirdparty/DeDoDe && python -m experiments.train\n")
    elif case == "editable_install":
        (tmp_path / "install.sh").write_text("pip install -e host/thirdparty/DeDoDe\n")
    elif case == "ci_working_directory":
        (tmp_path / ".github" / "workflows").mkdir(parents=True)
        (tmp_path / ".github" / "workflows" / "ci.yml").write_text(
            "jobs:\n  train:\n    steps:\n      - run: python -m experiments.train_detector\n"
            "        working-directory: host/thirdparty/DeDoDe\n")
    elif case == "makefile_variable":
        (tmp_path / "Makefile").write_text("VENDOR := host/thirdparty/DeDoDe\n\ntrain:\n"
                                           "\tcd $(VENDOR) && python -m experiments.train_detector\n")
    else:
        (tmp_path / "train.sh").write_text("pushd host/thirdparty/DeDoDe\npython -m experiments.train_detector\npopd\n")
    kept_lines_stay(written["training"], root=tmp_path)


def test_a_name_another_added_folder_holds_keeps_the_findings(tmp_path: Path) -> None:
    """The host puts its own folder on sys.path, and holds a ``utils.py`` there; the vendored
    project has a ``utils`` package too: ``from utils import helper`` finds the host's."""
    _vendored(tmp_path)
    (tmp_path / "host" / "__init__.py").write_text("import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(__file__))\n")
    (tmp_path / "host" / "utils.py").write_text("def helper(x):\n    return x\n")
    home = tmp_path / "host" / "thirdparty" / "DeDoDe"
    _write(home / "utils", "__init__.py", "def helper(x):\n    return x\n")
    training = _write(home / "experiments", "train.py", '''
    import torch
    from utils import helper

    x = helper(torch.zeros(1).cuda())  # kept
    ''')
    kept_lines_stay(training, root=tmp_path)


@pytest.mark.parametrize("case", ["path_added_by_the_host", "path_unreadable", "declared_dependency",
                                  "changes_its_own_path", "path_added_relative"])
def test_what_makes_the_vendored_name_importable_keeps_the_findings(tmp_path: Path, case: str) -> None:
    written = _vendored(tmp_path, mark="kept")
    if case == "path_added_by_the_host":
        _write(tmp_path / "host" / "thirdparty", "loader.py", '''
    import os
    import sys

    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(HERE, "DeDoDe"))
    ''')
    elif case == "path_unreadable":
        _write(tmp_path / "host", "paths.py", '''
    import sys

    from host.config import vendored_folder

    sys.path.append(vendored_folder())
    ''')
    elif case == "declared_dependency":
        info = tmp_path / "host-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: host\nRequires-Dist: dedode>=0.1\n")
    elif case == "changes_its_own_path":
        text = written["training"].read_text()
        written["training"].write_text(text.replace(
            "import torch\n", "import sys\n\nimport torch\n\nsys.path.append('..')\n", 1))
    else:  # run from the host's folder, "thirdparty/DeDoDe" is the vendored home
        _write(tmp_path / "host", "cli.py", '''
    import sys

    sys.path.append("thirdparty/DeDoDe")
    ''')
    kept_lines_stay(written["training"], root=tmp_path)


def test_a_vendored_project_at_the_top_of_the_scan_is_importable(tmp_path: Path) -> None:
    """A checkout holding ``DeDoDe/DeDoDe/`` beside other folders, with no package above it: run
    from ``DeDoDe/``, the name is found."""
    home = tmp_path / "DeDoDe"
    (home / "DeDoDe").mkdir(parents=True)
    (home / "DeDoDe" / "__init__.py").write_text("")
    _write(home / "DeDoDe", "utils.py", "import torch\n\n\ndef get_gt_warp(depth):\n    return depth\n")
    training = _write(home / "experiments", "train_detector.py", _TRAINING.format(mark="kept"))
    kept_lines_stay(training, root=tmp_path)


def test_reads_of_sys_path_and_a_lazy_module_leave_the_reading_on(tmp_path: Path) -> None:
    """``if here not in sys.path``, ``print(sys.path)``, ``sys.modules[__name__] = ...``, a
    ``sys.path.append`` of another folder, and ``os.chdir`` or ``cwd=`` into a folder of the run
    (an argument) add nothing that holds ``DeDoDe``."""
    written = _vendored(tmp_path)
    (tmp_path / "host" / "export.py").write_text(  # deep-image-matching's graph.py: a folder of the run
        "import os\nimport subprocess\n\n\ndef export(output_dir, cmd):\n    cwd = os.getcwd()\n"
        "    os.chdir(output_dir)\n    subprocess.run(cmd, cwd=output_dir)\n    os.chdir(cwd)\n")
    (tmp_path / "host" / "env.py").write_text(
        "import os\nimport sys\nfrom pathlib import Path\n\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
        "if HERE not in sys.path:\n    sys.path.append(os.path.join(HERE, 'thirdparty', 'hloc'))\n"
        "sys.path.insert(0, str(Path(__file__).parent / 'thirdparty' / 'alike'))\n"
        "print(len(sys.path))\nsys.modules[__name__] = sys.modules[__name__]\n")
    check_marked_lines([tmp_path], (written["training"], written["extractor"]))


def test_a_library_name_and_a_checkout_without_packages_keep_the_findings(tmp_path: Path) -> None:
    """A vendored project's own ``yaml/`` folder does not make ``import yaml`` its own; a checkout
    whose vendored folder sits in no package (``repo/vendor/DeDoDe``) may be run from there."""
    written = _vendored(tmp_path / "a")
    home = tmp_path / "a" / "host" / "thirdparty" / "DeDoDe"
    _write(home / "yaml", "loader.py", "import torch\n")
    configs = _write(home / "experiments", "configs.py", '''
    import torch
    import yaml

    x = torch.zeros(1).cuda()  # kept
    ''')
    check_marked_lines([tmp_path / "a"], (written["training"], configs))
    vendor = tmp_path / "b" / "repo" / "vendor" / "DeDoDe"
    (vendor / "DeDoDe").mkdir(parents=True)
    (vendor / "DeDoDe" / "__init__.py").write_text("")
    _write(vendor / "DeDoDe", "utils.py", "import torch\n\n\ndef get_gt_warp(depth):\n    return depth\n")
    kept_lines_stay(_write(vendor / "experiments", "train_detector.py", _TRAINING.format(mark="kept")),
                    root=tmp_path / "b")


@pytest.mark.parametrize("outer_holds_utils", [False, True])
def test_a_namespace_folder_on_the_path_counts_only_where_it_holds_the_import(tmp_path: Path,
                                                                           outer_holds_utils: bool) -> None:
    """deep-image-matching's shape: a demo run from its own folder appends ``"../"``, which may put
    ``thirdparty/`` on sys.path; ``thirdparty/DeDoDe/`` there is a namespace folder, and ``from
    DeDoDe.utils import ...`` still fails unless it holds ``utils``."""
    written = _vendored(tmp_path, mark="kept" if outer_holds_utils else "quiet")
    _write(tmp_path / "host" / "thirdparty" / "se2loftr" / "demo", "demo_loftr.py", '''
    import os

    os.sys.path.append("../")
    ''')
    if outer_holds_utils:
        (tmp_path / "host" / "thirdparty" / "DeDoDe" / "utils.py").write_text("def get_gt_warp(x):\n    return x\n")
        kept_lines_stay(written["training"], root=tmp_path)
    else:
        check_marked_lines([tmp_path], (written["training"], written["extractor"]))


def test_a_subpackage_named_for_the_library_it_wraps_imports_the_library(tmp_path: Path) -> None:
    """autogluon's ``models/gluonts/abstract.py`` does ``import gluonts``: the pip package, though
    ``models/gluonts/`` holds the name inside a package too (the in-sample check of the round's
    third version found seven packages of this shape)."""
    package = tmp_path / "host"
    for folder in (package, package / "models", package / "models" / "gluonts"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    wrapper = _write(package / "models" / "gluonts", "abstract.py", '''
    import gluonts
    import torch


    def fit(model):
        return model.cuda()  # kept


    __all__ = ["fit"]
    ''')
    kept_lines_stay(wrapper, "TP002", root=tmp_path)


def test_a_script_whose_own_folder_holds_the_name_finds_it(tmp_path: Path) -> None:
    """``experiments/DeDoDe/`` beside the script: run as ``python experiments/train_detector.py``,
    the script's folder comes first on sys.path and holds the name."""
    written = _vendored(tmp_path, mark="kept")
    _write(tmp_path / "host" / "thirdparty" / "DeDoDe" / "experiments" / "DeDoDe", "utils.py",
           "def get_gt_warp(x):\n    return x\n")
    kept_lines_stay(written["training"], root=tmp_path)


def test_a_linked_scan_folder_is_read_as_the_folder(tmp_path: Path) -> None:
    written = _vendored(tmp_path / "real")
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    _, reason = worst_by_line(tmp_path / "linked")[("train_detector.py", 7, "TP002")]
    assert reason.startswith("past `from DeDoDe.utils import get_gt_warp` (line 3)"), reason
    assert written["training"].exists()
