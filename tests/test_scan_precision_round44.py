"""Round 44 (docs/precision/round44.md): a class its package never uses, in a module the package
imports other names from.  From the verdicts: cnstd's vendored YOLOv7 ``loss.py``, of which cnstd
imports only ``SigmoidBin`` (both judges of seed 115842 found its 20 rows incorrect), and deepmol's
``neural_npfp/model.py``, of which deepmol imports only ``MLP`` and ``FP_AE`` (both judges of seed
150301).  Beside them, the close shapes where the class may still run: each ``# kept`` line below
is one an independent review of the first version found lowered wrongly, or one the reading must
not reach."""
from __future__ import annotations

import textwrap
from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

_LOSS = '''
    import torch
    from torch import nn
    from torch.autograd import Function
    from .base import Module


    class SigmoidBin(nn.Module):
        def forward(self, x):
            return x.sigmoid()


    class RankSort(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, targets):
            return logits.cuda() - targets.cuda()  # quiet


    class APLoss(Function):
        @staticmethod
        def forward(ctx, logits):
            return logits.cuda()  # quiet


    class ComputeLossOTA:
        def __init__(self, model):
            super(ComputeLossOTA, self).__init__()
            self.model = model

        def __call__(self, p, targets):
            anchors = torch.tensor([[1.0, 2.0]], device="cuda")  # quiet
            return p - anchors


    class ComputeLossAuxOTA:
        def build_targets(self, p):
            return p.cuda()  # quiet


    class AtImport(nn.Module):
        # the class body runs when the module is imported
        anchors = torch.zeros(3).cuda()  # kept

        def forward(self, x, scale=torch.ones(1).cuda()):  # kept
            return x * scale


    def build_targets(p):
        # a function nothing calls may be an entry point users call
        return p.to("cuda:0")  # kept


    class LocalModule(Module):
        # Module is the package's own class here, not torch's: it may register subclasses
        def run(self, x):
            return x.cuda()  # kept


    class Registering:
        def __init_subclass__(cls, **kwargs):
            REGISTRY.append(cls)


    class Registered(Registering):
        def run(self, x):
            return x.cuda()  # kept


    class WithMeta(metaclass=Meta):
        def run(self, x):
            return x.cuda()  # kept


    @register
    class Decorated:
        def run(self, x):
            return x.cuda()  # kept


    class RegisteredMethod:
        @hooks.register("step")
        def run(self, x):
            return x.cuda()  # kept


    class TestOnGpu:
        def test_cuda(self):
            assert torch.ones(1).cuda().is_cuda  # kept


    class UsedBelow:
        def run(self, x):
            return x.cuda()  # kept


    DEFAULT = UsedBelow


    class NamedInAString:
        def run(self, x):
            return x.cuda()  # kept


    class NamedInAConfig:
        def run(self, x):
            return x.cuda()  # kept
'''


def _package(tmp_path: Path) -> Path:
    root = tmp_path / "detector"
    _write(root, "__init__.py", "")
    _write(root, "base.py", "class Module:\n    registry = []\n")
    _write(root, "yolo/__init__.py", "")
    _write(root, "yolo/model.py", '''
        from .loss import SigmoidBin

        LOSSES = {"named": "NamedInAString"}


        def head():
            return SigmoidBin()
    ''')
    _write(root, "configs/train.json", '{"loss": "NamedInAConfig"}\n')
    return root


def test_a_class_the_package_never_uses_in_a_module_it_imports_other_names_from_is_quiet(tmp_path: Path) -> None:
    root = _package(tmp_path)
    loss = _write(root, "yolo/loss.py", textwrap.dedent(_LOSS))
    check_marked_lines([tmp_path], (loss,))


_TRAINER = '''
    import torch


    class Trainer_{case}:
        def fit(self, model):
            return model.cuda()  # {mark}


    def helper():
        return 1
'''


def _trainer(folder: Path, case: str, mark: str = "kept", uses: str = "") -> Path:
    """A package ``p_{case}`` whose ``u_{case}.py`` imports ``helper`` from ``t_{case}.py``, then ``uses``."""
    _write(folder, "__init__.py", "")
    _write(folder, f"u_{case}.py", f"from .t_{case} import helper\n{uses.format(case=case)}")
    return _write(folder, f"t_{case}.py", _TRAINER.format(case=case, mark=mark))


def test_a_module_taken_whole_or_looked_up_keeps_its_classes(tmp_path: Path) -> None:
    """Any way of taking the module whole gives a user (or the package) every class in it."""
    uses = {
        "plain": "import p_plain.t_plain\n",
        "relative": "from . import t_relative\n",
        "attribute": "import p_attribute\n\nT = getattr(p_attribute.t_attribute, NAME)\n",
        "fetched": "import importlib\n\nmod = importlib.import_module('.t_fetched', __package__)\n",
        "by_name": "import p_by_name as pkg\n\nmod = getattr(pkg, 't_by_name')\n",
        "star": "from .t_star import *\n",
        "built": "import importlib\n\n\ndef load(name):\n    return importlib.import_module(f'.{{name}}', __package__)\n",
        "walked": "import pkgutil\n\nfound = list(pkgutil.iter_modules(__path__))\n",
        "itself": "",
    }
    control = _trainer(tmp_path / "control" / "p_control", "control", mark="quiet")
    kept = _trainer(tmp_path / "control" / "p_kept", "kept", uses="import p_kept.t_kept\n")
    check_marked_lines([tmp_path / "control"], (control, kept))
    for case, use in uses.items():
        trainer = _trainer(tmp_path / case / f"p_{case}", case, uses=use)
        if case == "itself":
            with trainer.open("a") as itself:
                itself.write("\n\ndef by_name(name):\n    return globals()[name]\n")
        kept_lines_stay(trainer, root=tmp_path / case)


