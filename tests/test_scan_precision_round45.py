"""Round 45 (docs/precision/round45.md): a module imported only under a helper that asks for CUDA.
From the verdicts of seed 150301 (both judges): anemoi-models imports its Triton kernels
(``anemoi/models/triton/gt.py``, a folder without ``__init__.py``) only under
``if is_triton_available():``, a function of another module that returns ``triton_available and
gpus_present`` with ``gpus_present = torch.cuda.is_available()``.  Beside it, the helpers that may
be true without CUDA, and the imports that may still run."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines
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
