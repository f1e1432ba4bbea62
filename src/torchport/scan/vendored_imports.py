"""Vendored code that imports itself by a name the installed package does not have.

A package that copies another project into a subfolder (``deep_image_matching/thirdparty/DeDoDe/``,
whose own package is ``.../DeDoDe/DeDoDe/``) often keeps that project's scripts, training code and
benchmarks, which import it by its original top-level name: ``from DeDoDe.utils import *``.
Nothing that imports the host package makes that name importable: the only ``DeDoDe`` the scanned
files hold sits inside the host package, and Python looks for a top-level name on ``sys.path``, not
beside the importing file.  Reached through the host, such a module fails at that import, before
any CUDA line below it runs.

A finding is lowered to info where all of these hold, in a package scanned whole:

- the finding's file imports, in an unconditional statement of its module body before the finding
  (not in ``try``, ``if`` or a function), a top-level name that is not the standard library's;
- every folder or module of that name among the scanned files lies inside a package (an
  ``__init__.py`` in its folder or above it, below the scanned folder), and one of them in a
  folder that is no package itself (the vendored project's own folder, ``thirdparty/DeDoDe/``) and
  also holds the importing file, deeper than that folder itself: the vendored project importing
  its own code from its scripts, benchmarks or training code (a script directly in that folder,
  run as ``python script.py``, finds the name through its own folder, and is left alone; a
  subpackage named for the library it wraps, ``models/gluonts/`` in a package, means the library);
- the name is not one every PyTorch environment has (``torch``, ``numpy``, ``transformers``...) nor
  a dependency that the scanned folders declare (a wheel's ``METADATA``, ``pyproject.toml``,
  ``setup.py``, ``setup.cfg``, ``requirements*.txt``, ``requirements/*.txt``, ``environment.yml``,
  ``Pipfile``, in the folder or one below it);
- nothing among the scanned files may put on ``sys.path`` a folder that holds the name (any
  folder or module of that name, a namespace folder only where it holds what the import needs
  below the name), or bind the name in ``sys.modules``:
  - every ``sys.path`` change (``append``, ``insert``, ``site.addsitedir``), ``cwd=`` of a call and
    ``os.chdir`` (a program run from a folder finds the names in it) is read to a folder, compared
    without case; a store into ``sys.path`` or a slice of it, ``extend``, ``from sys import path``,
    ``sys.path`` or ``sys.modules`` bound to a name or handed on, ``sys.meta_path`` or
    ``sys.path_hooks``, a module loader's ``load_module``, a ``sys.modules`` key the reader cannot
    read, or a ``sys.path`` entry it cannot read turns the reading off; so does a ``cwd=`` or
    ``os.chdir`` folder it cannot read, unless its function builds it only from its parameters or
    ``os.getcwd()``, never from ``__file__`` or the environment (``os.chdir(output_dir)``: the
    user's folder, not one the package ships);
  - a path built from ``__file__`` (``os.path.dirname``, ``join``, ``Path(...).parent`` and
    ``.parents[n]``, ``/``, ``joinpath``) and
    names bound once, in the module body, are followed; a relative string is read from the changing
    file's folder and from every folder above it in the scan, since its meaning depends on where
    the program runs (after an ``os.chdir`` in the file, from anywhere: the reading is off);
  - ``PYTHONPATH`` or pytest's ``syspath_prepend`` in a Python file, a ``.pth`` file, or
    ``PYTHONPATH``, pytest's ``pythonpath``, ``--doctest-modules`` or ``python_files`` in a shell
    script, Makefile, Dockerfile, ini, cfg, toml, yaml (CI workflows too), editor launch settings,
    Markdown, text file or notebook (there ``sys.path`` too) turns the reading off, and a path
    spelled there that names a folder holding the name (``working-directory:
    host/thirdparty/DeDoDe``, ``pushd``, a Makefile variable, ``pip install -e``), or a ``cd`` or
    ``install`` line naming it, keeps its findings;
  - pytest may not put such a folder there (a ``conftest.py`` in it, or a test module whose first
    folder up without an ``__init__.py`` is it).

What it claims is narrower than "never runs": the vendored project still runs as its own
project, from its own folder (``python -m experiments.train`` there) or installed on its own.
Nothing that imports the host package reaches the module.
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable

from torchport.scan import files
from torchport.scan.detectors.syntax import last_name
from torchport.scan.model import FileResult
from torchport.scan.packages import LIBRARY_NAMES
from torchport.scan.policy import still_hot
from torchport.scan.python import parse_whole

_IMPORT_LINE = re.compile(r"^(?:import|from)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_PATH_CHANGE = re.compile(rb"sys\b|addsitedir|chdir|cwd|load_module|load_source|load_package")
_DECLARATIONS = ("METADATA", "PKG-INFO", "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "environment.yml",
                 "environment.yaml")


def declared_dependencies(roots: list[str]) -> str:
    """The text of the dependency declarations directly in the scanned folders or one folder down
    (a wheel's ``*.dist-info/METADATA``, a checkout's ``pyproject.toml``, ``requirements*.txt`` or
    ``requirements/*.txt``, a conda ``environment.yml``), lower case with ``_`` read as ``-``."""
    texts = []
    for root in roots:
        for folder in (root, *(os.path.join(root, d) for d in _listdir(root))):
            for name in _listdir(folder):
                if name in _DECLARATIONS or (name.endswith(".txt") and (
                        name.startswith("requirements") or os.path.basename(folder) == "requirements")):
                    try:
                        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
                            texts.append(handle.read(1_000_000))
                    except OSError:
                        continue
    return "\n".join(texts).lower().replace("_", "-")


def _listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    except OSError:
        return []


def _declared(name: str, declarations: str) -> bool:
    word = re.escape(name.lower().replace("_", "-"))
    return re.search(rf"(?<![\w-]){word}(?![\w-])", declarations) is not None  # `.../DeDoDe.git` too


def _top_level_imports(tree: ast.Module) -> list[tuple[str, int, str, tuple[str, ...]]]:
    """(top-level name, line, the statement, what it needs below the name: ``utils`` of ``from
    DeDoDe.utils import f``, or each of ``a, b`` of ``from DeDoDe import a, b``; none for ``import
    DeDoDe``) of each absolute import in the module body itself."""
    found: list[tuple[str, int, str, tuple[str, ...]]] = []
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            wanted = [(alias.name.split(".")[0], tuple(alias.name.split(".")[1:2])) for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            parts = statement.module.split(".")
            below = tuple(parts[1:2]) if len(parts) > 1 else tuple(a.name for a in statement.names if a.name != "*")
            wanted = [(parts[0], below)]
        else:
            continue
        found.extend((name, statement.end_lineno or statement.lineno, ast.unparse(statement), below)
                     for name, below in wanted if name not in LIBRARY_NAMES)
    return found


class _Layout:
    """Where each name the scanned Python files could be imported by lies, and which folders are
    packages."""

    def __init__(self, paths: list[str], root_of: Callable[[str], str | None]) -> None:
        self.places: dict[str, set[str]] = {}  # name -> folders or modules of that name
        self._root_of = root_of
        self._inside: dict[str, bool] = {}
        self._parents_of: dict[str, frozenset[str] | None] = {}
        self._holders: dict[tuple[str, tuple[str, ...]], frozenset[str]] = {}
        for path in paths:
            root = root_of(path)
            if root is None:
                continue
            self.places.setdefault(os.path.basename(path)[:-3], set()).add(path)
            folder = os.path.dirname(path)
            while folder.startswith(root + os.sep):
                self.places.setdefault(os.path.basename(folder), set()).add(folder)
                folder = os.path.dirname(folder)

    def inside_package(self, folder: str) -> bool:
        """An ``__init__.py`` in ``folder`` or a folder above it, below the scanned folder."""
        if folder not in self._inside:
            root = self._root_of(folder + os.sep + "x")
            here = folder
            found = False
            while root is not None and here.startswith(root + os.sep):
                if os.path.exists(os.path.join(here, "__init__.py")):
                    found = True
                    break
                here = os.path.dirname(here)
            self._inside[folder] = found
        return self._inside[folder]

    def holders(self, name: str, below: tuple[str, ...]) -> frozenset[str]:
        """Every folder that holds a module, a package or a namespace folder ``name`` from which
        the import can take what it needs ``below`` the name (a namespace folder without the
        submodule fails the import, as ``deep_image_matching/thirdparty/DeDoDe/`` does for
        ``DeDoDe.utils``, which sits one folder further down)."""
        if (name, below) in self._holders:
            return self._holders[(name, below)]
        found = set()
        for place in self.places.get(name, ()):
            namespace = os.path.isdir(place) and not os.path.exists(os.path.join(place, "__init__.py"))
            if not namespace or not below or any(
                    os.path.exists(os.path.join(place, part)) or os.path.exists(os.path.join(place, part + ".py"))
                    for part in below):
                found.add(os.path.dirname(place))
        self._holders[(name, below)] = frozenset(found)
        return self._holders[(name, below)]

    def _parents(self, name: str) -> frozenset[str] | None:
        """The folders holding a place of ``name``, if every one lies inside a package."""
        if name not in self._parents_of:
            parents = frozenset(os.path.dirname(p) for p in self.places.get(name, ()))
            self._parents_of[name] = parents if parents and all(map(self.inside_package, parents)) else None
        return self._parents_of[name]

    def vendored_home(self, name: str, importer: str) -> str | None:
        """The vendored project's folder whose ``name`` the importing file means: a folder above
        the importer's own, no package itself, holding a place of ``name``, where every place of
        ``name`` lies inside a package and none in the importer's own folder; else None."""
        parents = self._parents(name)
        folder = os.path.dirname(importer)
        if parents is None or folder in parents:
            return None  # (the importer's own folder: run as a script, it comes first on sys.path)
        while folder != os.path.dirname(folder):
            folder = os.path.dirname(folder)
            if folder in parents:
                # a project's own folder, not a package: `thirdparty/DeDoDe/` beside its `setup.py`;
                # a package's subpackage named for the library it wraps (`models/gluonts/`,
                # `utils/ignite/`) sits in a package, and its `import gluonts` means the library
                return None if os.path.exists(os.path.join(folder, "__init__.py")) else folder
        return None


class _PathReader:
    """What a file's ``sys.path`` changes may add, as folders (None: it cannot be read)."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        # a name bound once in the whole file, by a plain assignment of the module body: bound in
        # a branch, a loop or a function as well, it may hold something else where it is read
        bindings: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bindings[node.id] = bindings.get(node.id, 0) + 1
            elif isinstance(node, ast.arg):
                bindings[node.arg] = bindings.get(node.arg, 0) + 1
        self.assigned: dict[str, ast.expr] = {
            statement.targets[0].id: statement.value for statement in tree.body
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and bindings.get(statement.targets[0].id) == 1}
        self._depth = 0

    def folder(self, node: ast.expr) -> tuple[str, bool] | None:
        """(a path, whether it is relative to where the program runs) for an expression."""
        self._depth += 1
        try:
            return self._folder(node) if self._depth < 12 else None
        finally:
            self._depth -= 1

    def _folder(self, node: ast.expr) -> tuple[str, bool] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, not os.path.isabs(node.value)
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return self.path, False
            value = self.assigned.get(node.id)
            return self.folder(value) if value is not None else None
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            inner = self.folder(node.value)
            return (os.path.dirname(inner[0]), inner[1]) if inner else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self._join([node.left, node.right])
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) and node.slice.value >= 0):
            inner = self.folder(node.value.value)  # `Path(__file__).parents[1]`
            if inner is None:
                return None
            folder = inner[0]
            for _ in range(node.slice.value + 1):
                folder = os.path.dirname(folder)
            return folder, inner[1]
        if isinstance(node, ast.JoinedStr):
            return self._join([v.value if isinstance(v, ast.FormattedValue) else v for v in node.values], glue="")
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name in ("os.path.join", "path.join", "join"):
                return self._join(node.args)
            if method == "joinpath" and isinstance(node.func, ast.Attribute):
                return self._join([node.func.value, *node.args])
            if len(node.args) == 1 and name in ("os.path.dirname", "path.dirname", "dirname"):
                inner = self.folder(node.args[0])
                return (os.path.dirname(inner[0]), inner[1]) if inner else None
            if len(node.args) == 1 and name in ("str", "Path", "pathlib.Path", "os.path.abspath", "os.path.realpath",
                                                "os.path.normpath", "os.fspath", "abspath", "realpath"):
                return self.folder(node.args[0])
            if not node.args and method in ("resolve", "absolute") and isinstance(node.func, ast.Attribute):
                return self.folder(node.func.value)
        return None

    def _join(self, parts: list[ast.expr], glue: str = "/") -> tuple[str, bool] | None:
        read = [self.folder(part) for part in parts]
        if not read or any(r is None for r in read):
            return None
        first = read[0]
        assert first is not None
        text = first[0]
        for part in read[1:]:
            assert part is not None
            text = part[0] if os.path.isabs(part[0]) else text + glue + part[0]
        return text, first[1]


# `from sys import path`, `from site import addsitedir as add`: changes under other names
_PATH_IMPORTS = frozenset({("sys", "path"), ("sys", "modules"), ("sys", "meta_path"), ("sys", "path_hooks"),
                           ("sys", "*"), ("site", "addsitedir"), ("site", "*")})
_MODULE_LOADS = frozenset({"load_module", "load_source", "load_compiled", "load_dynamic", "load_package"})
# Reads of sys.path or sys.modules handed to these change nothing; handed anywhere else, they may.
_READING_CALLS = frozenset({"len", "print", "list", "tuple", "set", "sorted", "str", "repr", "reversed", "enumerate",
                            "any", "all", "iter"})
_SYS_PATH_READS = frozenset({"remove", "index", "count", "copy", "pop", "clear", "__contains__", "__iter__",
                             "__len__"})


def _folders_added(path: str, tree: ast.Module, cwd_choices: list[str]) -> tuple[list[str], set[str]] | None:
    """Every folder the file's ``sys.path`` changes may add, and the names its ``sys.modules``
    stores bind (``sys.modules["DeDoDe"] = ...``); None where one cannot be read: a store into
    ``sys.path`` or a slice of it, ``from sys import path``, a call other than ``append``,
    ``insert`` or ``addsitedir`` with a folder the reader follows, a ``sys.modules`` key it
    cannot read."""
    reader = _PathReader(path, tree)
    sys_names = {"sys"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sys_names.update(alias.asname for alias in node.names if alias.name == "sys" and alias.asname)
        elif isinstance(node, ast.ImportFrom) and any(
                (node.module, alias.name) in _PATH_IMPORTS for alias in node.names):
            return None
        elif isinstance(node, ast.Call) and last_name(node.func) in _MODULE_LOADS:
            return None  # `SourceFileLoader("DeDoDe", ...).load_module()` binds it in sys.modules
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    if any(isinstance(n, ast.Call) and last_name(n.func) == "chdir" for n in ast.walk(tree)):
        cwd_choices = []  # after `os.chdir`, a relative path may be read from anywhere: unreadable
    added: list[str] = []
    aliased: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and last_name(node.func) == "addsitedir":
            if not node.args or (read := reader.folder(node.args[0])) is None:
                return None
            added.extend(_resolved(read, cwd_choices))
            continue
        if isinstance(node, ast.Call) and (last_name(node.func) == "chdir" or any(
                keyword.arg == "cwd" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None)
                for keyword in node.keywords)):
            # a program run from a folder (`python -m` there, `os.chdir`) finds the names in it
            target = node.args[0] if last_name(node.func) == "chdir" and node.args else next(
                (k.value for k in node.keywords if k.arg == "cwd"), None)
            if target is not None and (read := reader.folder(target)) is not None:
                added.extend(_resolved(read, cwd_choices))
            elif target is None or not _from_the_run(target, parents):
                return None
            continue
        if isinstance(node, ast.Attribute) and node.attr in ("meta_path", "path_hooks") and (
                ast.unparse(node.value).split(".")[-1] in sys_names):
            return None  # a finder of the file's own may import any name
        if not (isinstance(node, ast.Attribute) and node.attr in ("path", "modules")
                and ast.unparse(node.value).split(".")[-1] in sys_names):
            continue
        parent = parents.get(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)) or (
                isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, (ast.Store, ast.Del))):
            if node.attr == "modules" and isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
                key = parent.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    aliased.add(key.value.split(".")[0])
                    continue
                if isinstance(key, ast.Name) and key.id == "__name__":
                    continue  # a module replacing itself (a lazy module)
            return None
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            if isinstance(parent, (ast.Compare, ast.comprehension, ast.For, ast.FormattedValue, ast.Expr)) or (
                    isinstance(parent, ast.Subscript) and parent.value is node) or (
                    isinstance(parent, ast.Call) and last_name(parent.func) in _READING_CALLS):
                continue  # a read: `x in sys.path`, `len(sys.path)`, `sys.modules["x"]`
            return None  # bound to a name or handed on (`_path = sys.path`): changed where it is not seen
        call = parents.get(parent)
        method = parent.attr
        if node.attr == "modules":
            if method in ("setdefault", "__setitem__") and isinstance(call, ast.Call) and call.args and isinstance(
                    call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                aliased.add(call.args[0].value.split(".")[0])
            elif method in ("update", "setdefault", "__setitem__"):
                return None
            continue
        if method in _SYS_PATH_READS:
            continue
        if method in ("append", "insert") and isinstance(call, ast.Call) and call.func is parent and call.args:
            read = reader.folder(call.args[-1])
            if read is None:
                return None
            added.extend(_resolved(read, cwd_choices))
            continue
        return None  # `extend`, `__setitem__`, `sys.path.__iadd__`: not read
    return added, aliased


def _from_the_run(target: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether a folder the reader cannot follow comes from the run, not from the package: built
    only from its function's parameters (``os.chdir(output_dir)``) and names its function binds
    only from them or from ``os.getcwd()``, never from ``__file__`` or the environment."""
    function = parents.get(target)
    while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        function = parents.get(function)
    if function is None:
        return False
    arguments = function.args
    allowed = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    allowed |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    helpers = {"os", "Path", "pathlib", "str", "getcwd", "cwd"}

    def from_the_run(node: ast.AST) -> bool:
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        settings = any(isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv") for n in ast.walk(node))
        return "__file__" not in names and names <= allowed | helpers and not settings

    stores = [n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                                              ast.With, ast.NamedExpr))]
    for _ in range(3):  # names bound from names bound from parameters
        for store in stores:
            value = getattr(store, "value", None)
            targets = [n.id for n in ast.walk(store) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
            if isinstance(store, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and value is not None and from_the_run(value):
                allowed |= set(targets)
    bound_otherwise = {n.id for store in stores if not (
        isinstance(store, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and store.value is not None
        and from_the_run(store.value)) for n in ast.walk(store) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return from_the_run(target) and not ({n.id for n in ast.walk(target) if isinstance(n, ast.Name)} & bound_otherwise)


def _resolved(read: tuple[str, bool], cwd_choices: list[str]) -> list[str]:
    """The folders a path read from the source may be: a relative one from every folder the
    program may run in (none known: the root of the file system, which holds every folder)."""
    text, relative = read
    if relative and not cwd_choices:
        return [os.sep]
    return [os.path.normpath(os.path.join(base, text)) for base in (cwd_choices if relative else [""])]


def lower_vendored_self_imports(work, results: list[tuple[FileResult, int]], read: Callable[[object], str | None],
                                whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower the findings of files that import their vendored project by a name the installed
    package lacks (see the module's docstring)."""
    # the files under a linked folder carry its resolved path
    roots = sorted({root for given in roots for root in (os.path.abspath(given), os.path.realpath(given))})
    by_display = {job.display: job for job in work if job.kind == "python"}
    pending = [(result, by_display[result.path]) for result, _ in results
               if result.path in by_display and any(still_hot(f) for f in result.findings)
               and whole_package(by_display[result.path].path)]
    if not pending:
        return

    def root_of(path: str) -> str | None:
        absolute = os.path.abspath(path)
        return max((r for r in roots if absolute.startswith(r.rstrip(os.sep) + os.sep)), key=len, default=None)

    paths = [os.path.abspath(job.path) for job in by_display.values()]
    layout = _Layout(paths, root_of)
    candidates = []  # (result, importing file, [(name, line, statement, home folder, what it needs below)])
    for result, job in pending:
        text = read(job)
        importer = os.path.abspath(job.path)
        # parsed only where a line of the module body imports such a name (most files import none)
        if text is None or not any(name not in LIBRARY_NAMES and layout.vendored_home(name, importer) is not None
                                   for name in set(_IMPORT_LINE.findall(text))):
            continue
        tree = parse_whole(text)
        if tree is None:
            continue
        homes = [(name, line, statement, home, below) for name, line, statement, below in _top_level_imports(tree)
                 if (home := layout.vendored_home(name, importer)) is not None]
        if homes:
            candidates.append((result, job, homes))
    if not candidates:
        return
    declarations = declared_dependencies(roots)
    candidates = [(result, job, kept) for result, job, homes in candidates
                  if (kept := [h for h in homes if not _declared(h[0], declarations)])]
    commands = _settings(roots) if candidates else None
    if commands is None:
        return
    added: list[str] = []
    aliased: set[str] = set()
    for job, data in files.read_bytes(by_display.values()):
        if data is None:
            return  # a file that cannot be read may change sys.path
        if b"syspath_prepend" in data or b"PYTHONPATH" in data:
            return  # a test or a launcher that sets the path another way
        if not _PATH_CHANGE.search(data):
            continue
        path = os.path.abspath(job.path)
        tree = parse_whole(data.decode("utf-8", "replace"))
        if tree is None:
            return
        root = root_of(path) or os.path.dirname(path)
        choices, folder = [], os.path.dirname(path)
        while folder == root or folder.startswith(root + os.sep):
            choices.append(folder)
            folder = os.path.dirname(folder)
        found = _folders_added(path, tree, choices)
        if found is None:
            return  # a change that could add any folder
        added.extend(found[0])
        aliased.update(found[1])
    # compared without case: on macOS and Windows, `thirdparty/dedode` is `thirdparty/DeDoDe`
    reachable = {os.path.normcase(os.path.normpath(folder)).lower() for folder in added}
    if os.sep in reachable:
        return  # a relative path after `os.chdir`: any folder
    tests = _pytest_folders(paths)
    entered = _entered(commands)

    def blocked(folder: str) -> bool:
        return folder.lower() in reachable or folder in tests or os.path.basename(folder).lower() in entered

    blocked_names: dict[tuple[str, tuple[str, ...]], bool] = {}
    for result, _, homes in candidates:
        usable = []
        for name, line, statement, home, below in homes:
            if (name, below) not in blocked_names:
                blocked_names[(name, below)] = name in aliased or any(map(blocked, layout.holders(name, below)))
            if not blocked_names[(name, below)]:
                usable.append((name, line, statement, home))
        if not usable:
            continue
        name, line, statement, home = min(usable, key=lambda h: h[1])
        shown = os.path.relpath(os.path.join(home, name), root_of(home + os.sep + "x") or home)
        host = os.path.relpath(home, root_of(home + os.sep + "x") or home)
        for finding in result.findings:
            if still_hot(finding) and finding.line > line:
                finding.lower_to_info(
                    f"past `{statement[:80]}` (line {line}): the scanned files hold `{name}` only inside a package "
                    f"(here at {shown}), so nothing that imports the package makes `{name}` importable: this "
                    f"module fails at that import, before any CUDA line, unless it is run as its own project "
                    f"from {host} or {name} is installed on its own")


def _settings(roots: list[str]) -> list[bytes] | None:
    """The command lines that enter a folder or install one (``cd ...``, ``pip install ...``) in the
    scanned folders' shell scripts, Makefiles, Dockerfiles, CI workflows, Markdown, text files and
    notebooks, lower case; None where one of those files, an ini, cfg or toml file, or an editor's
    launch settings name ``PYTHONPATH`` or pytest's ``pythonpath``, ``--doctest-modules`` or
    ``python_files`` (pytest then imports files the reading does not count), a notebook changes
    ``sys.path``, or a ``.pth`` file exists."""
    commands: list[bytes] = []
    for root in roots:
        for folder, folders, names in os.walk(root):
            folders[:] = [f for f in folders if f not in _NOT_SETTINGS]
            for name in names:
                if name.endswith(".pth"):
                    return None
                if not (name.endswith(_SETTING_FILES) or name in _SETTING_NAMES or (
                        name.endswith(".json") and os.path.basename(folder) == ".vscode")):
                    continue
                try:
                    with open(os.path.join(folder, name), "rb") as handle:
                        text = handle.read(2_000_000).lower()
                except OSError:
                    return None
                if any(word in text for word in _PATH_SETTINGS) or (name.endswith(".ipynb") and b"sys.path" in text):
                    return None
                commands.extend(line for line in text.splitlines() if b"/" in line or b"\\" in line
                                or b"cd " in line or b"install" in line)
    return commands


_SETTING_FILES = (".sh", ".bash", ".zsh", ".ini", ".cfg", ".toml", ".yaml", ".yml", ".env", ".mk", ".md", ".rst",
                  ".ipynb", ".txt")
_SETTING_NAMES = frozenset({"Makefile", "makefile", "GNUmakefile", "Dockerfile", ".env", ".envrc", "Justfile",
                            "Procfile"})
_PATH_SETTINGS = (b"pythonpath", b"doctest-modules", b"python_files", b"doctest_modules")
_NOT_SETTINGS = frozenset({".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__",
                           "site-packages"})


def _entered(commands: list[bytes]) -> frozenset[str]:
    """The folder names the scanned settings may enter, install or put on a path: each part of a
    path spelled there (``working-directory: host/thirdparty/DeDoDe``, ``VENDOR :=
    host/thirdparty/DeDoDe``, ``pushd thirdparty/DeDoDe``), and every word of a line with ``cd `` or
    ``install``; lower case."""
    words: set[str] = set()
    for line in commands:
        for word in re.split(rb"[\s&;|()'\"=:,]+", line):
            if b"/" in word or b"\\" in word or b"cd " in line or b"install" in line:
                words.update(part.decode("utf-8", "replace") for part in re.split(rb"[/\\]+", word) if part)
    return frozenset(words)


def _pytest_folders(paths: list[str]) -> set[str]:
    """The folders pytest, run on the scanned files, puts on ``sys.path`` (its default ``prepend``
    import mode): a ``conftest.py``'s own folder, and for a test module the first folder up
    without an ``__init__.py``."""
    found = set()
    for path in paths:
        name = os.path.basename(path)
        if name == "conftest.py":
            found.add(os.path.dirname(path))
        elif name.startswith("test_") or name.endswith("_test.py"):
            folder = os.path.dirname(path)
            while os.path.exists(os.path.join(folder, "__init__.py")) and os.path.dirname(folder) != folder:
                folder = os.path.dirname(folder)
            found.add(folder)
    return found