def test_only_a_module_of_the_same_package_outside_tests_and_init_shows_the_choice(tmp_path: Path) -> None:
    """An ``__init__`` re-export, a test, or a same-named module of another project is no
    evidence that the package uses only part of the module."""
    first = tmp_path / "first" / "p_first"
    trainer = _trainer(first, "first")
    (first / "u_first.py").unlink()
    _write(first, "__init__.py", "from .t_first import helper\n")
    _write(first, "tests/__init__.py", "")
    _write(first, "tests/test_trainer.py", "from ..t_first import helper\n")
    second = tmp_path / "second" / "p_first"
    _write(second, "__init__.py", "")
    _write(second, "t_first.py", "def helper():\n    return 2\n")
    _write(second, "u_first.py", "from .t_first import helper\n")
    kept_lines_stay(trainer, root=tmp_path)


def test_an_importer_that_cannot_be_parsed_keeps_the_class(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path / "p_broken", "broken")
    _write(tmp_path / "p_broken", "broken.py", "from . import t_broken\ndef broken(:\n")
    result = scan([tmp_path], ScanConfig(), jobs=1)
    line = trainer.read_text().splitlines().index("        return model.cuda()  # kept") + 1
    assert {finding_worst(f, ScanConfig().targets) for f in result.findings
            if f.path.endswith("t_broken.py") and f.line == line} == {"error"}


def test_the_lowered_finding_says_which_import_shows_the_choice(tmp_path: Path) -> None:
    root = _package(tmp_path)
    _write(root, "yolo/loss.py", textwrap.dedent(_LOSS))
    found = worst_by_line(tmp_path)
    severity, reason = next(v for (name, _, _), v in found.items() if name == "loss.py" and "ComputeLossOTA" in v[1])
    assert severity == "info"
    assert "yolo/model.py:1 imports SigmoidBin" in reason, reason


# Each case: files added to (or, for loss.py, appended to) a package whose model.py imports only
# SigmoidBin from loss.py; the ComputeLoss line must stay.  From an independent review of the
# first version of this round.
_VARIANTS: dict[str, dict[str, str]] = {
    "default_on_the_def_line": {"pkg/loss.py": """
class Anchored:
    def __call__(self, p, anchors=torch.zeros(3).cuda()): return p + anchors  # kept
"""},
    "default_on_a_continued_line": {"pkg/loss.py": """
class Anchored:
    def __call__(self, p,
                 anchors=torch.zeros(3).cuda()):  # kept
        return p + anchors
"""},
    "method_called_from_the_class_body": {"pkg/loss.py": """
class Anchored:
    def _anchors():
        return torch.zeros(3).cuda()  # kept
    ANCHORS = _anchors()
"""},
    "decorator_defined_in_the_class": {"pkg/loss.py": """
class Anchored:
    def _on_gpu(fn):
        torch.cuda.set_device(0)  # kept
        return fn

    @_on_gpu
    def run(self, p):
        return p
"""},
    "eval_in_the_module": {"pkg/loss.py": "\n\ndef build_loss(name, *a):\n    return eval(name)(*a)\n"},
    "locals_in_the_module": {"pkg/loss.py": "\n\nLOSSES = {k: v for k, v in list(locals().items())}\n"},
    "sys_modules_built": {"pkg/factory.py": "import sys\n\n\ndef make(mod, cls):\n"
                                            "    return getattr(sys.modules['pkg.' + mod], cls)()\n"},
    "pydoc_locate": {"pkg/factory.py": "import pydoc\n\n\ndef make(path):\n    return pydoc.locate(path)()\n"},
    "hydra": {"pkg/train.py": "import hydra\n\n\ndef make(cfg):\n    return hydra.utils.instantiate(cfg.loss)\n"},
    "getmodule": {"pkg/factory.py": "import inspect\nfrom .loss import SigmoidBin\n\n\ndef make(cls):\n"
                                    "    return getattr(inspect.getmodule(SigmoidBin), cls)()\n"},
    "alias_of_the_package": {"pkg/factory.py": "import pkg as P\n\n\ndef make(name):\n"
                                               "    return getattr(P.loss, name)()\n"},
    "getattr_on_the_package": {"pkg/factory.py": "import pkg\n\nPARTS = ['loss', 'model']\n\n\n"
                                                 "def make(part, cls):\n    return getattr(getattr(pkg, part), cls)()\n"},
    "vars_of_the_package": {"pkg/factory.py": "import pkg\n\n\ndef make(cls):\n"
                                              "    return vars(pkg)['loss'].__dict__[cls]()\n"},
    "star_import_of_the_package": {"pkg/__init__.py": "__all__ = ['loss', 'model']\n",
                                   "pkg/factory.py": "from pkg import *\n\n\ndef make(cls):\n"
                                                     "    return getattr(loss, cls)()\n"},
    "notebook": {"train.ipynb": '{"cells": [{"source": ["import pkg.loss as L\\n", "L.__dict__[name]()"]}]}\n'},
    "script_beside_the_package": {"train.py": "import importlib\nimport sys\n\n"
                                              "getattr(importlib.import_module(f'pkg.{sys.argv[1]}'), sys.argv[2])()\n"},
    "init_subclass_assigned": {"pkg/loss.py": """
def _register(cls):
    REGISTRY.append(cls)


class Registering:
    __init_subclass__ = classmethod(_register)


class Registered(Registering):
    def run(self, p):
        return p.cuda()  # kept
"""},
    "module_shadowed_by_a_local_class": {"pkg/loss.py": """
from torch.nn import Module


class Module(Module):
    def __init_subclass__(cls):
        REGISTRY.append(cls)


class Registered(Module):
    def run(self, p):
        return p.cuda()  # kept
"""},
    "module_bound_twice": {"pkg/loss.py": """
try:
    from mmengine.model import BaseModule as Module
except ImportError:
    from torch.nn import Module


class Registered(Module):
    def run(self, p):
        return p.cuda()  # kept
"""},
    "descriptor_in_the_class_body": {"pkg/loss.py": """
class Registered:
    field = Registering()

    def run(self, p):
        return p.cuda()  # kept
"""},
    "only_a_test_imports": {"pkg/model.py": "", "pkg/loss_test.py": "from .loss import SigmoidBin\n"},
    "build_folder": {"pkg/build/trainer.py": "from pkg.loss import ComputeLoss\n"},
    "readme": {"README.md": "Use `from pkg.loss import ComputeLoss` to train.\n"},
    "stub": {"pkg/loss.pyi": "class ComputeLoss: ...\n"},
}

