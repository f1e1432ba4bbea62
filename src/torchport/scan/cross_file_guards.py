"""CUDA guards that lie in another file than the finding they guard, and CUDA checks in tests
(round 33).

scan reads one file at a time; these passes run after every file is scanned, over the packages
scanned whole, and lower an error or silent finding to info only where the other scanned files
agree:

- **a module imported only under a CUDA check**: in the other Python files of the package (tests
  aside: they are not a user's path), every import of the module, and every other use of its name,
  lies in the body of ``if torch.cuda.is_available():`` (or a test that is false wherever
  ``is_available()`` is), and there is at least one such import.  A user without CUDA never
  imports it (hippynn's Triton and CuPy kernel modules).  Kept: a module that also runs as a
  script, one named in a string, a notebook, a config or an entry point (``pyproject.toml``,
  ``entry_points.txt``), and any module of a package that finds modules at run time
  (``pkgutil.iter_modules``, ``import_module`` of a name built from its parts).
- **a flag that only CUDA turns on, stored anywhere in the class hierarchy**: ``if self.use_gpu:``
  directly in a method, where every store of the attribute in the class, its bases, the classes
  derived from it and their bases (found by name across the scanned files, nested classes
  included) keeps it false without CUDA (``self.use_gpu = torch.cuda.is_available() and use_gpu``,
  or a store directly followed by ``assert not self.use_gpu or torch.cuda.is_available()``), and
  no scanned file stores it otherwise (on another object, in a function outside a class, by
  ``setattr`` or ``__dict__`` on another object, through a property, or names it in a string):
  torchreid's engines, whose base class narrows the flag.
- **a CUDA check in a test**: a silent TP003 in a test file (by its path below the scanned folder:
  a ``test``/``tests`` folder, ``test_*.py``, ``conftest.py``, or a ``*_test.py`` that imports a
  test framework and defines a test), outside an ``if`` in a class body (which decides whether
  methods exist): where CUDA is absent the test still runs, on the CPU.
  Ten of eleven judges since round 14 judged all 29 such findings incorrect.

Incomplete evidence keeps the finding: a file that cannot be read or parsed, a hierarchy of
more than 60 classes, a mention the reading does not account for.
"""
from __future__ import annotations

import ast
import io
import os
import re
import sys
import tokenize
from collections.abc import Callable, Iterator

from torchport.scan.detectors.syntax import bound_names, import_aliases, import_binds
from torchport.scan.files import Unreadable, regular_file_bytes
from torchport.scan.model import CrossFileHints, FileResult, Finding
from torchport.scan.policy import still_hot, worst_of
from torchport.scan.rules import CUDA_AVAILABILITY_CHECK

_CUDA_QUERY = re.compile(r"torch\.cuda\.(?:is_available|device_count)\(\)")
_IF_LINE = re.compile(r"([ \t]*)(?:el)?if\b")
_IMPORT_LINE = re.compile(r"[ \t]*(?:from\s+([\w.]+)\s+)?import\s+([\w., \t]+)")
# ``self.flag = torch.cuda.is_available() ...``, ``... and torch.cuda.is_available()``, or
# ``assert not self.flag or torch.cuda.is_available()``, read on the line of the query.
_CUDA_FLAG = re.compile(r"self\.(\w+)\s*=\s*\(?\s*torch\.cuda\.(?:is_available|device_count)\(\)"
                        r"|self\.(\w+)\s*=.*\band\s+\(?\s*torch\.cuda\.is_available\(\)"
                        r"|not\s+self\.(\w+)\s+or\s+torch\.cuda\.is_available\(\)")
# ``def is_triton_available():`` at the left margin: a function that may be such a helper.
_HELPER_DEFINITION = re.compile(r"^def[ \t]+(\w+)\(\)[^:\n]*:", re.MULTILINE)
_LEFT_MARGIN = re.compile(r"\n(?=[^\s#])")
# ``if is_triton_available():``: a test that may call a helper asking for CUDA (read across files).
# Found by its literal start, which re skips to (a pattern anchored at each line start is tried on
# every line: 0.5 s over the transformers tree); the line is checked to begin with it afterwards.
_HELPER_TEST = re.compile(r"if[ \t]+(\w+)\(\)[ \t]*(?:and\b[^\n]*)?:")
# Decorators that keep what a helper returns (``@functools.lru_cache``, ``@cache``).
_MEMOIZING = frozenset({"lru_cache", "cache"})
# How deep a helper's local names are followed to a CUDA query.
_HELPER_DEPTH = 3
# How many lines under a CUDA check are read for imports.
_BLOCK_LINES = 40
# Run as a script in any spelling, anywhere in the file (broader than reachability's test of a
# module's own ``if __name__ == "__main__":``): such a module is also a user's entry point.
RUNS_AS_SCRIPT = re.compile(rb"""__name__\s*==\s*["']__main__["']|["']__main__["']\s*==\s*__name__""")
# A package that finds its modules at run time: a registry walk, or an import of a built name.
FINDS_MODULES = re.compile(rb"\b(?:iter_modules|walk_packages)\(")
FINDS_MODULES_NEEDLES = (b"iter_modules", b"walk_packages")
_BUILT_IMPORT = re.compile(rb"\b(?:import_module|__import__|run_module)\(([^)\n]*)")
# Code that finds classes or modules at run time: a walk, a lookup by a dotted name, a config's target.
_FINDS_AT_RUN_TIME = re.compile(rb"__subclasses__|\bgetmembers\(|\bgetmodule\(|\bpydoc\b|\blocate\("
                                rb"|\binstantiate\(|\b_target_\b")
_IMPORTS_A_NAME = re.compile(rb"\b(?:import_module\(|__import__\(|run_module\(|sys\.modules\[|sys\.modules\.get\()"
                             rb"\s*([^)\],]*)")
