"""Round 45 (docs/precision/round45.md): a module imported only under a helper that asks for CUDA.
From the verdicts of seed 150301 (both judges): anemoi-models imports its Triton kernels
(``anemoi/models/triton/gt.py``, a folder without ``__init__.py``) only under
``if is_triton_available():``, a function of another module that returns ``triton_available and
gpus_present`` with ``gpus_present = torch.cuda.is_available()``.  Beside it, the helpers that may
be true without CUDA, and the imports that may still run."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay
from scan_marks import write_snippet as _write

_KERNEL = '''
    import torch
    import triton


    @triton.jit  # {mark}
    def kernel(x):
        pass


    def run(x):
        return x.cuda()  # {mark}
'''

_HELPERS = '''
    import functools

    import torch

    try:
        import triton  # noqa: F401
        HAS_TRITON = True
    except ImportError:
        HAS_TRITON = False


    def is_triton_available():
        try:
            import triton  # noqa: F401
        except ImportError:
            triton_available = False
        else:
            triton_available = True
        gpus_present = torch.cuda.is_available()
        return triton_available and gpus_present


    @functools.lru_cache
    def cached_check():
        if not HAS_TRITON:
            return False
        return torch.cuda.is_available()


    def or_check():
        return HAS_TRITON or torch.cuda.is_available()


    def installed():
        return HAS_TRITON


    def forced(force=False):
        return force or torch.cuda.is_available()


    def rebound():
        ok = torch.cuda.is_available()
        if HAS_TRITON:
            ok = True
        return ok


    def from_parameter(ok=True):
        if HAS_TRITON:
            return ok
        ok = torch.cuda.is_available()
        return ok


    def sometimes():
        if HAS_TRITON:
            return True
        return torch.cuda.is_available()


    @register
    def registered():
        return torch.cuda.is_available()
'''

# the module each guard imports, and whether its lines are quiet
_GUARDS = {"is_triton_available": ("gt", "quiet"), "cached_check": ("cached", "quiet"),
           "or_check": ("either", "kept"), "installed": ("only_triton", "kept"), "forced": ("forced_k", "kept"),
           "rebound": ("rebound_k", "kept"), "from_parameter": ("parameter_k", "kept"),
           "registered": ("registered_k", "kept"), "sometimes": ("sometimes_k", "kept")}


def test_a_module_imported_only_under_a_helper_that_asks_for_cuda_is_quiet(tmp_path: Path) -> None:
    root = tmp_path / "models"
    _write(root, "__init__.py", "")
    # a namespace folder, as anemoi's triton/: no __init__.py
    _write(root, "kernels/utils.py", _HELPERS)
    kernels = [_write(root, f"kernels/{module}.py", _KERNEL.format(mark=mark)) for module, mark in _GUARDS.values()]
    imports = "\n".join(f"from models.kernels.utils import {helper}" for helper in _GUARDS)
    guarded = "\n".join(f"if {helper}():\n    from models.kernels.{module} import run as run_{module}\n"
                        for helper, (module, _) in _GUARDS.items())
    _write(root, "layers/__init__.py", "")
    _write(root, "layers/block.py", f"{imports}\n\n{guarded}")
    # a name `gt` of the file's own, and a tensor's `.gt`, are not the module
    _write(root, "layers/mappings.py", "def check(x, gt):\n    assert x.gt(0.0).all()\n    return gt\n")
    check_marked_lines([tmp_path], tuple(kernels))


def test_an_import_outside_the_helper_keeps_the_module(tmp_path: Path) -> None:
    root = tmp_path / "models"
    _write(root, "__init__.py", "")
    _write(root, "kernels/utils.py", _HELPERS)
    kernel = _write(root, "kernels/gt.py", _KERNEL.format(mark="kept"))
    quiet = _write(root, "kernels/cached.py", _KERNEL.format(mark="quiet"))
    _write(root, "layers/__init__.py", "")
    _write(root, "layers/block.py", '''
        from models.kernels.utils import cached_check, is_triton_available

        if is_triton_available():
            from models.kernels.gt import run
        if cached_check():
            from models.kernels.cached import run as cached_run
    ''')
    _write(root, "layers/eager.py", "from models.kernels import gt\n")
    check_marked_lines([tmp_path], (kernel, quiet))


# Helpers that may be true without CUDA, and guards that are not the helper: each case replaces
# kernels/utils.py or layers/block.py of a package whose block imports kernels/gt.py only under
# `if has_gpu():`.  From an independent review of this round's first version.
_UTILS = '''
import torch


def has_gpu():
    ok = torch.cuda.is_available()
    {body}
    return ok
'''
_BLOCK = '''
from models.kernels.utils import has_gpu

if has_gpu():
    from models.kernels.gt import run
'''
_HELPER_CASES = {
    "nonlocal": {"utils": _UTILS.format(body="def force():\n        nonlocal ok\n        ok = True\n    force()")},
    "except_as": {"utils": _UTILS.format(body="try:\n        raise ValueError\n    except ValueError as ok:\n        return ok")},
    "import_as": {"utils": _UTILS.format(body="import os as ok")},
    "def_rebinds": {"utils": _UTILS.format(body="def ok():\n        pass")},
    "match_capture": {"utils": _UTILS.format(body="match 1:\n        case ok:\n            pass")},
    "own_cache": {"utils": "import torch\n\n\ndef cache(f):\n    return lambda: True\n\n\n@cache\n"
                           "def has_gpu():\n    return torch.cuda.is_available()\n"},
    "torch_not_torch": {"utils": "import torch\n\n\ndef has_gpu():\n    import fakegpu as torch\n"
                                 "    return torch.cuda.is_available()\n"},
    "fallback_import": {"utils": "import torch\n\n\ndef has_gpu():\n    return torch.cuda.is_available()\n\n\n"
                                "try:\n    from fastbackend import has_gpu\nexcept ImportError:\n    pass\n"},
    "rebound_under_if": {"utils": "import os\nimport torch\n\n\ndef has_gpu():\n    return torch.cuda.is_available()\n\n\n"
                                  "if os.environ.get('FORCE'):\n    def has_gpu():\n        return True\n"},
    "global_rebinds": {"utils": "import torch\n\n\ndef has_gpu():\n    return torch.cuda.is_available()\n\n\n"
                                "def force():\n    global has_gpu\n    has_gpu = lambda: True\n"},
    "monkeypatched": {"block": "import models.kernels.utils\nfrom models.kernels.utils import has_gpu\n\n"
                               "models.kernels.utils.has_gpu = lambda: True\nif has_gpu():\n"
                               "    from models.kernels.gt import run\n"},
    "parameter_shadows": {"block": "from models.kernels.utils import has_gpu\n\n\ndef build(has_gpu=lambda: True):\n"
                                   "    if has_gpu():\n        from models.kernels.gt import run\n"},
    "loop_shadows": {"block": "from models.kernels.utils import has_gpu\n\nfor has_gpu in CHECKS:\n"
                              "    if has_gpu():\n        from models.kernels.gt import run\n"},
    "lazy_alias": {"user": "import models.kernels as kern\n\n\ndef f(x):\n    return kern.gt.run(x)\n"},
    "built_import": {"loader": "import importlib\nimport os\n\nfor f in os.listdir('.'):\n"
                               "    importlib.import_module(f'models.kernels.{f[:-3]}')\n"},
}


def test_a_helper_that_may_be_true_without_cuda_keeps_the_module(tmp_path: Path) -> None:
    control = tmp_path / "control" / "models"
    _write(control, "__init__.py", "")
    _write(control, "kernels/utils.py", _UTILS.format(body="pass"))
    quiet = _write(control, "kernels/gt.py", "def run(x):\n    return x.cuda()  # quiet\n")
    _write(control, "layers/__init__.py", "")
    _write(control, "layers/block.py", _BLOCK)
    kept = _write(control, "kernels/eager.py", "def run(x):\n    return x.cuda()  # kept\n")
    check_marked_lines([tmp_path / "control"], (quiet, kept))
    lowered = []
    for case, files in _HELPER_CASES.items():
        root = tmp_path / case / "models"
        _write(root, "__init__.py", "")
        _write(root, "kernels/utils.py", files.get("utils", _UTILS.format(body="pass")))
        gt = _write(root, "kernels/gt.py", "def run(x):\n    return x.cuda()  # kept\n")
        _write(root, "layers/__init__.py", "")
        _write(root, "layers/block.py", files.get("block", _BLOCK))
        for name in ("user", "loader"):
            if name in files:
                _write(root, f"layers/{name}.py", files[name])
        try:
            kept_lines_stay(gt, root=tmp_path / case)
        except AssertionError:
            lowered.append(case)
    assert not lowered


def test_a_bare_or_relative_name_from_a_namespace_folder_is_not_the_module(tmp_path: Path) -> None:
    root = tmp_path / "models"
    _write(root, "__init__.py", "")
    # a script in a namespace folder, never imported; `import gt` is some other gt on sys.path
    script = _write(root, "tools/gt.py", "import torch\n\nx = torch.zeros(3).cuda()  # kept\n")
    _write(root, "layers/__init__.py", "")
    _write(root, "layers/block.py", "import torch\n\nif torch.cuda.is_available():\n    import gt\n")
    kept_lines_stay(script, root=tmp_path)
