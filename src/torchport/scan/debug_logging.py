"""Is debug logging off by default?  ``if logger.isEnabledFor(logging.DEBUG):`` runs only with debug
logging on, and Python's logging leaves it off (the root logger's level is WARNING) unless a
program turns it on.  pyqtorch registers its NVTX markers only so.

What turns it on, read in a file and in every Python file of its project: everything under the
folder above its package (above ``src/`` in a src layout), so the package's scripts, tools and
examples beside it too:

- a call that sets a level, ``setLevel(...)`` or ``basicConfig(level=...)``, whose level says
  DEBUG, NOTSET, 10 or 0, or is a name or option whose stored value says so (``LOG_LEVEL =
  logging.DEBUG``, ``--log-level`` with the default ``"DEBUG"``, ``os.environ.get("LOGLEVEL",
  "DEBUG")``), or a name the file does not store (imported: unknown, so on);
- ``dictConfig`` of anything but a dict written in the file without such a level, and any
  ``fileConfig`` (the level is in another file).

A file that cannot be parsed, or a project too large to read (a package installed in
site-packages, whose folder above is every other package's), counts as turning it on.
"""
from __future__ import annotations

import ast
import functools
import os
import re

from torchport.scan.detectors.syntax import walk_nodes
from torchport.scan.files import package_root

# Where a level may be set: worth parsing the file for.
_SETS_LEVEL = re.compile(r"\b(?:setLevel|basicConfig|dictConfig|fileConfig)\b")

# A level that lets DEBUG through, in the source of a value.
_DEBUG_LEVEL = re.compile(r"(?i)\bdebug\b|\bnotset\b|(?<![\w.])(?:10|0)(?![\w.])")

# Methods that change a level's spelling, not its value.
_STRING_METHODS = frozenset({"upper", "lower", "strip", "casefold", "title", "capitalize"})

# Folders that hold no code of the package.
_SKIPPED = frozenset({".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages", ".tox"})

# A package with more Python files than this is not read (it counts as turning debug logging on).
_MAX_FILES = 5000


def is_debug_test(test: ast.expr) -> bool:
    """``logger.isEnabledFor(logging.DEBUG)`` (or ``DEBUG``, or 10)."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "isEnabledFor"
            and len(test.args) == 1 and not test.keywords):
        return False
    level = test.args[0]
    return ((isinstance(level, ast.Attribute) and level.attr == "DEBUG") or (isinstance(level, ast.Name) and level.id == "DEBUG")
            or (isinstance(level, ast.Constant) and type(level.value) is int and level.value == 10))


def _key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Levels:
    """The values a file stores under each name (assignments, argparse defaults), by source text."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.text = text
        self.stored: dict[str, list[ast.expr]] = {}
        for node in walk_nodes(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for item in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                        key = _key(item)
                        if key is not None:
                            self.stored.setdefault(key, []).append(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                names = [a.value.lstrip("-").replace("-", "_") for a in node.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                names += [k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)
                          and isinstance(k.value.value, str)]
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                for name in names:
                    self.stored.setdefault(name, []).append(default if default is not None else ast.Constant(None))

    def source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def says_debug(self, level: ast.expr, depth: int = 0) -> bool:
        """The level lets DEBUG through, or may: its text says so, or a name or option in it holds
        a value that does, or one the file does not store."""
        if _DEBUG_LEVEL.search(self.source(level)):
            return True
        for node in _values_named(level):
            values = self.stored.get(_key(node) or "")
            if values is None:
                return True  # imported, or stored elsewhere: unknown
            if depth < 2 and any(self.says_debug(v, depth + 1) for v in values):
                return True
        return False


def _values_named(level: ast.expr) -> list[ast.expr]:
    """The names and dotted attributes read as values in ``level`` (not called, not the prefix of
    a longer attribute; ``parser.parse_args().log_level`` is read by ``log_level``), other than the
    logging and os modules' own."""
    calls = {id(n.func) for n in walk_nodes(level) if isinstance(n, ast.Call)}
    # a prefix is no value of its own, but the receiver of a string method is: `args.log_level.upper()`
    inner = calls | {id(n.value) for n in walk_nodes(level) if isinstance(n, ast.Attribute)
                     and not (id(n) in calls and n.attr in _STRING_METHODS)}
    found: list[ast.expr] = []
    for node in walk_nodes(level):
        if not isinstance(node, (ast.Name, ast.Attribute)) or id(node) in inner:
            continue
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in ("logging", "os"):
            continue
        if not isinstance(root, ast.Name) and not isinstance(node, ast.Attribute):
            continue
        found.append(node)
    return found


@functools.lru_cache(maxsize=256)
def turns_debug_on(text: str) -> bool:
    """Whether the file may turn debug logging on.  Asked for every finding under a switch: kept."""
    if not _SETS_LEVEL.search(text):
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    levels: _Levels | None = None
    for node in walk_nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name == "fileConfig":
            return True
        if name == "setLevel":
            level = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "level"), None)
        elif name == "basicConfig":
            level = next((k.value for k in node.keywords if k.arg in ("level", None)), None)
        elif name == "dictConfig":
            level = node.args[0] if node.args else None
            levels = levels or _Levels(tree, text)
            written = [level] if isinstance(level, ast.Dict) else levels.stored.get(_key(level) or "", []) if level else []
            if not written or not all(isinstance(v, ast.Dict) for v in written):
                return True
        else:
            continue
        if level is None:
            continue
        levels = levels or _Levels(tree, text)
        if levels.says_debug(level):
            return True
    return False


def on_in_package(path: str) -> bool:
    """Whether any Python file of the project holding the file may turn debug logging on: the
    folder above its package (above ``src/`` in a src layout), its scripts, tools and examples
    beside the package included."""
    root = os.path.dirname(package_root(path))
    if os.path.basename(root) in ("src", "lib"):
        root = os.path.dirname(root)
    return _on_under(root)


@functools.lru_cache(maxsize=64)
def _on_under(root: str) -> bool:
    files: list[str] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [s for s in subfolders if s not in _SKIPPED and not s.startswith(".")]
        files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
        if len(files) > _MAX_FILES:
            return True
    for file in files:
        try:
            with open(file, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            return True
        if turns_debug_on(text):
            return True
    return False
