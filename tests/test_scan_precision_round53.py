"""Round 53 (docs/precision/round53.md): device fallbacks that no call reaches.  From the verdicts
of seeds 642689 and 710376: mt3-infer's loader resolves ``device="auto"`` to CUDA or the CPU, and
its only caller passes a device it has already resolved; dmg's ``self.device = device or
torch.device("cuda" if ... else "cpu")`` under a ``"cpu"`` default, which only an explicit false
value reaches; and thingsvision's CLIP ``load(device=...)`` default, whose callers all pass a
device, kept because the package's own ``core/extraction/torch.py`` made every ``torch.hub.load``
call look like a call of the project's ``load``.  Beside them, the calls that do reach the
fallback."""
from __future__ import annotations

from pathlib import Path

import pytest
from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_AUTO_LOADER = '''
    import torch


    def load_model(checkpoint, device="auto"):
        model = torch.load(checkpoint, map_location="cpu")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"  # {mark}
        return model.to(device)
'''


def _package(root: Path, files: dict[str, str]) -> list[Path]:
    (root / "mtpkg").mkdir(parents=True)
    (root / "mtpkg" / "__init__.py").write_text("")
    return [_write(root / "mtpkg", name, source) for name, source in files.items()]


def test_an_auto_fallback_every_call_passes_a_resolved_device_past_is_info(tmp_path: Path) -> None:
    loader, adapter = _package(tmp_path, {
        "loader.py": _AUTO_LOADER.format(mark="quiet"),
        "adapter.py": '''
    from mtpkg.loader import load_model


    class Adapter:
        def __init__(self, device_str):
            self.device_str = device_str

        def load(self, path):
            return load_model(path, device=self.device_str)

        def load_on_cpu(self, path):
            return load_model(path, "cpu")
    ''',
    })
    check_marked_lines([tmp_path], (loader, _write(tmp_path, "anchor.py", '''
    import torch

    x = torch.zeros(1).cuda()  # kept
    ''')))
    _, reason = worst_by_line(tmp_path)[("loader.py", 7, "TP003")]
    assert reason == "default only: every call in the scanned files passes device", reason


@pytest.mark.parametrize("call", [
    'load_model(path)',  # the default is the fallback value
    'load_model(path, device="auto")',
    'load_model(path, device=device)',  # a wrapper whose own default is "auto" hands it on
    'load_model(path, **options)',
    'load_model(*arguments)',
])
def test_a_call_that_may_reach_the_auto_fallback_keeps_it(tmp_path: Path, call: str) -> None:
    loader, _ = _package(tmp_path, {
        "loader.py": _AUTO_LOADER.format(mark="kept"),
        "run.py": f'''
    from mtpkg.loader import load_model


    def run(path, device="auto", arguments=(), **options):
        return {call}
    ''',
    })
    kept_lines_stay(loader, "TP003", root=tmp_path)


def test_a_sentinel_the_default_is_not_is_reached_only_by_a_call_passing_it(tmp_path: Path) -> None:
    """``def pick(device="cpu"): if device == "auto": ...``: leaving the parameter out never takes
    the fallback; a call passing "auto" does."""
    source = '''
    import torch


    def pick(device="cpu"):
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"  # {mark}
        return torch.device(device)


    def main(**options):
        return pick(), pick("cpu"){extra}
    '''
    quiet = _write(tmp_path / "a", "pick_quiet.py", source.format(mark="quiet", extra=""))
    kept = _write(tmp_path / "b", "pick_kept.py", source.format(mark="kept", extra=', pick(device="auto")'))
    unpacked = _write(tmp_path / "c", "pick_unpacked.py", source.format(mark="kept", extra=", pick(**options)"))
    check_marked_lines([tmp_path / "a", tmp_path / "b"], (quiet, kept))
    kept_lines_stay(unpacked, "TP003")


_OR_DEFAULT = '''
    import torch


    class NnModel(torch.nn.Module):
        def __init__(self, *, layers, device={default}):
            super().__init__()
            self.device = device or torch.device(
                "cuda" if torch.cuda.is_available() else "cpu",  # {mark}
            )
            self.net = torch.nn.Linear(layers, 1).to(self.device)
'''