_WRITTEN_OUT = re.compile(rb"""\s*(['"])[\w.]*\1\s*""")
_OWN_MODULE = re.compile(rb"\s*__name__\s*")
# Text files that may name a module for something to import: notebooks, configs, entry points.
_NAMING_FILES = (".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".json", ".txt", ".sh")
# Package listings that name every module without importing any.
_LISTINGS = ("SOURCES.txt", "installed-files.txt", "RECORD")
_MAX_NAMING_FILE = 2_000_000
# Attributes set by name on another object (``setattr(engine, k, v)``, ``engine.__dict__.update``).
_SETS_OTHERS_BY_NAME = re.compile(rb"\bsetattr\(\s*(?!self\s*,)|(?<!self)\.__dict__\s*(?:\.update|\[[^\]]*\]\s*=[^=])"
                                  rb"|\bvars\((?!self\))[^)]*\)\s*(?:\.update|\[[^\]]*\]\s*=[^=])")
# ... and on self, which matters in the files of the hierarchy.
_SETS_BY_NAME = re.compile(rb"\bsetattr\(|__dict__\s*(?:\.update|\[[^\]]*\]\s*=[^=])|\bvars\([^)]*\)\s*(?:\.update|\[)")
_WORD_BEFORE = re.compile(rb"(\w+)[ \t]*\Z")
_WORD_AFTER = re.compile(rb"[ \t]*(\w+)")
_ASSIGNED_ALIAS = re.compile(rb"=[ \t]*(?:[\w.]*\.)?(\w+)[ \t]*(?=\n)")
_SETS_BY_NAME_NEEDLES = (b"setattr(", b"__dict__", b"vars(")
_CLASS_HEADER = re.compile(rb"^[ \t]*class\s+(\w+)\s*(?:\(([^)]*)\))?", re.MULTILINE)
_MAX_HIERARCHY = 60
# A test file, read on its path below the scanned folder.
_TEST_PATH = re.compile(r"(^|/)tests?/|(^|/)(test_[^/]*|conftest)\.py$")


def unparsed(node: ast.AST) -> str:
    return ast.unparse(node)


def cuda_present(test: ast.expr, helper: Callable[[str], bool] | None = None) -> bool:
    """Whether ``test`` is false wherever CUDA is absent: ``torch.cuda.is_available()``,
    ``torch.cuda.device_count() > 0`` (``== 1``), a call without arguments of a function ``helper`` accepts,
    or an ``and`` with such an operand."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(cuda_present(value, helper) for value in test.values)
    if isinstance(test, ast.Call) and not test.args and not test.keywords:
        if helper is not None and isinstance(test.func, ast.Name) and helper(test.func.id):
            return True
        return unparsed(test.func) == "torch.cuda.is_available"
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call)
            and unparsed(test.left) == "torch.cuda.device_count()"):
        bound = test.comparators[0]
        if isinstance(bound, ast.Constant) and isinstance(bound.value, int) and not isinstance(bound.value, bool):
            return ((isinstance(test.ops[0], ast.Gt) and bound.value >= 0)
                    or (isinstance(test.ops[0], (ast.GtE, ast.Eq)) and bound.value >= 1))
    return False


def hints(text: str) -> CrossFileHints:
    """The words of the imports in the lines under the file's CUDA checks (module names), apart
    for a helper's checks; the functions that may be such helpers; the ``self`` attributes it
    stores from a CUDA query."""
    found = CrossFileHints()
    imported: set[str] = set()
    flags: set[str] = set()
    by_helper: dict[str, set[str]] = {}
    lines: list[str] | None = None
    tests = [(m, None) for m in _CUDA_QUERY.finditer(text)] + [
        (m, m.group(1)) for m in _HELPER_TEST.finditer(text) if _starts_line(text, m.start())]
    for query, helper in tests:
        start = text.rfind("\n", 0, query.start()) + 1
        end = text.find("\n", query.end())
        line = text[start:end if end >= 0 else len(text)]
        if helper is None:
            flags.update(name for match in _CUDA_FLAG.finditer(line) for name in match.groups() if name)
        opening = _IF_LINE.match(line)
        if opening is None:
            continue
        if lines is None:
            lines = text.split("\n")
        number = text.count("\n", 0, start)
        indent = len(opening.group(1).expandtabs())
        words = imported if helper is None else by_helper.setdefault(helper, set())
        for below in lines[number + 1:number + 1 + _BLOCK_LINES]:
            if below.strip() and len(below.expandtabs()) - len(below.expandtabs().lstrip()) <= indent:
                break
            statement = _IMPORT_LINE.match(below)
            if statement:
                words.update(re.findall(r"\w+", f"{statement.group(1) or ''} {statement.group(2)}"))
    found.gated_imports = sorted(imported - {"import", "as"})
    found.helper_gated_imports = {name: sorted(words - {"import", "as"}) for name, words in by_helper.items() if words}
    found.flags = sorted(flags)
    if "is_available" in text or "device_count" in text:
        found.cuda_helpers = [m.group(1) for m in _HELPER_DEFINITION.finditer(text)
                              if _CUDA_QUERY.search(_top_level_body(text, m.end()))]
    return found


def _top_level_body(text: str, start: int) -> str:
    """The text from ``start`` to the next line that begins at the left margin."""
    end = _LEFT_MARGIN.search(text, start)
    return text[start:end.start() if end else len(text)]


def _starts_line(text: str, position: int) -> bool:
    """Whether only indentation (and an ``el`` of ``elif``) precedes ``position`` on its line."""
    before = text[text.rfind("\n", 0, position) + 1:position].lstrip(" \t")
    return before in ("", "el")


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def ancestors(node: ast.AST, parents: dict[int, ast.AST]) -> Iterator[tuple[ast.AST, ast.AST]]:
    """(ancestor, the child of it on the way to ``node``), innermost first."""
    child = node
    while id(child) in parents:
        parent = parents[id(child)]
        yield parent, child
        child = parent


def _relative(os_path: str, roots: list[str]) -> str:
    """The file's path below the scanned folder that holds it ('/'-separated), or its name."""
    full = os.path.abspath(os_path)
    inside = [r for r in roots if full.startswith(r.rstrip(os.sep) + os.sep)]
    if not inside:
        return os.path.basename(full)
    return os.path.relpath(full, max(inside, key=len)).replace(os.sep, "/")


def is_test_path(relative: str) -> bool:
    return bool(_TEST_PATH.search(relative))


class ScannedFiles:
    """The scanned Python files, each read and parsed at most once, with an index of their class
    headers built on first use."""

    def __init__(self, jobs: list, roots: list[str]) -> None:
        self.jobs = jobs
        self.roots = roots
        self.display = {job.path: job.display for job in jobs}
        self._data: dict[str, bytes | None] = {}
        self._trees: dict[str, ast.Module | None] = {}
        self._parents: dict[str, dict[int, ast.AST]] = {}
        self._classes: dict[str, list[tuple[str, set[str]]]] | None = None
        self._derived: dict[str, set[str]] | None = None
        self._aliases: dict[str, set[str]] | None = None
        self._mentions: dict[bytes, list[str] | None] = {}
        self._searched: dict[tuple[str, re.Pattern[bytes]], bool] = {}
        self._anywhere: dict[re.Pattern[bytes], bool] = {}

    def data(self, os_path: str) -> bytes | None:
        """The file's bytes; None where it cannot be read, or is no regular file (a pipe would block)."""
        if os_path not in self._data:
            try:
                self._data[os_path] = regular_file_bytes(os_path, sys.maxsize)
            except Unreadable:
                self._data[os_path] = None
        return self._data[os_path]

    def tree(self, os_path: str) -> ast.Module | None:
        if os_path not in self._trees:
            data = self.data(os_path)
            try:
                self._trees[os_path] = ast.parse(data) if data is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._trees[os_path] = None
        return self._trees[os_path]

    def parents(self, os_path: str) -> dict[int, ast.AST]:
        """Each node's parent in the file's tree (empty where it does not parse), built once."""
        if os_path not in self._parents:
            tree = self.tree(os_path)
            self._parents[os_path] = {} if tree is None else _parents(tree)
        return self._parents[os_path]

    def relative(self, os_path: str) -> str:
        """The file's path below the scanned folder that holds it ('/'-separated), or its name."""
        return _relative(os_path, self.roots)

    def is_test(self, os_path: str) -> bool:
        return is_test_path(self.relative(os_path))

    def mentioning(self, word: bytes) -> list[str] | None:
        """The files that spell ``word`` as a word (None when one cannot be read)."""
        if word not in self._mentions:
            needle = re.compile(rb"(?<![\w])" + re.escape(word) + rb"(?![\w])")
            found: list[str] = []
            for job in self.jobs:
                data = self.data(job.path)
                if data is None:
                    self._mentions[word] = None
                    return None
                if word in data and needle.search(data):
                    found.append(job.path)
            self._mentions[word] = found
        return self._mentions[word]

    def search(self, os_path: str, pattern: re.Pattern[bytes], needles: tuple[bytes, ...] = ()) -> bool:
        """Whether ``pattern`` occurs in the file (an unreadable file counts as a match); when
        ``needles`` are given, a match must hold one of them (a quick test first)."""
        key = (os_path, pattern)
        if key not in self._searched:
            data = self.data(os_path)
            self._searched[key] = data is None or (
                (not needles or any(needle in data for needle in needles)) and pattern.search(data) is not None)
        return self._searched[key]

    def anywhere(self, pattern: re.Pattern[bytes], needles: tuple[bytes, ...] = ()) -> bool:
        if pattern not in self._anywhere:
            self._anywhere[pattern] = any(self.search(job.path, pattern, needles) for job in self.jobs)
        return self._anywhere[pattern]

    def derived(self) -> dict[str, set[str]] | None:
        """Base name -> the names of the classes whose headers name it."""
        if self._derived is None:
            index = self.classes()
            if index is None:
                return None
            derived: dict[str, set[str]] = {}
            for child, headers in index.items():
                for _, bases in headers:
                    for base in bases:
                        derived.setdefault(base, set()).add(child)
            self._derived = derived
        return self._derived

    def aliases(self, name: str) -> set[str]:
        """Other names the files may give the class: ``import Name as Other``, ``Other = Name``
        (read once over every file; any ``X as Y`` counts, which only adds names to follow)."""
        if self._aliases is None:
            aliases: dict[str, set[str]] = {}
            for job in self.jobs:
                data = self.data(job.path) or b""
                index = data.find(b" as ")
                while index >= 0:
                    before = _WORD_BEFORE.search(data, max(0, index - 200), index)
                    after = _WORD_AFTER.match(data, index + 4)
                    if before and after:
                        aliases.setdefault(before.group(1).decode(), set()).add(after.group(1).decode())
                    index = data.find(b" as ", index + 4)
                for match in _ASSIGNED_ALIAS.finditer(data):
                    start = data.rfind(b"\n", 0, match.start()) + 1
                    target = re.fullmatch(rb"[ \t]*(\w+)[ \t]*", data[start:match.start()])
                    if target:
                        aliases.setdefault(match.group(1).decode(), set()).add(target.group(1).decode())
            self._aliases = aliases
        return self._aliases.get(name, set()) - {name}

    def classes(self) -> dict[str, list[tuple[str, set[str]]]] | None:
        """Class name -> (file, the words of its bases) for every class header of the files."""
        if self._classes is None:
            index: dict[str, list[tuple[str, set[str]]]] = {}
            for job in self.jobs:
                data = self.data(job.path)
                if data is None:
                    return None
                if b"class" not in data:
                    continue
                for header in _CLASS_HEADER.finditer(data):
                    bases = set(re.findall(rb"\w+", header.group(2) or b""))
                    index.setdefault(header.group(1).decode(), []).append(
                        (job.path, {b.decode() for b in bases}))
            self._classes = index
        return self._classes


# -- modules imported only under a CUDA check ---------------------------------------------------

def dotted_module(os_path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The module's dotted name from its package's root (``("hippynn", "custom_kernels", "env_cupy")``),
    and the package its relative imports start from."""
    folder, name = os.path.split(os.path.abspath(os_path))
    package: list[str] = []
    while os.path.exists(os.path.join(folder, "__init__.py")):
        folder, part = os.path.split(folder)
        if not part:
            break
        package.insert(0, part)
    module = tuple(package) if name == "__init__.py" else (*package, name[:-3])
    return module, tuple(package)


def imported_modules(node: ast.Import | ast.ImportFrom, package: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The modules an import statement may load (each imported name taken as a module), relative
    imports read from ``package``."""
    if isinstance(node, ast.Import):
        return {tuple(alias.name.split(".")) for alias in node.names}
    module = from_module(node, package)
    return {module} | {module + (alias.name,) for alias in node.names}


def from_module(node: ast.ImportFrom, package: tuple[str, ...]) -> tuple[str, ...]:
    """The module ``from <module> import ...`` reads, a relative one resolved from ``package``."""
    base: tuple[str, ...] = ()
    if node.level:
        base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
    return base + tuple(node.module.split(".")) if node.module else base


def _cuda_check_over(node: ast.AST, parents: dict[int, ast.AST],
                     helper: Callable[[str], bool] | None = None) -> ast.expr | None:
    """The test of the innermost ``if`` whose body holds ``node`` and that is false without CUDA;
    a helper's name counts only where no function, lambda or class around the ``if`` binds it."""
    for ancestor, child in ancestors(node, parents):
        if not (isinstance(ancestor, ast.If) and child in ancestor.body):
            continue
        if cuda_present(ancestor.test, None if helper is None else unshadowed(helper, ancestor, parents)):
            return ancestor.test
    return None


def unshadowed(helper: Callable[[str], bool], statement: ast.AST,
               parents: dict[int, ast.AST]) -> Callable[[str], bool]:
    """``helper`` for the names no function, lambda or class around ``statement`` binds."""
    local: set[str] = set()
    for scope, _ in ancestors(statement, parents):
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            local |= bound_names(scope)
    return lambda name: name not in local and helper(name)


class CudaHelpers:
    """Functions every return of which is false wherever CUDA is absent (anemoi's
    ``is_triton_available()``: ``return triton_available and gpus_present``, with ``gpus_present =
    torch.cuda.is_available()``), by the name a file calls them: defined at the top of that file, or
    imported by name from a module of the same package among the scanned files."""

    def __init__(self, files: ScannedFiles) -> None:
        self.files = files
        self._modules: dict[str, list[str]] | None = None
        self._verdicts: dict[tuple[str, str], bool] = {}

    def in_file(self, os_path: str) -> Callable[[str], bool]:
        return lambda name: self.asks_for_cuda(os_path, name)

    def asks_for_cuda(self, os_path: str, name: str) -> bool:
        key = (os_path, name)
        if key not in self._verdicts:
            self._verdicts[key] = False  # a helper that reaches itself is no evidence
            self._verdicts[key] = self._read(os_path, name)
        return self._verdicts[key]

    def _read(self, os_path: str, name: str) -> bool:
        tree = self.files.tree(os_path)
        if tree is None or self._assigned_elsewhere(name):
            return False
        bindings = [s for s in module_statements(tree) if binds_name(s, name)]
        if len(bindings) != 1 or any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(tree)):
            return False  # not bound at the top of the file, bound twice, or rebound from a function
        statement = bindings[0]
        if isinstance(statement, ast.FunctionDef):
            functools_names = memoizing_names(tree)
            return (all(unparsed(d).split("(")[0] in functools_names for d in statement.decorator_list)
                    and torch_is_torch(tree) and "torch" not in bound_names(statement)
                    and returns_false_without_cuda(statement))
        if not isinstance(statement, ast.ImportFrom):
            return False
        alias = next(a for a in statement.names if (a.asname or a.name) == name)
        source = self._module_file(from_module(statement, dotted_module(os_path)[1]))
        return source is not None and self.asks_for_cuda(source, alias.name)

    def _assigned_elsewhere(self, name: str) -> bool:
        """Whether a scanned file stores an attribute of that name (``utils.has_gpu = ...``)."""
        return self.files.anywhere(re.compile(rb"\.\s*" + re.escape(name.encode()) + rb"\s*=(?!=)"), (name.encode(),))

    def _module_file(self, module: tuple[str, ...]) -> str | None:
        """The one scanned file whose path spells ``module`` (namespace packages included)."""
        if self._modules is None:
            self._modules = {}
            for job in self.files.jobs:
                self._modules.setdefault(os.path.splitext(os.path.basename(job.path))[0], []).append(job.path)
        if len(module) < 2:
            return None  # a bare `utils` may be any folder's on sys.path
        found = [p for p in self._modules.get(module[-1], []) if is_module_file(module, p)]
        return found[0] if len(found) == 1 else None


def module_statements(tree: ast.Module) -> list[ast.stmt]:
    """The statements that run at the top of the module, those in ``if``/``try``/``with`` blocks
    included (a fallback ``try: from fast import has_gpu`` rebinds a name)."""
    found: list[ast.stmt] = []
    pending = list(tree.body)
    while pending:
        statement = pending.pop()
        found.append(statement)
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field_name in ("body", "orelse", "finalbody", "handlers"):
                pending.extend(getattr(statement, field_name, None) or [])
    return found


def memoizing_names(tree: ast.Module) -> set[str]:
    """How the file spells functools' memoizing decorators (``functools.lru_cache``,
    ``lru_cache`` imported from functools)."""
    names: set[str] = set()
    for statement in module_statements(tree):
        if isinstance(statement, ast.Import):
            names |= {f"{a.asname or a.name}.{m}" for a in statement.names if a.name == "functools" for m in _MEMOIZING}
        elif isinstance(statement, ast.ImportFrom) and statement.module == "functools" and not statement.level:
            names |= {a.asname or a.name for a in statement.names if a.name in _MEMOIZING}
    return names


def torch_is_torch(tree: ast.Module) -> bool:
    """Every binding of ``torch`` at the top of the file is ``import torch`` (or ``import torch.x``)."""
    bindings = [s for s in module_statements(tree) if binds_name(s, "torch")]
    return bool(bindings) and all(isinstance(s, ast.Import) and all(
        a.asname is None or a.asname != "torch" for a in s.names) for s in bindings)


def is_module_file(module: tuple[str, ...], os_path: str) -> bool:
    """Whether the file at ``os_path`` is where ``module`` is imported from, read on its path
    (``a/b/c.py`` or ``a/b/c/__init__.py``), so that namespace packages without ``__init__.py``
    count too."""
    path = os.path.abspath(os_path).replace(os.sep, "/")
    spelled = "/" + "/".join(module)
    for ending in (spelled + ".py", spelled + "/__init__.py"):
        if path.endswith(ending):
            # the name must start where imports start: a folder that is not itself a package
            # (`import env_k` is not the package's kernels/env_k.py)
            above = path[:-len(ending)]
            return not os.path.exists(os.path.join(above, "__init__.py"))
    return False


def binds_name(statement: ast.stmt, name: str) -> bool:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name == name
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return name in import_binds(statement)
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(statement))


