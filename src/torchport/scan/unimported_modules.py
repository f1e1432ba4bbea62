"""Findings in a module that nothing imports, in a package that chooses what it exports.

A package whose ``__init__.py`` imports from its own modules says which of them importing the
package runs.  A module it leaves out, that no other file imports, names or loads, runs only for a
user who imports it by its full name: torchkm's wheel ships ``cvkhuber.py`` beside the estimators
its ``__init__.py`` exports, with no file that imports it; alphapose's wheel ships
``utils/env.py`` without the launchers that imported it.  Judges called 12 of the 13 rows they read
in such modules wrong (docs/precision/round62.md).

An error or silent finding is lowered to info where all of these hold:

- the file is a module of a regular package (its folder has an ``__init__.py``), not
  ``__init__.py``, ``__main__.py``, ``setup.py``, ``conftest.py`` or a test (``test_*.py``,
  ``*_test.py``, ``tests/``, ``testing/``);
- the project is scanned from its root: the folder above the package, the nearest folder above
  that with a root marker (``pyproject.toml``, ``setup.py``, a ``*.dist-info``, ...) and the
  repository's root (``.git``), where entry points, tests and documents lie (DGL keeps
  ``python/setup.py`` and its tests in the repository's ``tests/``);
- the folder's ``__init__.py`` imports from a module of its own package other than a version or
  metadata module (``from .estimators import SVM``, ``from . import main``);
- no other file below the scanned folders, scanned or not, spells the module's name as a word:
  Python files excluded from the scan, stubs, ``.pyx``, notebooks, configs, documents, a wheel's
  ``METADATA``, Dockerfiles, Makefiles, shell, batch and CI scripts (``.github/``), pickles
  (``.pt``, ``.pkl``, whose classes unpickling imports), UTF-16 files; not package listings
  (``RECORD``, ``SOURCES.txt``), other binary files, version-control, environment and cache
  folders, nor anything but regular files (a named pipe would block);
- no scanned Python file finds modules at run time: a ``pkgutil`` walk; a lookup by a dotted name
  (``pydoc.locate``, ``pkgutil.resolve_name``, Hydra's ``_target_``, ``get_class``,
  ``import_string``); ``import_module`` or ``__import__`` of a name not written out, with a
  ``fromlist``, or under another name; ``find_spec``; a module loaded by its path
  (``spec_from_file_location``, ``run_path``) or run with ``exec`` from a file; a lazy module that
  imports what is asked of it (``LazyModule``, ``lazy_loader``, a module ``__getattr__``); a listing
  of the file's own folder (``os.listdir(os.path.dirname(__file__))``, ``glob`` of ``__file__``), or
  any listing in ``setup.py`` (console scripts built from a folder);
- the module is no program: it holds no ``if __name__ == "__main__":``, does no work at its top
  level (a call other than logging set-up, plain factories such as ``logging.getLogger`` or
  ``TypeVar`` and binding decorators, in a statement, an assignment, a decorator or a default; a
  loop; a ``with``), no string or comment of it names it (``uvicorn serve_predict:app`` in its
  docstring says how it is run), and it has no doctest examples (``>>>``: ``pytest
  --doctest-modules`` imports it).

A finding stays as it is whenever the reading is incomplete: a file that cannot be read or parsed,
a folder that cannot be listed, more than 20,000 files or 64 MB below the scanned folders, a text
file over 2 MB (a large checkpoint among them).  A user's own code that imports the module by its
full name is not among the scanned files; the reason says so.
"""
from __future__ import annotations

import ast
import functools
import io
import itertools
import os
import re
import tokenize
from collections.abc import Callable, Iterator
from typing import NamedTuple

from torchport.scan.cross_file_guards import (
    RUNS_AS_SCRIPT,
    ScannedFiles,
    dotted_module,
    finds_at_run_time,
)
from torchport.scan.detectors.shared import is_test_file
from torchport.scan.files import Unreadable, package_root, regular_file_bytes
from torchport.scan.gpu_test_names import project_root
from torchport.scan.model import FileResult
from torchport.scan.policy import still_hot

# Files that start something rather than being imported, and files tools import by their name.
NOT_MODULES = ("__init__.py", "__main__.py", "setup.py", "conftest.py")
# An `__init__.py` that imports only its version says nothing about which modules it exports.
_METADATA_MODULE = re.compile(r"_*(?:version|about|metadata|meta|info)_*")
_TEXT_TOKENS = frozenset({tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)})
# Top-level calls that only declare: logging set-up, plain factories and binding decorators (by
# their last name, or by their whole name where the last is common).
_DECLARING_CALLS = frozenset({"getLogger", "get_logger", "StreamHandler", "NullHandler", "Formatter", "setLevel",
                              "addHandler", "setFormatter", "addFilter", "filterwarnings", "simplefilter",
                              "TypeVar", "ParamSpec", "NewType", "namedtuple", "NamedTuple", "frozenset", "set",
                              "dict", "list", "tuple", "object", "field", "Path", "dataclass", "lru_cache", "cache",
                              "wraps", "total_ordering", "contextmanager", "no_grad", "inference_mode",
                              "enable_grad", "custom_fwd", "custom_bwd"})
