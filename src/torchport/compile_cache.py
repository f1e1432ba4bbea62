"""Inductor's on-disk cache, after a process torchport ended.

A compiled worker killed while the C++ compiler writes a kernel library leaves the
file cut short in inductor's cache.  Every later compile of the same graph, by
torchport or by the user, then fails to load it ("file too short") until someone
deletes it.  torchport ends workers on timeouts and on Ctrl-C, so it removes the
libraries such a worker left unfinished.

A library counts as unfinished when it is not a whole ELF file: shorter than its
own header says (the section and program header tables lie at the offsets the
header names).  Only files written since the process started are read, and one
that a live process holds open (another worker's linker still writing it, when
stages compile side by side) is left alone.  A process killed from outside
torchport (a test runner's timeout, the OOM killer) leaves the same: the first
inductor worker of each torchport command first sweeps the cache for libraries
cut short more than a minute ago (``sweep_once``; about 60 ms over 2,300
libraries).
"""
from __future__ import annotations

import getpass
import os
import re
import struct
import tempfile
import time
from pathlib import Path

_ELF_MAGIC = b"\x7fELF"
_HEADER_BYTES = 64  # a 64-bit ELF header; a 32-bit one is shorter


def cache_folder(env: dict[str, str] | None = None) -> Path:
    """Where inductor keeps its cache for a process run with ``env``: as
    ``torch._inductor.runtime.cache_dir_utils.cache_dir`` decides it, without
    importing torch."""
    chosen = (os.environ if env is None else env).get("TORCHINDUCTOR_CACHE_DIR")
    if chosen:
        return Path(chosen).absolute()
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    return Path(tempfile.gettempdir()) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def is_whole_library(path: Path) -> bool:
    """Whether ``path`` holds a complete ELF shared library."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(_HEADER_BYTES)
            size = os.fstat(handle.fileno()).st_size
    except OSError:
        return True  # gone or unreadable: not ours to judge
    if len(header) < 52 or header[:4] != _ELF_MAGIC:
        return False
    is_64 = header[4] == 2
    order = "<" if header[5] == 1 else ">"
    if is_64:
        if len(header) < _HEADER_BYTES:
            return False
        phoff, shoff = struct.unpack_from(order + "QQ", header, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", header, 54)
    else:
        phoff, shoff = struct.unpack_from(order + "II", header, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", header, 42)
    return size >= max(phoff + phentsize * phnum, shoff + shentsize * shnum)


def unfinished_libraries(folder: Path, since: float, until: float | None = None) -> list[Path]:
    """Kernel libraries under ``folder`` written at or after ``since`` (a
    ``time.time()``), and before ``until`` if given, that are not whole."""
    if not folder.is_dir():
        return []
    found = []
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".so"):
                continue
            path = Path(root) / name
            try:
                written = path.stat().st_mtime
            except OSError:
                continue
            if written >= since and (until is None or written < until) and not is_whole_library(path):
                found.append(path)
    return sorted(found)


def _held_open(paths: list[Path]) -> set[str]:
    """Which of ``paths`` some live process has open."""
    import psutil  # a torchport dependency; imported here since worker environments may lack it

    wanted = {str(path) for path in paths}
    held: set[str] = set()
    for process in psutil.process_iter():
        try:
            held.update(wanted.intersection(opened.path for opened in process.open_files()))
        except (psutil.Error, OSError):
            continue
    return held


def remove_unfinished(env: dict[str, str] | None, since: float, until: float | None = None) -> list[Path]:
    """Delete the unfinished kernel libraries a process run with ``env`` left
    in inductor's cache between ``since`` and ``until`` and nobody has open; the
    paths deleted."""
    unfinished = unfinished_libraries(cache_folder(env), since, until)
    if not unfinished:
        return []
    held = _held_open(unfinished)
    removed = []
    for path in unfinished:
        if str(path) in held:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


_swept: set[Path] = set()


def sweep_once(env: dict[str, str] | None) -> list[Path]:
    """Once per cache folder and process: delete the libraries cut short more
    than a minute ago, whoever wrote them."""
    folder = cache_folder(env)
    if folder in _swept:
        return []
    _swept.add(folder)
    return remove_unfinished(env, since=0, until=time.time() - 60)