def returns_false_without_cuda(function: ast.FunctionDef) -> bool:
    """Every return of the function (one at least) gives a CUDA query, a local name bound once, at
    the top of its body, to one, an ``and`` with such an operand, or a false constant; no ``yield``."""
    own = list(_own_statements(function))
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)) for n in ast.walk(function)):
        return False  # a nested function's `nonlocal` rebinds the helper's names too
    stores: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
    others = bound_names(function, stores=False)  # parameters, imports, `except ... as`, captures
    bound = {s.targets[0].id: s.value for s in function.body
             if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
             and stores.get(s.targets[0].id) == 1 and s.targets[0].id not in others}
    returns = [n for n in own if isinstance(n, ast.Return)]
    return bool(returns) and all(r.value is not None and _false_without_cuda(r.value, bound) for r in returns)


def _false_without_cuda(value: ast.expr, bound: dict[str, ast.expr], depth: int = 0) -> bool:
    if depth > _HELPER_DEPTH:
        return False
    if isinstance(value, ast.Name) and value.id in bound:
        return _false_without_cuda(bound[value.id], bound, depth + 1)
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
        return any(_false_without_cuda(v, bound, depth + 1) for v in value.values)
    if isinstance(value, ast.Constant):
        return value.value is False or value.value is None
    return cuda_present(value)


