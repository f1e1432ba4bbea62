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
                                  "shell_script", "pth_file", "requirements_folder", "conda_environment", "git_url"])
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
    else:
        (tmp_path / "requirements.txt").write_text("git+https://github.com/Parskatt/DeDoDe.git\n")
    kept_lines_stay(written["training"], root=tmp_path)


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
    """``if here not in sys.path``, ``print(sys.path)``, ``sys.modules[__name__] = ...`` and a
    ``sys.path.append`` of another folder add nothing that holds ``DeDoDe``."""
    written = _vendored(tmp_path)
    (tmp_path / "host" / "env.py").write_text(
        "import os\nimport sys\n\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
        "if HERE not in sys.path:\n    sys.path.append(os.path.join(HERE, 'thirdparty', 'hloc'))\n"
        "print(len(sys.path))\nsys.modules[__name__] = sys.modules[__name__]\n")
    check_marked_lines([tmp_path], (written["training"], written["extractor"]))
