"""Which source files are the user's: the script's own, not a library's.

Script mode's redirects answer differently only to the user's frames, so
"user" must not be guessed from a path's shape.  A file is a library's when
it lies under the Python installation (``sysconfig``'s stdlib and
site-packages) or under the location of an installed distribution's
top-level package, found from the distribution metadata
(``importlib.metadata``): that covers editable installs and packages
installed outside site-packages.  A distribution that holds the script
itself is the user's own project (a script in a package installed with
``pip install -e .``), not a library.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import sysconfig
from pathlib import Path
from typing import Any

_TORCHPORT_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_script_root: list[str] = []  # the script's folder, once set_script ran


def set_script(path: str) -> None:
    """The script being run: a distribution holding it is the user's."""
    root = os.path.dirname(os.path.realpath(path))
    if _script_root == [root]:
        return
    _script_root[:] = [root]
    library_roots.cache_clear()
    is_user_file.cache_clear()


_MAPPING = re.compile(r"""['"][^'"]+['"]\s*:\s*['"]([^'"]+)['"]""")


def _distribution_locations(dist: Any) -> set[str]:
    """Where a distribution's code lies, from its RECORD alone (nothing is
    imported: finding a spec can run import hooks, e.g. setuptools' distutils
    shim): its top-level files and folders, the folders its ``.pth`` files
    add, and the source folders of an editable install's finder mapping."""
    found: set[str] = set()
    tops: set[str] = set()
    for entry in dist.files or []:
        parts = entry.parts
        if not parts or parts[0] == ".." or parts[0].endswith((".dist-info", ".egg-info", ".data")):
            continue
        if entry.suffix == ".pth" or (parts[0].startswith("__editable__") and entry.suffix == ".py"):
            try:
                text = Path(str(dist.locate_file(entry))).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if entry.suffix == ".pth":
                found.update(os.path.realpath(line.strip()) for line in text.splitlines()
                             if line.strip() and not line.startswith(("#", "import")) and os.path.isdir(line.strip()))
            else:
                found.update(os.path.realpath(path) for path in _MAPPING.findall(text) if os.path.isabs(path))
            continue
        tops.add(parts[0])
    found.update(os.path.realpath(str(dist.locate_file(top))) for top in tops)
    return found


@functools.cache
def library_roots() -> tuple[str, ...]:
    """Folders (and single-module files) that belong to the installation or an installed distribution."""
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    script_roots = _script_root
    try:
        distributions = list(importlib.metadata.distributions())
    except Exception:  # broken metadata: the installation's folders alone
        distributions = []
    for dist in distributions:
        try:
            locations = _distribution_locations(dist)
        except Exception:  # one distribution's broken RECORD does not hide the others
            continue
        for location in locations:
            if any(root == location or root.startswith(location + os.sep) or location.startswith(root + os.sep)
                   for root in script_roots):
                continue  # the user's own project, installed (or a name of the script's own modules)
            roots.add(location)
    return tuple(sorted(roots, key=len, reverse=True))


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """True for the user's source files: not the Python installation, not an
    installed distribution's package, not torchport itself."""
    if not filename or filename.startswith("<"):
        return False
    resolved = os.path.realpath(filename)
    if resolved.startswith(_TORCHPORT_ROOT + os.sep):
        return resolved.startswith(os.path.join(_TORCHPORT_ROOT, "builtin") + os.sep)
    return not any(resolved == root or resolved.startswith(root + os.sep) for root in library_roots())