_DECLARING_DOTTED = frozenset({"re.compile", "os.environ.get", "os.getenv"})
# More ways to find modules at run time than cross_file_guards reads for classes.
_LOADS_BY_NAME = re.compile(rb"\b(?:spec_from_file_location|SourceFileLoader|run_path|load_source|get_class"
                            rb"|get_method|import_string|get_obj_from_str|load_entry_point|find_spec|module_from_spec"
                            rb"|resolve_name)\b|\bfromlist\s*=|\b(?:import_module|__import__)\b(?!\s*\()"
                            rb"|\bresources\.(?:contents|files)\(|LazyModule|\blazy_loader\b|\blazy_import\s*\("
                            rb"|^def __getattr__\(", re.MULTILINE)
# Code run from a file read at run time (plugins); setup.py reads its version so, and is left to the listing.
_RUNS_A_FILE = re.compile(rb"\bexec\s*\(\s*(?:compile\s*\(|open\s*\(|[\w.]+\.read(?:_text)?\s*\(\s*\))")
_LISTS_A_FOLDER = re.compile(rb"\b(?:listdir|scandir|i?glob|iterdir|rglob|walk)\(")
_OWN_PLACE = re.compile(rb"\b__(?:file|path)__\b")
# Listings of a distribution's files: they name every module without importing any.
_LISTINGS = ("SOURCES.txt", "installed-files.txt", "RECORD")
# Folders that hold no file of the project (version control, environments, caches).
_NOT_PROJECT = frozenset({".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "node_modules",
                          "site-packages", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
# Binary files, which name no module: a pickle (`.pt`, `.pkl`) may, and is read like text.
_BINARY = (".bin", ".safetensors", ".npy", ".npz", ".h5", ".onnx", ".so", ".pyd", ".dll", ".dylib", ".a", ".o",
           ".pyc", ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".ico", ".pdf", ".zip", ".gz",
           ".tgz", ".bz2", ".xz", ".tar", ".whl", ".wav", ".mp3", ".flac", ".mp4", ".avi", ".mov", ".ttf", ".woff",
           ".woff2", ".db", ".sqlite", ".parquet", ".arrow")
_MAX_TEXT_FILE = 2_000_000
# Past this many names, a file's words are listed once rather than each name looked for.
FEW_NAMES = 20
WORD = re.compile(rb"\w+")
_MAX_FILES = 20_000
_MAX_BYTES = 64_000_000
_REASON = ("no file below the scanned folders imports or names module {module}, and its package's __init__.py "
           "imports other modules: it runs only for a user who imports it by its full name")


def lower_unimported_modules(work: list, results: list[tuple[FileResult, int]],
                             whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower the findings of package modules that nothing imports, names or loads."""
    files, scanned, candidates = package_modules_with_hot_findings(work, results, whole_package, roots)
    if not candidates:
        return
    by_folder: dict[str, list[str]] = {}
    for job in files.jobs:
        by_folder.setdefault(os.path.dirname(job.path), []).append(job.path)
    survivors = []
    for result, os_path in candidates:
        module, package = dotted_module(os_path)
        if (package and _exports_chosen(os.path.join(os.path.dirname(os_path), "__init__.py"), package, files)
                and not mentioned_elsewhere(module[-1], os_path, files, by_folder)
                and _no_program(os_path, module[-1], files)):
            survivors.append((result, os_path, module))
    if not survivors or any(finds_modules(job.path, files.data(job.path)) for job in files.jobs):
        return
    named = named_on_disk({module[-1] for _, _, module in survivors},
                          {os.path.realpath(p) for p in files.display}, scanned).named
    for result, _, module in survivors:
        if module[-1] in named:
            continue
        for finding in result.findings:
            if still_hot(finding):
                finding.lower_to_info(_REASON.format(module=".".join(module)))


def package_modules_with_hot_findings(work: list, results: list[tuple[FileResult, int]],
                                      whole_package: Callable[[str], bool], roots: list[str],
                                      ) -> tuple[ScannedFiles, list[str], list[tuple[FileResult, str]]]:
    """The scanned Python files, the scanned folders (as given and with links resolved), and each
    result with a hot finding in a module of a package scanned whole from its project's root, with
    its file's path: not a file of NOT_MODULES, not a test."""
    by_display = {job.display: job.path for job in work}
    # a pipe named `*.py` is skipped by the scan, and holds no source to read
    files = ScannedFiles([job for job in work if job.path.endswith(".py") and os.path.isfile(job.path)], roots)
    scanned = sorted({r for root in roots for r in (os.path.abspath(root), os.path.realpath(root))})
    found = []
    for result, _ in results:
        os_path = by_display.get(result.path, "")
        if (not os_path.endswith(".py") or os.path.basename(os_path) in NOT_MODULES
                or not any(still_hot(f) for f in result.findings)
                or is_test_file(files.relative(os_path)) or not whole_package(os_path)
                or not project_scanned(os_path, scanned)):
            continue
        found.append((result, os_path))
    return files, scanned, found


def project_scanned(os_path: str, scanned: list[str]) -> bool:
    """The folder above the package is scanned, and so are the project's root above it and the
    repository's (where entry points, tests and documents lie; a package in `python/` with its own
    `setup.py` keeps its tests in the repository's `tests/`), when they are found."""
    above = os.path.dirname(package_root(os_path))
    folders = (above, project_root(above) or above, _repository_root(above) or above)
    return all(any(folder == r or folder.startswith(r.rstrip(os.sep) + os.sep) for r in scanned) for folder in folders)


@functools.lru_cache(maxsize=1024)
def _repository_root(folder: str) -> str | None:
    """The nearest folder at or above ``folder`` that holds a version-control folder."""
    if any(os.path.exists(os.path.join(folder, marker)) for marker in (".git", ".hg", ".svn")):
        return folder
    above = os.path.dirname(folder)
    return None if above == folder else _repository_root(above)


def _exports_chosen(init_path: str, package: tuple[str, ...], files: ScannedFiles) -> bool:
    """The package's ``__init__.py`` imports from one of its own modules (a relative import, or an
    absolute one inside the package) other than a version or metadata module."""
    tree = files.tree(init_path)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(alias.name.split(".")[:len(package)] == list(package) and len(alias.name.split(".")) > len(package)
                   and not _METADATA_MODULE.fullmatch(alias.name.split(".")[len(package)]) for alias in node.names):
                return True
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        inside = (node.module or "").split(".")[:len(package)] == list(package)
        if node.level > 1 or (node.level == 0 and not inside):
            continue  # `from .. import x` reads the package above
        own = (node.module or "").split(".") if node.level else (node.module or "").split(".")[len(package):]
        own = [part for part in own if part]
        names = own[:1] if own else [alias.name for alias in node.names]  # `from . import main`
        if any(not _METADATA_MODULE.fullmatch(name) and name != "*" for name in names):
            return True
    return False


def mentioned_elsewhere(stem: str, os_path: str, files: ScannedFiles, by_folder: dict[str, list[str]]) -> bool:
    """Another scanned file spells ``stem`` as a word (or cannot be read). The module's own folder is
    read first, where an importer most often is, and the search stops at the first."""
    word = stem.encode()
    needle = re.compile(rb"(?<![\w])" + re.escape(word) + rb"(?![\w])")
    folder = os.path.dirname(os_path)
    others = (path for path in files.display if os.path.dirname(path) != folder)
    for path in itertools.chain(by_folder.get(folder, ()), others):
        if path == os_path:
            continue
        data = files.data(path)
        if data is None or (word in data and needle.search(data)):
            return True
    return False


def finds_modules(path: str, data: bytes | None) -> bool:
    """The file may import modules it does not name: see ``finds_at_run_time``; a module loaded by
    its path or by a dotted name; a file run with ``exec``; a listing of the file's own folder, or
    any listing in ``setup.py`` (console scripts built from a folder)."""
    if data is None or finds_at_run_time(data) or _LOADS_BY_NAME.search(data):
        return True
    setup = os.path.basename(path) == "setup.py"
    if not setup and _RUNS_A_FILE.search(data):
        return True
    return bool(_LISTS_A_FOLDER.search(data)) and (setup or bool(_OWN_PLACE.search(data)))


def _no_program(os_path: str, stem: str, files: ScannedFiles) -> bool:
    """The module is not run as a program: no ``__main__`` test, no work at its top level, no
    doctest, and its own text does not name it."""
    data = files.data(os_path)
    tree = files.tree(os_path)
    if data is None or tree is None or RUNS_AS_SCRIPT.search(data) or b">>>" in data:
        return False
    return not names_itself(data, stem) and all(_declares_only(statement) for statement in tree.body)


def names_itself(data: bytes, stem: str) -> bool:
    """A string or comment of the module spells its name (``uvicorn serve_predict:app``), or its
    text cannot be read into tokens."""
    word = re.compile(r"(?<![\w])" + re.escape(stem) + r"(?![\w])")
    try:
        return any(token.type in _TEXT_TOKENS and word.search(token.string)
                   for token in tokenize.tokenize(io.BytesIO(data).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return True


def _declares_only(statement: ast.stmt) -> bool:
    """Imports, definitions and assignments of values that call nothing but plain factories: what
    importing a library does, not what a script or a server module does."""
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        # a decorator or a default that calls something runs on import (`@app.post("/fit")`)
        header: list[ast.expr | None] = [*statement.decorator_list]
        if isinstance(statement, ast.ClassDef):
            header += [*statement.bases, *(keyword.value for keyword in statement.keywords)]
        else:
            header += [*statement.args.defaults, *statement.args.kw_defaults]
        return all(_calls_only_factories(node) for node in header if node is not None)
    if isinstance(statement, ast.Expr):
        return isinstance(statement.value, ast.Constant) or _calls_only_factories(statement.value)
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return statement.value is None or _calls_only_factories(statement.value)
    if isinstance(statement, ast.If):
        return all(map(_declares_only, statement.body)) and all(map(_declares_only, statement.orelse))
    if isinstance(statement, ast.Try):
        return all(_declares_only(s) for block in (statement.body, statement.orelse, statement.finalbody)
                   for s in block) and all(_declares_only(s) for h in statement.handlers for s in h.body)
    return False


def _calls_only_factories(node: ast.AST) -> bool:
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            function = call.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name not in _DECLARING_CALLS and ast.unparse(function) not in _DECLARING_DOTTED:
                return False
    return True


class OnDisk(NamedTuple):
    """The names asked for that files below the scanned folders spell, all of them where the
    reading was cut short (``complete`` False)."""
    named: set[str]
    complete: bool


def named_on_disk(stems: set[str], skipped: set[str], roots: list[str],
                  visit: Callable[[str, bytes], None] | None = None) -> OnDisk:
    """Which of ``stems`` a file below the scanned folders (other than ``skipped``, already read)
    spells as a word; every stem, not complete, when the folders hold too many files or bytes, a
    file that cannot be read or is too large, or a folder that cannot be listed.  ``visit`` sees
    the path and text of each file read."""
    found: set[str] = set()
    read = 0
    walk_failed: list[OSError] = []
    for count, path in enumerate(files_below(roots, walk_failed.append)):
        if count >= _MAX_FILES or read > _MAX_BYTES:
            return OnDisk(set(stems), False)
        name = os.path.basename(path)
        if name in _LISTINGS or name.lower().endswith(_BINARY) or os.path.realpath(path) in skipped:
            continue
        try:
            data = regular_file_bytes(path, _MAX_TEXT_FILE)
        except Unreadable:
            return OnDisk(set(stems), False)
        if data is None:
            continue
        read += len(data)
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 (Windows PowerShell writes it)
            data = data.decode("utf-16", errors="replace").encode()
        if visit is not None:
            visit(path, data)
        found |= spelled(stems - found, data)
        if found == stems and visit is None:
            break
    return OnDisk(set(stems), False) if walk_failed else OnDisk(found, True)


def spelled(names: set[str], data: bytes) -> set[str]:
    """The names among ``names`` that ``data`` spells as a word.  Past FEW_NAMES names, one listing
    of its words answers for the ASCII ones, and finds none with a character other than a letter, a
    digit or ``_`` (``my-utils``); each other name, and each of a few, is looked for alone."""
    if len(names) > FEW_NAMES:  # one pass over the words beats a search per name
        found = {word.decode() for word in set(WORD.findall(data))} & names
        looked_for = [name for name in names if not name.isascii()]
    else:
        found, looked_for = set(), list(names)
    return found | {name for name in looked_for if name.encode() in data and _bounded(name.encode()).search(data)}


@functools.lru_cache(maxsize=4096)
def _bounded(word: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"(?<![\w])" + re.escape(word) + rb"(?![\w])")


def files_below(roots: list[str], failed: Callable[[OSError], None]) -> Iterator[str]:
    """Every file below ``roots`` but in version-control, environment and cache folders (``.github``
    and ``.vscode`` are read), linked folders followed once each; ``failed`` hears of each folder
    that cannot be listed."""
    seen: set[str] = set()
    for root in roots:
        real = os.path.realpath(root)
        if real in seen or not os.path.isdir(root):
            continue
        seen.add(real)
        for folder, folders, names in os.walk(root, onerror=failed, followlinks=True):
            kept = []
            for child in folders:
                target = os.path.realpath(os.path.join(folder, child))
                if child not in _NOT_PROJECT and target not in seen:
                    seen.add(target)
                    kept.append(child)
            folders[:] = kept
            yield from (os.path.join(folder, n) for n in names)