def test_an_or_fallback_under_a_true_default_is_reached_only_by_a_false_argument(tmp_path: Path) -> None:
    """dmg's shape: the ``"cpu"`` default never takes the ``or``; every call leaves ``device`` out
    or passes a device.  Under a None default, or with a call passing None, the fallback is taken."""
    handler = '''
    from dmgpkg.nn_model import NnModel


    class ModelHandler:
        def __init__(self, config):
            self.device = config["device"]
            self.models = [NnModel(layers=3, device=self.device), NnModel(layers=2)]{extra}
    '''
    cases = {"quiet": ('"cpu"', ""), "kept": ('"cpu"', ", NnModel(layers=1, device=None)"),
             "kept_none": ("None", "")}
    written = []
    for name, (default, extra) in cases.items():
        root = tmp_path / name / "dmgpkg"
        root.mkdir(parents=True)
        (root / "__init__.py").write_text("")
        mark = "quiet" if name == "quiet" else "kept"
        written.append(_write(root, "nn_model.py", _OR_DEFAULT.format(default=default, mark=mark)))
        _write(root, "handler.py", handler.format(extra=extra))
    check_marked_lines([tmp_path / "quiet"], (written[0], _write(tmp_path / "quiet", "anchor.py", '''
    import torch

    x = torch.zeros(1).cuda()  # kept
    ''')))
    kept_lines_stay(written[1], "TP003", root=tmp_path / "kept")
    kept_lines_stay(written[2], "TP003", root=tmp_path / "kept_none")


def test_the_forms_of_a_fallback_in_one_file(tmp_path: Path) -> None:
    """``if not p``, ``p if p != "auto" else V``; calls that reach them (leaving out a None, passing
    ""); and tests that pick no value the fallback is taken for: a number, ``is`` with a string, an
    ``if`` with an ``else``, ``p if not p else V``."""
    quiet = _write(tmp_path, "forms.py", '''
    import torch


    def by_not(x, device=None):
        if not device:
            device = "cuda" if torch.cuda.is_available() else "cpu"  # quiet
        return x.to(device)


    def by_not_equal(x, device="auto"):
        device = device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")  # quiet
        return x.to(device)


    def main(x, chosen):
        return by_not(x, chosen), by_not_equal(x, "cpu")
    ''')
    kept = _write(tmp_path, "not_forms.py", '''
    import torch


    def by_number(x, device=0):
        if device == 0:
            device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return x.to(device)


    def by_identity(x, device="auto"):
        if device is "auto":  # noqa: F632
            device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return x.to(device)


    def with_else(x, device="auto"):
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        else:
            device = str(device)
        return x.to(device)


    def by_not_left_out(x, device=None):
        if not device:
            device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return x.to(device)


    def by_not_given_empty(x, device=None):
        if not device:
            device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return x.to(device)


    def by_zero(x, device=None):
        if device == 0:
            device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return x.to(device)


    def by_truth(x, device=None):
        picked = device if not device else ("cuda" if torch.cuda.is_available() else "cpu")  # kept
        return x.to(picked)


    def main(x, chosen):
        return (by_number(x, 1), by_identity(x, chosen), with_else(x, chosen), by_not_left_out(x),
                by_not_given_empty(x, ""), by_zero(x, 1), by_truth(x, chosen))
    ''')
    check_marked_lines([tmp_path], (quiet, kept))


def test_a_packaged_module_named_like_a_library_is_not_imported_by_that_name(tmp_path: Path) -> None:
    """thingsvision's shape: ``thingsvision/core/extraction/torch.py`` beside ``torch.hub.load(...)``
    calls; ``import torch`` still means PyTorch.  A script folder's own module is still imported by
    its name: there ``helpers.load(...)`` without a device keeps the default."""
    package = tmp_path / "a" / "tvpkg"
    (package / "backends").mkdir(parents=True)
    for folder in (package, package / "backends"):
        (folder / "__init__.py").write_text("")
    (package / "backends" / "torch.py").write_text("import torch\n\nEXTRACTOR = torch.nn.Identity\n")
    clip = _write(package, "clip.py", '''
    import torch


    def load(name, device="cuda" if torch.cuda.is_available() else "cpu"):  # quiet
        return torch.jit.load(name, map_location=device)
    ''')
    _write(package, "custom_model.py", '''
    import torch

    from tvpkg.clip import load


    class ClipModel:
        def create_model(self):
            return load(self.variant, device=self.device)

        def create_hub_model(self):
            return torch.hub.load("facebookresearch/barlowtwins:main", "resnet50")
    ''')
    scripts = tmp_path / "b" / "scripts"
    helpers = _write(scripts, "helpers.py", '''
    import torch


    def load(name, device="cuda" if torch.cuda.is_available() else "cpu"):  # kept
        return torch.jit.load(name, map_location=device)
    ''')
    _write(scripts, "run.py", '''
    import helpers

    model = helpers.load("model.pt")
    ''')
    check_marked_lines([tmp_path / "a"], (clip, _write(tmp_path / "a", "anchor.py", '''
    import torch

    x = torch.zeros(1).cuda()  # kept
    ''')))
    kept_lines_stay(helpers, "TP003", root=tmp_path / "b")