def hot_modules(work: list, results: list[tuple[FileResult, int]], whole_package: Callable[[str], bool],
                roots: list[str], hot_of: Callable[[FileResult, str], list[Finding]],
                ) -> tuple[ScannedFiles, list[tuple[str, list[Finding]]]] | None:
    """The package's modules (not ``__init__.py``, in packages scanned whole) with findings ``hot_of``
    picks, and the scanned files; None where there are none or a registry walk may import any module."""
    by_display = {job.display: job.path for job in work}
    candidates = []
    for result, _ in results:
        os_path = by_display.get(result.path, "")
        if os_path.endswith(".py") and os.path.basename(os_path) != "__init__.py" and whole_package(os_path):
            hot = hot_of(result, os_path)
            if hot:
                candidates.append((os_path, hot))
    if not candidates:
        return None
    files = ScannedFiles([job for job in work if job.path.endswith(".py")], roots)
    if files.anywhere(FINDS_MODULES, FINDS_MODULES_NEEDLES):
        return None  # a registry walk may import any module of the package
    return files, candidates


def guard_places(found: list[str]) -> str:
    """The first three guarded imports, for a reason."""
    return ", ".join(found[:3]) + (" ..." if len(found) > 3 else "")


def lower_modules_imported_under_cuda(work: list, results: list[tuple[FileResult, int]],
                                      whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower the findings of modules the rest of the package imports only under a CUDA check."""
    helpers_named = {name for result, _ in results for name in result.hints.cuda_helpers}
    gated = {word for result, _ in results for word in result.hints.gated_imports} | {
        word for result, _ in results for name, words in result.hints.helper_gated_imports.items()
        if name in helpers_named for word in words}
    if not gated:
        return
    found_modules = hot_modules(work, results, whole_package, roots, lambda result, os_path: [
        f for f in result.findings if still_hot(f)] if os.path.splitext(os.path.basename(os_path))[0] in gated else [])
    if found_modules is None:
        return
    files, candidates = found_modules
    helpers = CudaHelpers(files)
    reach = ImportReach(files, roots)
    for os_path, hot in candidates:
        if files.is_test(os_path) or not reach.only_by_imports(os_path):
            continue
        module = dotted_module(os_path)[0]
        found = guarded_imports(module, os_path, files, cuda_guard(helpers))
        if not found:
            continue
        for finding in hot:
            finding.lower_to_info(f"module {'.'.join(module)} is imported only under a CUDA check "
                                  f"({guard_places(found)}): a user without CUDA never runs it")


class ImportReach:
    """Whether a module of the scanned package is reached only by the import statements a reading of
    the files can see (the caller checks once that no registry walk imports every module)."""

    def __init__(self, files: ScannedFiles, roots: list[str]) -> None:
        self.files = files
        self.roots = roots
        self._built_words: list[set[str]] | None = None
        self._naming: list[str] | None = None

    def only_by_imports(self, os_path: str) -> bool:
        """False for a module outside a package (a namespace one below a package counts), an unreadable
        one, one that also runs as a script, one an import of a built name may spell, and one a
        notebook, config or entry point names."""
        module = dotted_module(os_path)[0]
        data = self.files.data(os_path)
        in_package = len(module) >= 2 or os.path.exists(
            os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(os_path))), "__init__.py"))
        if not in_package or data is None or RUNS_AS_SCRIPT.search(data):
            return False
        if self._built_words is None:
            self._built_words = built_import_words(self.files)
        # a module of a namespace folder is named, in a built import, by the folders above it
        spelled = module if len(module) >= 2 else tuple(os.path.splitext(os.path.abspath(os_path))[0].split(os.sep)[-4:])
        if any(may_spell(words, spelled) for words in self._built_words):
            return False
        if self._naming is None:
            self._naming = naming_files(self.roots)
        return not named_in(self._naming, module[-1])


def finds_at_run_time(data: bytes | None) -> bool:
    """The file (None: unreadable) may find classes or modules at run time: a ``pkgutil`` walk,
    ``__subclasses__``, ``getmembers``, ``pydoc.locate``, Hydra's ``instantiate`` or ``_target_``, or
    ``import_module``, ``__import__``, ``run_module`` or ``sys.modules`` of a name not written out."""
    if data is None:
        return True
    if FINDS_MODULES.search(data) or _FINDS_AT_RUN_TIME.search(data):
        return True
    return imports_a_built_name(data)


def imports_a_built_name(data: bytes) -> bool:
    """``import_module``, ``__import__``, ``run_module`` or ``sys.modules`` of a name not written out."""
    return any(not (_WRITTEN_OUT.fullmatch(m.group(1)) or _OWN_MODULE.fullmatch(m.group(1)))
               for m in _IMPORTS_A_NAME.finditer(data))


def built_import_words(files: ScannedFiles) -> list[set[str]]:
    """For each import of a name built from parts (``import_module(f".kernels.env_{b}")``) in the
    files, the words of its literal pieces; a plain name is left to the string check."""
    found = []
    for job in files.jobs:
        data = files.data(job.path) or b""
        if b"import" not in data and b"run_module" not in data:
            continue
        for call in _BUILT_IMPORT.finditer(data):
            argument = call.group(1).strip()
            if not argument or re.fullmatch(rb"""(['"])[\w.]*\1\s*(?:,.*)?""", argument):
                continue  # a plain name: the string check reads it; a bare variable re-imports a name given
            pieces = re.findall(rb"""['"]([^'"]*)['"]""", argument)
            found.append({w.decode() for piece in pieces for w in re.findall(rb"\w+", piece)})
    return found


def may_spell(words: set[str], module: tuple[str, ...]) -> bool:
    """Whether a built name with these literal words may be ``module``: a word is its package's
    name or begins its name."""
    return any(w in module[:-1] or (len(w) >= 2 and module[-1].startswith(w)) for w in words)


def naming_files(roots: list[str]) -> list[str]:
    found = []
    for root in roots:
        for folder, _, names in os.walk(root):
            found += [os.path.join(folder, n) for n in names if n.endswith(_NAMING_FILES) and n not in _LISTINGS]
    return found


def named_in(paths: list[str], stem: str) -> bool:
    needle = re.compile(rb"(?<![\w])" + re.escape(stem.encode()) + rb"(?![\w])")
    for path in paths:
        try:
            data = regular_file_bytes(path, _MAX_NAMING_FILE)
        except Unreadable:
            return True  # too large or unreadable: it may name the module
        if data is not None and needle.search(data):
            return True
    return False


def _word_tokens(data: bytes, stem: str) -> tuple[int, bool] | None:
    """How many name tokens spell ``stem``, and whether a string holds it as a word."""
    word = re.compile(r"(?<![\w])" + re.escape(stem) + r"(?![\w])")
    names, in_string = 0, False
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type == tokenize.NAME and token.string == stem:
                names += 1
            elif token.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)) and word.search(
                    token.string):
                in_string = True
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return names, in_string


# What guards a statement in a file: the guard's description (``under `torch.cuda.is_available()```),
# or None where nothing around it guards it.
GuardOver = Callable[[ast.AST, dict[int, ast.AST], str], str | None]


def cuda_guard(helpers: CudaHelpers) -> GuardOver:
    """The innermost ``if`` around a statement that is false without CUDA, described."""
    def over(node: ast.AST, parents: dict[int, ast.AST], path: str) -> str | None:
        test = _cuda_check_over(node, parents, helpers.in_file(path))
        if test is None:
            return None
        through = "" if cuda_present(test) else ", a helper whose every return is false without CUDA"
        return f"under `{unparsed(test)}`{through}"
    return over


def guarded_imports(module: tuple[str, ...], os_path: str, files: ScannedFiles,
                    guard: GuardOver) -> list[str] | None:
    """Where the package's other files (tests aside) import ``module``, when every mention of its
    name there is an import of it or a use, each under a guard; None otherwise."""
    stem = module[-1]
    package_folder = os.path.basename(os.path.dirname(os.path.abspath(os_path)))
    mentioning = files.mentioning(stem.encode())
    if mentioning is None:
        return None
    checks: list[str] = []
    for path in mentioning:
        if path == os_path or files.is_test(path):
            continue  # a test's imports are not a user's path
        data = files.data(path) or b""
        tokens = _word_tokens(data, stem)
        tree = files.tree(path)
        if tokens is None or tokens[1] or tree is None:
            return None
        package = dotted_module(path)[1]
        parents = files.parents(path)
        # Without an import that spells it, the name is the file's own (a local `gt`), and only an
        # attribute of the module's package (`triton.gt`) may still be the module; `x.gt(0)` is not.
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        imports_it = any(_spelled_in_import(n, stem) for n in imports)
        imported_names = {name for n in imports for name in import_binds(n)}
        accounted = 0
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                spelled = _spelled_in_import(node, stem)
                if not spelled:
                    continue
                described = guard(node, parents, path)
                if described is None or not any(is_module_file(m, os_path) for m in imported_modules(node, package)
                                                if len(m) >= 2):  # a bare `import gt` may be any gt on sys.path
                    return None  # another module of that name, or an import nothing guards
                accounted += spelled
                checks.append(f"{_display(files, path)}:{node.lineno} {described}")
            elif (isinstance(node, ast.Name) and node.id == stem) or (
                    isinstance(node, ast.Attribute) and node.attr == stem):
                # `kern.gt` with `import pkg.kernels as kern`: any attribute of an imported name may be it
                may_be_module = imports_it or (isinstance(node, ast.Attribute) and (
                    unparsed(node.value).split(".")[-1] == package_folder or _root_name(node.value) in imported_names))
                if may_be_module and guard(node, parents, path) is None:
                    return None
                accounted += 1
            elif not imports_it and ((isinstance(node, ast.arg) and node.arg == stem) or (
                    isinstance(node, ast.keyword) and node.arg == stem) or (
                    isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == stem)):
                accounted += 1  # the file's own name
        if accounted != tokens[0]:
            return None  # a definition, a keyword, an alias: a mention not accounted for
    return checks or None


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _display(files: ScannedFiles, os_path: str) -> str:
    return files.display.get(os_path, os_path)


def _spelled_in_import(node: ast.Import | ast.ImportFrom, stem: str) -> int:
    """How often the statement spells ``stem`` as a name token (the alias it binds included)."""
    words = [part for alias in node.names for part in alias.name.split(".")]
    words += [alias.asname for alias in node.names if alias.asname]
    if isinstance(node, ast.ImportFrom) and node.module:
        words += node.module.split(".")
    return words.count(stem)


# -- a flag that only CUDA turns on, stored anywhere in the class hierarchy ----------------------

def _tested_flag(test: ast.expr) -> str | None:
    """``self.use_gpu``, alone or as an operand of an ``and``: the attribute's name."""
    operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for operand in operands:
        if (isinstance(operand, ast.Attribute) and isinstance(operand.value, ast.Name)
                and operand.value.id == "self"):
            return operand.attr
    return None


def _own_statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of a method's body, not those of functions, lambdas or classes defined in it
    (their ``self`` is another object)."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    pending: list[ast.AST] = [s for s in function.body if not isinstance(s, scopes)]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, scopes))


def flag_guards(tree: ast.Module, text: str, findings: list[Finding]) -> list[tuple[int, str, str, int]]:
    """(index of the finding, flag, class name, line of the if) for each error or silent finding in
    the body of an ``if self.flag:`` directly in a method (first parameter ``self``) of a class of
    the module or of one of its classes.  Read in the workers, where the tree is at hand."""
    hot = [(i, f.line) for i, f in enumerate(findings) if still_hot(f)]
    if not hot or "if self." not in text and "and self." not in text:
        return []
    found = []
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    for cls in classes:
        classes += [node for node in cls.body if isinstance(node, ast.ClassDef)]  # nested, read in turn
        inside = [(i, line) for i, line in hot if cls.lineno <= line <= (cls.end_lineno or cls.lineno)]
        if not inside:
            continue
        for method in cls.body:
            if not (isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.args.args
                    and method.args.args[0].arg == "self"):
                continue
            if not any(method.lineno <= line <= (method.end_lineno or method.lineno) for _, line in inside):
                continue
            for node in _own_statements(method):
                if not isinstance(node, ast.If) or not node.body:
                    continue
                flag = _tested_flag(node.test)
                if flag is None:
                    continue
                low, high = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
                found += [(i, flag, cls.name, node.lineno) for i, line in inside if low <= line <= high]
    return found


def _stores(cls: ast.ClassDef, flag: str) -> Iterator[tuple[ast.AST, ast.expr | None, ast.AST]]:
    """(store, the value stored or None when unknown, its function) for ``self.flag`` anywhere in
    the class (nested functions and classes included: more stores only keep more findings), and
    ``flag = ...`` or ``def flag`` (a property) in its body."""
    for statement in cls.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            named = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id == flag for t in named):
                # an annotated field, or any field of a decorated class (a dataclass), is set by
                # whoever builds the object: its value here is only a default
                field = isinstance(statement, ast.AnnAssign) or bool(cls.decorator_list)
                yield statement, None if field else statement.value, cls
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == flag:
            yield statement, None, cls  # a property, or a method that shadows the flag
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [node.target], (node.value if isinstance(node, ast.AnnAssign) else None)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        for target in targets:
            for leaf in ast.walk(target):
                if (isinstance(leaf, ast.Attribute) and leaf.attr == flag and isinstance(leaf.value, ast.Name)
                        and leaf.value.id == "self" and isinstance(leaf.ctx, ast.Store)):
                    yield node, (value if target is leaf else None), _function_of(cls, node)