_LOSS_MODULE = """import torch
from torch import nn


class SigmoidBin(nn.Module):
    def forward(self, x):
        return x.sigmoid()


class ComputeLoss:
    def __call__(self, p):
        return p.cuda(){mark}
"""


def _loss_package(folder: Path, mark: str, files: dict[str, str]) -> Path:
    _write(folder, "pkg/__init__.py", files.get("pkg/__init__.py", ""))
    _write(folder, "pkg/model.py", files.get("pkg/model.py", "from .loss import SigmoidBin\n"))
    loss = folder / "pkg" / "loss.py"
    added = files.get("pkg/loss.py", "")
    # where the case adds a class of its own, that class is the one to keep
    mark = "" if "# kept" in added else f"  # {mark}"
    loss.write_text(_LOSS_MODULE.format(mark=mark) + added)
    for name, text in files.items():
        if name not in ("pkg/__init__.py", "pkg/model.py", "pkg/loss.py"):
            _write(folder, name, text)
    return loss


def test_every_way_the_review_found_to_reach_the_class_keeps_it(tmp_path: Path) -> None:
    control = _loss_package(tmp_path / "control", "quiet", {})
    assert worst_by_line(tmp_path / "control")[("loss.py", 12, "TP002")][0] == "info"
    assert control.exists()
    lowered = []
    for case, files in _VARIANTS.items():
        loss = _loss_package(tmp_path / case, "kept", files)
        try:
            kept_lines_stay(loss, root=tmp_path / case)
        except AssertionError:
            lowered.append(case)
    assert not lowered


def test_a_scan_of_the_package_alone_keeps_the_class(tmp_path: Path) -> None:
    """A script beside the package, outside the scanned folder, may use it."""
    loss = _loss_package(tmp_path, "kept", {})
    kept_lines_stay(loss, root=tmp_path / "pkg")


def test_a_file_too_deep_to_read_keeps_its_module_and_the_pass_finishes(tmp_path: Path) -> None:
    loss = _loss_package(tmp_path, "kept", {"pkg/deep.py": "x = a" + ".b" * 340 + ".loss\n"})
    kept_lines_stay(loss, root=tmp_path)
    assert not scan([tmp_path], ScanConfig(), jobs=1).unfinished


def test_a_test_importer_is_known_through_a_linked_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    loss = _loss_package(real, "kept", {"pkg/model.py": "", "pkg/tests/__init__.py": "",
                                        "pkg/tests/helpers.py": "from ..loss import SigmoidBin\n"})
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    assert worst_by_line(tmp_path / "link")[(loss.name, 12, "TP002")][0] == "error"
    # the control: a module of the package as the importer, through the same link
    (real / "pkg" / "model.py").write_text("from .loss import SigmoidBin\n")
    assert worst_by_line(tmp_path / "link")[(loss.name, 12, "TP002")][0] == "info"
