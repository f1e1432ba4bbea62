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
import importlib.util
import os
import sysconfig

_TORCHPORT_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_script_root: list[str] = []  # the script's folder, once set_script ran


def set_script(path: str) -> None:
    """The script being run: a distribution holding it is the user's."""
    _script_root[:] = [os.path.dirname(os.path.realpath(path))]
    library_roots.cache_clear()
    is_user_file.cache_clear()


def _locations(name: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.realpath(p) for p in spec.submodule_search_locations]
    return [os.path.realpath(spec.origin)] if spec.origin and os.path.isabs(spec.origin) else []


@functools.cache
def library_roots() -> tuple[str, ...]:
    """Folders (and single-module files) that belong to the installation or an installed distribution."""
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    script_roots = _script_root
    try:
        owners = importlib.metadata.packages_distributions()
    except Exception:  # broken metadata: the installation's folders alone
        owners = {}
    for top_level in owners:
        for location in _locations(top_level):
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