def _function_of(cls: ast.ClassDef, node: ast.AST) -> ast.AST:
    """The method of ``cls`` whose body holds ``node`` directly (the class when none does)."""
    for method in cls.body:
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in method.body:
            return method
    return cls


def _off_without_cuda(value: ast.expr | None, statement: ast.AST, function: ast.AST, flag: str) -> bool:
    """Whether the stored value is false wherever CUDA is absent: a CUDA check, ``False``/``None``/``0``,
    or anything the very next statement asserts on (``assert not self.flag or torch.cuda.is_available()``)."""
    if value is not None and (cuda_present(value) or (isinstance(value, ast.Constant) and not value.value)):
        return True
    body = getattr(function, "body", [])
    if statement not in body:
        return False
    following = body[body.index(statement) + 1:body.index(statement) + 2]
    return any(isinstance(s, ast.Assert) and _asserts_cuda_for(s.test, flag) for s in following)


def _asserts_cuda_for(test: ast.expr, flag: str) -> bool:
    """``not self.flag or torch.cuda.is_available()`` (either order)."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) == 2):
        return False
    negated = [v for v in test.values if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)
               and unparsed(v.operand) == f"self.{flag}"]
    return len(negated) == 1 and any(cuda_present(v) for v in test.values if v is not negated[0])


def _hierarchy(files: ScannedFiles, name: str) -> set[tuple[str, str]] | None:
    """(file, class name) of the class, its bases, the classes derived from it and their bases,
    each name taken as every class of that name in the scanned files; None past the cap."""
    index, derived = files.classes(), files.derived()
    if index is None or derived is None:
        return None
    down = {name}
    pending = [name]
    while pending:
        current = pending.pop()
        for spelling in {current} | files.aliases(current):
            for child in derived.get(spelling, ()):
                if child not in down:
                    down.add(child)
                    pending.append(child)
        if len(down) > _MAX_HIERARCHY:
            return None
    members = set(down)
    pending = list(down)
    while pending:
        for _, bases in index.get(pending.pop(), ()):
            for base in bases & index.keys():
                if base not in members:
                    members.add(base)
                    pending.append(base)
        if len(members) > _MAX_HIERARCHY:
            return None
    return {(path, member) for member in members for path, _ in index.get(member, ())}


def lower_flags_stored_elsewhere(work: list, results: list[tuple[FileResult, int]],
                                 whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower findings under ``if self.flag:`` where every store of the flag in the class hierarchy
    keeps it false without CUDA."""
    flags = {flag for result, _ in results for flag in result.hints.flags}
    if not flags:
        return
    by_display = {job.display: job.path for job in work}
    files = ScannedFiles([job for job in work if job.path.endswith(".py")], roots)
    decided: dict[tuple[str, str], str | None] = {}
    flag_alone: dict[str, bool] = {}
    for result, _ in results:
        os_path = by_display.get(result.path, "")
        guarded = [g for g in result.flag_guarded if g[1] in flags and still_hot(result.findings[g[0]])]
        if not guarded or not whole_package(os_path):
            continue
        for index, flag, name, if_line in guarded:
            finding = result.findings[index]
            if not still_hot(finding):
                continue  # lowered by an if further out
            if flag not in flag_alone:
                flag_alone[flag] = _stored_only_in_classes(files, flag)
            key = (name, flag)
            if key not in decided:
                decided[key] = _stored_only_off_without_cuda(files, name, flag) if flag_alone[flag] else None
            where = decided[key]
            if where is not None:
                finding.lower_to_info(f"under `if self.{flag}:` (line {if_line}), a flag that every store "
                                f"in the class hierarchy keeps false where CUDA is absent ({where})")