_BUILD = '''
    import argparse

    import torch

    DEFAULT_DEVICE = "auto"
    REGISTRY = {}


    def register(name):
        def decorate(fn):
            REGISTRY[name] = fn
            return fn
        return decorate


    def build_model(device="auto"):
        if device == "auto":
            device = torch.device("cuda")  # kept
        return torch.nn.Linear(4, 2).to(device)
'''


@pytest.mark.parametrize("caller", [
    # a module name bound to "auto"
    'model = build_model(device=DEFAULT_DEVICE)',
    # a closure handing on its own "auto"
    'def make_factory(device="auto"):\n    def factory():\n        return build_model(device=device)\n'
    '    return factory',
    'MODELS = {"linear": lambda device="auto": build_model(device=device)}',
    # an option of the same file whose default is "auto"
    'def main():\n    parser = argparse.ArgumentParser()\n    parser.add_argument("--device", default="auto")\n'
    '    args = parser.parse_args()\n    return build_model(device=args.device)',
])
def test_a_caller_handing_on_the_auto_value_keeps_the_fallback(tmp_path: Path, caller: str) -> None:
    """The review's shapes (docs/precision/round53.md): each run on the CPU build reaches the CUDA line."""
    import textwrap
    path = _write(tmp_path, "infer.py", _BUILD + textwrap.indent("\n\n" + caller + "\n", "    "))
    kept_lines_stay(path, "TP001")


def test_what_the_review_found_binds_or_calls_the_parameter_otherwise(tmp_path: Path) -> None:
    """A fallback that rebinds another parameter the next one tests; a ``match`` capture; a flag
    default (``cpu=False``), a run-time switch; a registry decorator."""
    rebind = _write(tmp_path / "a", "rebind.py", '''
    import torch


    def build_model(device="cpu", preset=None):
        if preset == "fast":
            device = "auto"
        if device == "auto":
            device = torch.device("cuda")  # kept
        return torch.nn.Linear(4, 2).to(device)


    def main():
        return build_model(preset="fast"), build_model(device="cpu")
    ''')
    captured = _write(tmp_path / "b", "captured.py", '''
    import torch


    def build_model(config, device="cpu"):
        match config:
            case {"device": device}:
                pass
        if device == "auto":
            device = torch.device("cuda")  # kept
        return torch.nn.Linear(4, 2).to(device)


    def main():
        return build_model({"device": "auto"}, device="cpu")
    ''')
    flag = _write(tmp_path / "c", "flag.py", '''
    import torch


    def get_model(cpu=False):
        model = torch.nn.Linear(4, 2)
        if not cpu:
            model = model.cuda()  # kept
        return model


    def main(args):
        return get_model(cpu=args.cpu)
    ''')
    registered = _write(tmp_path / "d", "registered.py", _BUILD + '''

    @register("small")
    def build_small(device="auto"):
        if device == "auto":
            device = torch.device("cuda")  # kept
        return torch.nn.Linear(2, 2).to(device)


    def smoke_test():
        return build_small(device="cpu")
    ''')
    for path in (rebind, captured, flag, registered):
        kept_lines_stay(path)


def test_a_script_in_a_package_folder_imports_its_sibling_by_name(tmp_path: Path) -> None:
    """``python mypkg/train.py`` puts ``mypkg/`` first on sys.path: its ``import models`` is the
    package's ``models.py``, whose calls there leave the device out."""
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    models = _write(package, "models.py", '''
    import torch


    def build_model(device="cuda"):  # kept
        return torch.nn.Linear(4, 2).to(device)
    ''')
    _write(package, "api.py", '''
    from mypkg.models import build_model


    def serve():
        return build_model(device="cpu")
    ''')
    _write(package, "train.py", '''
    import models

    if __name__ == "__main__":
        models.build_model()
    ''')
    kept_lines_stay(models, "TP001", root=tmp_path)