def _stored_only_off_without_cuda(files: ScannedFiles, name: str, flag: str) -> str | None:
    """Where the flag is stored (``file:line``) when every store keeps it false without CUDA; None
    otherwise."""
    members = _hierarchy(files, name)
    if not members:
        return None
    if any(files.search(path, _SETS_BY_NAME, _SETS_BY_NAME_NEEDLES) for path in {path for path, _ in members}):
        return None
    word = re.escape(flag.encode())
    may_store = re.compile(rb"self\." + word + rb"\b[^\n=]*=(?!=)|(?:\bfor\s.*|\bas\s+)self\." + word + rb"\b"
                           rb"|^[ \t]+" + word + rb"\s*[:=]|\bdef\s+" + word + rb"\b")
    places: list[str] = []
    for path, member in sorted(members):
        if not _on_a_line_of(files.data(path), flag.encode(), may_store):
            continue  # nothing in the file could store it: not worth parsing
        tree = files.tree(path)
        if tree is None:
            return None
        for cls in ast.walk(tree):
            if not (isinstance(cls, ast.ClassDef) and cls.name == member):
                continue
            for statement, value, function in _stores(cls, flag):
                if not _off_without_cuda(value, statement, function, flag):
                    return None
                places.append(f"{os.path.basename(path)}:{getattr(statement, 'lineno', cls.lineno)}")
    if not places:
        return None
    return ", ".join(places[:3]) + (" ..." if len(places) > 3 else "")


def _on_a_line_of(data: bytes | None, word: bytes, pattern: re.Pattern[bytes]) -> bool:
    """Whether ``pattern`` matches a line that holds ``word`` (each such line read alone: quicker
    than a search of the whole file for a pattern with no literal to look for first)."""
    if data is None:
        return True
    index = data.find(word)
    while index >= 0:
        start = data.rfind(b"\n", 0, index) + 1
        end = data.find(b"\n", index)
        end = len(data) if end < 0 else end
        if pattern.search(data[start:end]):
            return True
        index = data.find(word, end)
    return False


def _stored_only_in_classes(files: ScannedFiles, flag: str) -> bool:
    """Whether no scanned file sets ``flag`` but as ``self.flag`` in a class: not on another object
    (``engine.use_gpu = True``, ``setattr(engine, k, v)``, ``engine.__dict__.update(...)``), not
    in a function outside a class (a method attached later), and no string names it (an option, a
    config key)."""
    if files.anywhere(_SETS_OTHERS_BY_NAME, _SETS_BY_NAME_NEEDLES):
        return False
    word = re.escape(flag.encode())
    hyphened = re.escape(flag.replace("_", "-").encode())
    elsewhere = re.compile(rb"(?<!self)\." + word + rb"\s*(?:=[^=]|:[^\n=]*=)|[\"'](?:--?)?(?:" + word + b"|"
                           + hyphened + rb")[\"']")
    mentioning = files.mentioning(flag.encode())
    if mentioning is None:
        return False
    stored = re.compile(rb"\bself\." + word + rb"\s*(?:=[^=]|:[^\n=]*=|[-+*/|&^%@]=|>>=|<<=|//=|\*\*=)")
    spelled = (flag.encode(), flag.replace("_", "-").encode())
    return not any(any(_on_a_line_of(files.data(path), w, elsewhere) for w in spelled)
                   or (_on_a_line_of(files.data(path), flag.encode(), stored)
                       and _stored_outside_classes(files.tree(path), flag))
                   for path in mentioning)


def _stored_outside_classes(tree: ast.Module | None, flag: str) -> bool:
    """``self.flag = ...`` in a function outside any class (a method attached later), or an
    unparsable file."""
    if tree is None:
        return True
    inside: set[int] = {id(n) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for n in ast.walk(cls)}
    return any(isinstance(node, ast.Attribute) and node.attr == flag and isinstance(node.ctx, ast.Store)
               and id(node) not in inside for node in ast.walk(tree))


# -- a CUDA check in a test ---------------------------------------------------------------------

_TEST_FRAMEWORKS = frozenset({"unittest", "pytest", "absl"})


def _is_unit_test_module(tree: ast.Module) -> bool:
    """A ``*_test.py`` file is a test file when it imports a test framework (unittest, pytest,
    absl.testing) and defines a test; ``bench_test.py`` with ``def test_throughput(model)`` may
    be a script."""
    imports = {qualname.split(".", 1)[0] for qualname in import_aliases(tree.body).values()}
    return bool(imports & _TEST_FRAMEWORKS) and any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
        for node in ast.walk(tree))


def lower_checks_in_tests(work: list, results: list[tuple[FileResult, int]], roots: list[str]) -> None:
    """Lower a silent CUDA check in a test file: where CUDA is absent the test runs on the CPU."""
    by_display = {job.display: job.path for job in work}
    files = ScannedFiles([], roots)
    for result, _ in results:
        checks = [f for f in result.findings if f.rule_id == CUDA_AVAILABILITY_CHECK and still_hot(f)
                  and worst_of(f) == "silent"]
        os_path = by_display.get(result.path, "")
        # `replay_buffer_test.py` (absl's naming) is read as a test only when it is one
        on_test_path = files.is_test(os_path)
        if not checks or not os_path.endswith(".py") or not (on_test_path or os_path.endswith("_test.py")):
            continue
        tree = files.tree(os_path)
        if tree is None or not (on_test_path or _is_unit_test_module(tree)):
            continue
        in_class_body = {node.lineno for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
                         for node in cls.body if isinstance(node, ast.If)}
        for finding in checks:
            if finding.line not in in_class_body:
                finding.lower_to_info("a CUDA check in a test file: where CUDA is absent the test still runs, on the "
                                "CPU (on another accelerator it tests the CPU, not that device)")
