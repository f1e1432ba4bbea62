"""TP007: modules that refuse to import where CUDA is absent, and the code only they lead to
(round 61).

Python runs a module's top-level statements before anything that imports it goes on, and a
package's ``__init__.py`` before any module in it.  A module whose top level stops, where CUDA is
absent, with its own error that CUDA is required is the lock-in a user meets: it is reported there
(TP007), once.  The code behind it never runs there, so a CUDA call behind it is no second
consequence and is info (trainstream JIT-builds its extension at ``import trainstream`` and raises
``BuildError("TrainStream needs an NVIDIA GPU")``; judges called the memory statistics of its
wrapper, behind that, wrong at silent).

- **A refusal** sits at the top level of a module that is no test: ``assert
  torch.cuda.is_available()``, ``if not torch.cuda.is_available(): raise ...``, ``if
  torch.version.cuda is None: raise ...`` (or an exit), or a call of a plain function in the same
  folder whose body opens with such checks after its docstring and imports (trainstream's ``_C =
  _build.load()``).  It may also sit in the ``except ImportError:`` of a top-level ``try`` that
  imports the project's own compiled extension, in a project that builds only CUDA extensions.  A
  check ``and``-ed with an unset environment variable refuses unless the user sets it (an explicit
  request).  Not a refusal: a skip, a decorated, async or generator function, a name bound twice, a
  ``torch`` that is not torch.
- **Where it refuses**: ``is_available()`` and ``device_count()`` refuse on a machine without a
  CUDA device, and pass on ROCm; ``torch.version.cuda`` refuses a build of torch without CUDA
  (ROCm's, MPS's, XPU's, the CPU wheels) but passes a CUDA wheel on a machine without a GPU, so
  nothing behind a check of the build alone is lowered; ``torch.version.hip`` in the check refuses
  ROCm.  A fallback that a ROCm build of the extension skips never refuses ROCm.
- **TP007** is an error on every target where the check refuses, and info where every import of the
  refusing module sits under a guard (a CUDA check, a ``try``, a function): the package runs
  without it.  The query the check reads is info.
- **Behind it**: the refusing module's lines after the refusal; each module whose top level imports
  the refusing file (the import resolved to that file; not a module the refusing one imports before
  it refuses, which runs first in a cycle), from that import on; every module of a package whose
  ``__init__.py`` refuses, read on the chain of ``__init__.py`` files, but the modules whose code
  may run before it (those the ``__init__.py`` imports up to its refusal, and what they import),
  scripts, and a package at a scanned or project root or in a folder of scripts; and, for a
  ``setup.py`` that refuses, the modules of its project that import the ``CUDAExtension`` it
  builds.  TP007 behind another refusal is lowered like any finding.
- **Kept**: the refusing function up to its check, and past a refusal that ROCm passes, every
  finding that is error or silent on ROCm.

Only files the scan read take part, and only imports by statement: an import by a computed name
that may load a module of the package before its refusal keeps the package whole.  An ``assert``
is compiled away under ``python -O``.
"""
from __future__ import annotations

import ast
import bisect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from torchport.scan.cross_file_guards import (RUNS_AS_SCRIPT, ScannedFiles, binds_name, dotted_module,
                                              from_module, imported_modules, is_test_path, module_statements,
                                              torch_is_torch)
from torchport.scan.detectors.syntax import character_column
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import is_hot
from torchport.scan.rules import CUDA_REQUIRED_AT_IMPORT, finding_severity

RULE_IDS = (CUDA_REQUIRED_AT_IMPORT,)

# The quick test the workers make on each file: a CUDA query in an ``assert`` or an ``if``, in any
# spelling (``cuda.is_available()`` after ``from torch import cuda``).
_QUERIES = ("is_available()", "version.cuda", "device_count()")
_CHECK_HEAD = re.compile(r"(assert|if)\b")
# How far before a query its line may start (a check's head is short; a minified line is no check).
_LINE_HEAD = 2000
# A function's opening: how many lines a check may sit below its ``def``.
_OPENING_LINES = 40
# The lines at the left margin a check in a top-level block sits under.
_BLOCK_HEADS = ("try:", "except", "else:", "finally:")
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
_FALLBACK_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "OSError", "Exception"})
# How many files are searched for a name, one search each, before one index of every file's words.
_MENTIONS_BEFORE_INDEX = 20
# How many imports deep refusing modules are followed.
_DEPTH = 6
# Signs that a module runs as a script: `python pkg/tool.py` imports no package.
_SCRIPT_SIGNS = re.compile(rb"\A#!|\bsys\.argv\b|\bargparse\b|\bparse_args\(|\bfire\.Fire\(|\bclick\.command\b"
                           rb"|^main\(\)", re.MULTILINE)
_DYNAMIC_IMPORT = re.compile(r"\b(?:import_module|__import__|run_module|exec_module|load_module|exec)\(")
# ... in a module that runs before a package's refusal: a line that names a module of the package (a
# compiled extension's loader, `spec_from_file_location(NAME, library)`, names none).
_DYNAMIC_IMPORT_LINE = re.compile(rb"^.*\b(?:import_module|__import__|run_module|spec_from_file_location|exec)\(.*$",
                                  re.MULTILINE)

# Where a check refuses: on a machine without a CUDA device (is_available(), which ROCm answers as
# CUDA does), or on a build of torch without CUDA (torch.version.cuda: ROCm's, MPS's, XPU's and the CPU
# wheels; a CUDA wheel on a machine without a GPU passes it).
_BUILD, _MACHINE = "build", "machine"
_ON_BUILD, _ON_MACHINE, _NOWHERE = frozenset({_BUILD}), frozenset({_MACHINE}), frozenset[str]()
# What a module may call torch's CUDA queries: `import torch as th`, `from torch import cuda`.
_Spellings = dict[str, str]


@dataclass
class _Refusal:
    path: str  # the refusing module
    module: tuple[str, ...]
    line: int  # its top-level statement that refuses (a check, a call, an import)
    end_line: int
    rocm: bool  # refused on ROCm too (a torch.version.cuda check outside a fallback)
    shown: str  # "path:line" of the check itself
    # the refusing function from its ``def`` to its check, which runs before the check refuses
    kept: tuple[str, int, int] | None = None
    is_package: bool = False
    # refused on a machine without a CUDA device: what lies behind never runs there.  A check of the
    # build alone passes a CUDA wheel on a machine without a GPU, where the code behind runs.
    lowers: bool = True

    @property
    def verb(self) -> str:
        return "build" if os.path.basename(self.path) == "setup.py" else "import"


@dataclass
class _Check:
    """A check that refuses (TP007, reported once), and what the refusals through it say."""
    path: str
    statement: ast.stmt
    rocm: bool = False  # some refusal through it refuses on ROCm too
    build: bool = False  # it refuses to build (a setup.py)
    modules: set[str] = field(default_factory=set)  # the modules that refuse through it


def refusal_hints(text: str) -> tuple[bool, list[str]]:
    """The workers' quick test: whether the file holds such a check at its left margin (or in a
    top-level ``try``), and the functions defined there that may open with one (a check a few lines
    below their ``def``).  The pass over every file reads the candidates whole."""
    at_margin, openings = False, []
    for query in _QUERIES:
        at = text.find(query)
        while at >= 0:
            start = text.rfind("\n", max(0, at - _LINE_HEAD), at) + 1
            head = _CHECK_HEAD.match(text[start:at].lstrip(" \t")) if start or at < _LINE_HEAD else None
            if head is not None and (head.group(1) == "assert" or re.search(r"\braise\b|exit\(", text[at:at + 400])):
                margin = _margin_above(text, start)
                if not text[start:at].startswith((" ", "\t")) or margin.startswith(_BLOCK_HEADS):
                    at_margin = True
                elif (found := re.match(r"def[ \t]+(\w+)", margin)) and found.group(1) not in openings:
                    openings.append(found.group(1))
            at = text.find(query, at + len(query))
    return at_margin, openings


def _margin_above(text: str, start: int) -> str:
    """The nearest line at the left margin within ``_OPENING_LINES`` lines above ``start``."""
    above = text[max(0, start - 4000):start].split("\n")[-_OPENING_LINES - 1:]
    return next((line for line in reversed(above) if line[:1] not in ("", " ", "\t", "#", ")")), "")


def spellings(tree: ast.Module) -> _Spellings:
    """The module's names for torch, torch.cuda, torch.version and the two queries, each bound
    once at its top level by an import of it (``torch`` itself only where every binding is one)."""
    found: _Spellings = {"torch": "torch"} if torch_is_torch(tree) else {}
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == "torch" and alias.asname and _bound_once(tree, alias.asname):
                    found[alias.asname] = "torch"
        elif isinstance(statement, ast.ImportFrom) and statement.module in ("torch", "torch.cuda") and not statement.level:
            for alias in statement.names:
                name = alias.asname or alias.name
                if alias.name in ("cuda", "version", "is_available", "device_count") and _bound_once(tree, name):
                    found[name] = f"{statement.module}.{alias.name}"
    return found


def _canonical(node: ast.expr, names: _Spellings) -> str:
    """The expression's source with the module's own spelling of torch replaced (``th.cuda`` ->
    ``torch.cuda``); unknown heads are left as written, so they match nothing."""
    source = ast.unparse(node)
    head = re.match(r"[A-Za-z_]\w*", source)
    if head is None or head.group() not in names:
        return "" if head is not None and head.group() == "torch" else source
    return names[head.group()] + source[head.end():]


def _present(test: ast.expr, names: _Spellings) -> frozenset[str]:
    """Where ``assert <test>`` refuses: without ``torch.cuda.is_available()`` or
    ``torch.cuda.device_count() > 0`` (the machine), without ``torch.version.cuda`` (``is not
    None``: the build), and for an ``and``, wherever one of them does."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return frozenset().union(*(_present(value, names) for value in test.values))
    source = _canonical(test, names)
    if source == "torch.cuda.is_available()":
        return _ON_MACHINE
    if source in ("torch.version.cuda", "torch.version.cuda is not None"):
        return _ON_BUILD
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and _canonical(test.left, names) == "torch.cuda.device_count()" and isinstance(test.comparators[0], ast.Constant)):
        bound, op = test.comparators[0].value, test.ops[0]
        if (isinstance(op, ast.Gt) and bound == 0) or (isinstance(op, ast.GtE) and bound == 1):
            return _ON_MACHINE
    return _NOWHERE


def _absent(test: ast.expr, names: _Spellings) -> frozenset[str]:
    """Where ``if <test>: raise`` refuses: ``not`` one of ``_present``'s tests,
    ``torch.version.cuda is None``, ``torch.cuda.device_count() == 0`` (``< 1``); an ``or`` wherever
    one operand does (``torch.version.hip`` among them refuses ROCm too)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        found = frozenset().union(*(_absent(value, names) for value in test.values))
        if found and any(_canonical(v, names) in ("torch.version.hip", "torch.version.hip is not None")
                         for v in test.values):
            return found | _ON_BUILD
        return found
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `not torch.cuda.is_available() and not os.environ.get("TORCH_CUDA_ARCH_LIST")`: refused unless the
        # user sets the variable, an explicit request (trainstream's build without a GPU)
        parts = [(_absent(v, names), v) for v in test.values]
        machine = [p for p, _ in parts if p == _ON_MACHINE]
        if len(machine) == 1 and all(p == _ON_MACHINE or _environment_read(v) for p, v in parts):
            return _ON_MACHINE
        return _NOWHERE
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if isinstance(test.operand, ast.BoolOp):
            return _NOWHERE  # `not (a and b)`: read no further
        if _canonical(test.operand, names) == "torch.cuda.device_count()":
            return _ON_MACHINE
        return _present(test.operand, names)
    if _canonical(test, names) == "torch.version.cuda is None":
        return _ON_BUILD
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and _canonical(test.left, names) == "torch.cuda.device_count()" and isinstance(test.comparators[0], ast.Constant)):
        bound, op = test.comparators[0].value, test.ops[0]
        if (isinstance(op, ast.Eq) and bound == 0) or (isinstance(op, ast.Lt) and bound == 1) or (
                isinstance(op, ast.LtE) and bound == 0):
            return _ON_MACHINE
    return _NOWHERE


def _environment_read(test: ast.expr) -> bool:
    """``not os.environ.get("X")``, ``not os.getenv("X")``, ``"X" not in os.environ``."""
    source = ast.unparse(test)
    return bool(re.fullmatch(r"not os\.(?:environ\.get|getenv)\([^()]*\)|'[^']*' not in os\.environ", source))


def _stops(statement: ast.stmt) -> bool:
    """A raise (not a skip) or an exit."""
    if isinstance(statement, ast.Raise):
        return statement.exc is None or "skip" not in ast.unparse(statement.exc).lower()
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and ast.unparse(statement.value.func) in _EXIT_CALLS)


def _check(statement: ast.stmt, names: _Spellings) -> frozenset[str]:
    """Where the statement refuses, if it is a refusal."""
    if isinstance(statement, ast.Assert):
        return _present(statement.test, names)
    if isinstance(statement, ast.If) and statement.body and _stops(statement.body[-1]):
        return _absent(statement.test, names)
    return _NOWHERE


def _opening_checks(function: ast.stmt, names: _Spellings) -> list[ast.stmt]:
    """The checks a plain function opens with, after its docstring, imports and other such checks.
    A decorator may catch what they raise, and an async or generator function runs nothing when
    called."""
    if (not isinstance(function, ast.FunctionDef) or function.decorator_list
            or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(function))):
        return []
    found: list[ast.stmt] = []
    for statement in function.body:
        if _check(statement, names):
            found.append(statement)
            continue
        if (isinstance(statement, (ast.Import, ast.ImportFrom, ast.Global, ast.Pass)) or (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))):
            continue
        break
    return found


def _called(statement: ast.stmt) -> ast.expr | None:
    """The function a top-level statement calls as a whole: ``load()``, ``_C = _build.load()``."""
    value = statement.value if isinstance(statement, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    return value.func if isinstance(value, ast.Call) else None


def _bound_once(tree: ast.Module, name: str) -> bool:
    return sum(binds_name(s, name) for s in module_statements(tree)) == 1


class _Reader:
    """The scanned Python files, by path, with their modules and what they import."""

    def __init__(self, files: ScannedFiles, roots: list[str], openings: dict[str, list[str]]) -> None:
        self.files = files
        self.openings = openings  # path -> the functions the workers found may open with a check
        self.paths = {os.path.abspath(job.path): job.path for job in files.jobs}
        self.roots = {os.path.abspath(root) for root in roots}
        self._modules: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._cuda_only: bool | None = None
        self._asked = 0
        self._words: dict[bytes, list[str]] | None = None
        self._sorted: list[str] | None = None

    def module(self, path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if path not in self._modules:
            self._modules[path] = dotted_module(path)
        return self._modules[path]

    def file_of(self, module: tuple[str, ...], near: str) -> str | None:
        """The scanned file ``module`` is imported from, read from the root of ``near``'s package
        (a script's own folder: ``sys.path[0]``)."""
        if not module:
            return None
        package = self.module(near)[1]
        root = os.path.abspath(near)
        for _ in range(len(package) + 1):
            root = os.path.dirname(root)
        for ending in (os.path.join(*module) + ".py", os.path.join(*module, "__init__.py")):
            found = self.paths.get(os.path.join(root, ending))
            if found is not None:
                return found
        return None

    def imported_files(self, statement: ast.Import | ast.ImportFrom, path: str) -> list[str]:
        """The scanned files an import statement loads: each module it names, and, for ``from
        pkg import name``, the submodule ``name`` only where the package's ``__init__.py`` does not
        bind ``name`` itself."""
        package = self.module(path)[1]
        found: list[str] = []
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                parts = tuple(alias.name.split("."))
                found += [f for i in range(1, len(parts) + 1) if (f := self.file_of(parts[:i], path))]
            return found
        base = from_module(statement, package)
        base_file = self.file_of(base, path)
        found += [f for i in range(1, len(base) + 1) if (f := self.file_of(base[:i], path))]
        init = self.files.tree(base_file) if base_file and base_file.endswith("__init__.py") else None
        for alias in statement.names:
            sub = self.file_of(base + (alias.name,), path)
            if sub is not None and (init is None or self._loads_submodule(init, base_file or "", alias.name)):
                found.append(sub)
        return found

    def _loads_submodule(self, init: ast.Module, init_path: str, name: str) -> bool:
        """Whether ``from pkg import name`` loads the submodule ``pkg.name``: the package's
        ``__init__.py`` binds ``name`` nowhere, or only by importing that submodule (``from . import
        name``, ``from .name import name``); another binding (a function, the other branch's
        ``from .reference import name``) may answer the import without it."""
        package = self.module(init_path)[0]
        if any((isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names))
               or (isinstance(s, ast.FunctionDef) and s.name == "__getattr__") for s in init.body):
            return False  # `from .dispatch import *`, a module __getattr__: the name may come from elsewhere
        for statement in module_statements(init):
            if not binds_name(statement, name):
                continue
            if not (isinstance(statement, ast.ImportFrom) and (
                    from_module(statement, package) == package + (name,)
                    or (from_module(statement, package) == package
                        and any((a.asname or a.name) == name and a.name == name for a in statement.names)))):
                return False
        return True

    def mentioning(self, word: str) -> list[str]:
        """The files that spell ``word``: by a word index of every file once more than a few are asked."""
        self._asked += 1
        if self._asked <= _MENTIONS_BEFORE_INDEX:
            return self.files.mentioning(word.encode()) or []
        if self._words is None:
            self._words = {}
            for job in self.files.jobs:
                for found in set(re.findall(rb"\w+", self.files.data(job.path) or b"")):
                    self._words.setdefault(found, []).append(job.path)
        return self._words.get(word.encode(), [])

    def under(self, folder: str) -> list[str]:
        """The scanned files below ``folder``."""
        if self._sorted is None:
            self._sorted = sorted(self.paths)
        start = bisect.bisect_left(self._sorted, folder + os.sep)
        end = bisect.bisect_left(self._sorted, folder + os.sep + "\U0010ffff")
        return [self.paths[p] for p in self._sorted[start:end]]

    def builds_only_cuda_extensions(self) -> bool:
        """A scanned file builds a CUDA extension (``CUDAExtension``, ``cpp_extension.load`` with CUDA
        sources) and none mentions a build that may make it without CUDA (``CppExtension``, CMake, a
        plain ``Extension``)."""
        if self._cuda_only is None:
            datas = [self.files.data(job.path) or b"" for job in self.files.jobs]
            cuda = any(b"CUDAExtension" in d or (b"cpp_extension" in d and re.search(
                rb"""\.cu['"]|cuda_sources|extra_cuda_cflags""", d)) for d in datas)
            other = any(re.search(rb"CppExtension|CMake|cmake|\bExtension\(", d) for d in datas)
            self._cuda_only = cuda and not other
        return self._cuda_only

    def refusing_function(self, path: str, name: str) -> tuple[ast.stmt, ast.stmt, frozenset[str]] | None:
        """(the function, the first check it opens with, where its checks refuse) where ``path``
        defines ``name`` once."""
        if name not in self.openings.get(path, ()):
            return None
        tree = self.files.tree(path)
        if tree is None or not _bound_once(tree, name):
            return None
        function = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
        names = spellings(tree)
        checks = _opening_checks(function, names) if function is not None else []
        if function is None or not checks:
            return None
        return function, checks[0], frozenset().union(*(_check(c, names) for c in checks))


def _top_level(reader: _Reader, path: str, tree: ast.Module) -> list[tuple[ast.stmt, bool]]:
    """The statements the module runs at its top level, in order, with whether each sits in the
    fallback of a ``try`` that imports the project's compiled extension; other blocks are not read
    (a branch may skip them)."""
    found: list[tuple[ast.stmt, bool]] = []
    for statement in tree.body:
        found.append((statement, False))
        if not (isinstance(statement, ast.Try) and statement.body
                and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in statement.body)):
            continue
        # a compiled extension is no scanned .py file; a CPU build of it would not fall back
        imports = [s for s in statement.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        if (any(_names_a_scanned_module(reader, s, path) or not _own_package(reader, s, path) for s in imports)
                or not reader.builds_only_cuda_extensions()):
            continue
        for handler in statement.handlers:
            caught = {ast.unparse(e) for e in (handler.type.elts if isinstance(handler.type, ast.Tuple)
                                               else [handler.type])} if handler.type is not None else {"Exception"}
            if caught & _FALLBACK_CATCHES:
                found.extend((s, True) for s in handler.body)
    return found


def _names_a_scanned_module(reader: _Reader, statement: ast.Import | ast.ImportFrom, path: str) -> bool:
    """Whether what the import names is a scanned ``.py`` module, or comes from one: ``from .
    import _reference``, ``from ._reference import attention``; not ``from . import _C``, where
    only the compiled extension answers."""
    if isinstance(statement, ast.Import):
        return any(reader.file_of(tuple(a.name.split(".")), path) for a in statement.names)
    own = reader.module(path)[0] if os.path.basename(path) == "__init__.py" else reader.module(path)[1]
    base = from_module(statement, reader.module(path)[1])
    if any(reader.file_of(base + (a.name,), path) for a in statement.names):
        return True
    return base != own and reader.file_of(base, path) is not None


def _is_test(reader: _Reader, path: str) -> bool:
    """A test or a test suite's helper, read on its path below the scanned folder (``tests/``,
    ``test_*.py``, ``conftest.py``, a folder named ``test...`` such as ``tests_gpu/``): only someone
    who runs the suite meets its refusals."""
    relative = reader.files.relative(path)
    return is_test_path(relative) or any(part.lower().startswith("test") for part in relative.split("/")[:-1])


def _own_package(reader: _Reader, statement: ast.Import | ast.ImportFrom, path: str) -> bool:
    """The import names a module of the importing module's own top package (``from . import _C``,
    ``import trainstream._C``), not another distribution."""
    top = reader.module(path)[0][:1]
    if isinstance(statement, ast.ImportFrom):
        return bool(statement.level) or (bool(top) and tuple((statement.module or "").split("."))[:1] == top)
    return bool(top) and all(tuple(a.name.split("."))[:1] == top for a in statement.names)


def _own_refusal(reader: _Reader, path: str, checks: dict[tuple[str, int], _Check]) -> _Refusal | None:
    """The first refusal at the top level of the module: a check, or a call of a function beside
    it that opens with one (recorded in ``checks``)."""
    tree = reader.files.tree(path)
    if tree is None or _is_test(reader, path):
        return None
    module = reader.module(path)[0]
    is_package = os.path.basename(path) == "__init__.py"
    bound: dict[str, tuple[str, str]] | None = None
    names = spellings(tree)
    for statement, in_fallback in _top_level(reader, path, tree):
        where = _check(statement, names)
        if where:
            rocm = _BUILD in where and not in_fallback
            check = checks.setdefault((path, statement.lineno), _Check(path, statement))
            check.rocm |= rocm
            check.build |= os.path.basename(path) == "setup.py"
            check.modules.add(path)
            return _Refusal(path, module, statement.lineno, statement.end_lineno or statement.lineno, rocm,
                            f"{reader.files.display.get(path, path)}:{statement.lineno}", is_package=is_package,
                            lowers=_MACHINE in where)
        func = _called(statement)
        if func is None:
            continue
        if bound is None:
            bound = _function_homes(reader, path, tree)
        name = func.id if isinstance(func, ast.Name) else (
            f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else "")
        home = bound.get(name)
        if home is None:
            continue
        found = reader.refusing_function(*home)
        if found is None:
            continue
        function, check_statement, where = found
        rocm = _BUILD in where and not in_fallback
        check = checks.setdefault((home[0], check_statement.lineno), _Check(home[0], check_statement))
        check.rocm |= rocm
        check.build |= os.path.basename(path) == "setup.py"
        check.modules.add(path)
        return _Refusal(path, module, statement.lineno, statement.end_lineno or statement.lineno, rocm,
                        f"{reader.files.display.get(home[0], home[0])}:{check_statement.lineno}",
                        (home[0], function.lineno, check_statement.end_lineno or check_statement.lineno),
                        is_package, _MACHINE in where)
    return None


def _function_homes(reader: _Reader, path: str, tree: ast.Module) -> dict[str, tuple[str, str]]:
    """How the module's top level may name a function of a module in its own folder: ``load``
    (defined here once, or ``from ._build import load``) or ``_build.load`` (``from . import
    _build``) -> (that module's file, the function's name)."""
    folder = os.path.dirname(os.path.abspath(path))
    package = reader.module(path)[1]
    homes: dict[str, tuple[str, str]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and _bound_once(tree, statement.name):
            homes[statement.name] = (path, statement.name)
    for statement in module_statements(tree):
        if not isinstance(statement, ast.ImportFrom):
            continue
        base = from_module(statement, package)
        for alias in statement.names:
            name = alias.asname or alias.name
            if not _bound_once(tree, name):
                continue
            submodule = reader.file_of(base + (alias.name,), path)
            if submodule is not None and os.path.dirname(os.path.abspath(submodule)) == folder:
                for function in reader.openings.get(submodule, ()):
                    homes[f"{name}.{function}"] = (submodule, function)
            home = reader.file_of(base, path)
            if home is not None and os.path.dirname(os.path.abspath(home)) == folder and not home.endswith(
                    "__init__.py"):
                homes[name] = (home, alias.name)
    return homes


@dataclass
class _Behind:
    """Which lines of a file lie behind a refusal, and why."""
    after: int  # every line after this one (0: the whole file)
    rocm: bool
    reason: str


def lower_behind_refusals(work: list, results: list[tuple[FileResult, int]], roots: list[str]) -> None:
    """Report each refusal (TP007) and lower the findings that lie behind it (see the module's
    docstring)."""
    jobs = [job for job in work if job.path.endswith(".py")]
    by_display = {job.display: job.path for job in jobs}
    at_margin = [by_display[result.path] for result, _ in results
                 if result.hints.refusal_at_margin and result.path in by_display]
    openings = [(by_display[result.path], result.hints.opening_checks) for result, _ in results
                if result.hints.opening_checks and result.path in by_display]
    if not at_margin and not openings:
        return  # the workers' quick test: most projects hold no such check
    files = ScannedFiles(jobs, roots)
    candidates = set(at_margin) | _callers_beside(files, jobs, openings)
    if not candidates:
        return
    reader = _Reader(files, roots, dict(openings))
    checks: dict[tuple[str, int], _Check] = {}
    refusals = {path: found for path in sorted(candidates) if (found := _own_refusal(reader, path, checks))}
    if not refusals:
        return
    behind: dict[str, list[_Behind]] = {}
    pending = [r for r in refusals.values() if r.lowers]
    for _ in range(_DEPTH):
        following: list[_Refusal] = []
        for refusal in pending:
            behind.setdefault(refusal.path, []).append(_Behind(
                refusal.end_line, refusal.rocm,
                f"past line {refusal.line}, where this module refuses to {refusal.verb} without CUDA ({refusal.shown})"))
            following.extend(_importers(reader, refusal, refusals))
            if refusal.is_package:
                following.extend(_package_behind(reader, refusal, behind, refusals))
            elif os.path.basename(refusal.path) == "setup.py":
                following.extend(_extension_importers(reader, refusal, refusals))
        pending = following
        if not pending:
            break
    results_by_path = {by_display[result.path]: result for result, _ in results if result.path in by_display}
    kept = [r.kept for r in refusals.values() if r.kept is not None]
    for check in checks.values():
        result = results_by_path.get(check.path)
        if result is not None:
            _report(check, result, files, any(_reached_unguarded(reader, module) for module in check.modules))
    for path, reasons in behind.items():
        result = results_by_path.get(path)
        if result is not None:
            for finding in result.findings:  # TP007 too: a refusal behind another is never reached
                _lower(finding, reasons, [(start, end) for home, start, end in kept if home == path])


def _callers_beside(files: ScannedFiles, jobs: list, openings: list[tuple[str, list[str]]]) -> set[str]:
    """The modules beside one that defines a function opening with a check that spell a call of it
    (in its own file, only a call at the left margin: ``_C = load()``)."""
    openings = [(path, names) for path, names in openings if not files.is_test(path)]
    folders = {os.path.dirname(path) for path, _ in openings}
    beside: dict[str, list[str]] = {}
    for job in jobs:
        if os.path.dirname(job.path) in folders:
            beside.setdefault(os.path.dirname(job.path), []).append(job.path)
    found: set[str] = set()
    for path, names in openings:
        spelled = b"|".join(re.escape(n.encode()) for n in names)
        called = re.compile(rb"\b(?:" + spelled + rb")\(")
        called_here = re.compile(rb"(?m)^(?:[\w.]+[ \t]*=[ \t]*)?(?:" + spelled + rb")\(")
        for other in beside.get(os.path.dirname(path), []):
            if (called_here if other == path else called).search(files.data(other) or b""):
                found.add(other)
    return found


def _importers(reader: _Reader, refusal: _Refusal, refusals: dict[str, _Refusal]) -> list[_Refusal]:
    """The modules outside the refusing one's package whose top level imports it (the import
    resolved to its file), each a refusal from that import on (recorded in ``refusals``)."""
    found: list[_Refusal] = []
    folder = os.path.dirname(os.path.abspath(refusal.path)) + os.sep
    targets = {os.path.abspath(refusal.path)}
    tree = reader.files.tree(refusal.path)
    # a module the refusing one imports before it refuses runs first, importing it back in a cycle
    first = _imported_early(reader, refusal.path, [n for n in ast.walk(tree) if isinstance(n, ast.stmt)
                                                   and n.lineno <= refusal.end_line] if tree else [])
    for path in reader.mentioning(refusal.module[-1]) if refusal.module else []:
        absolute = os.path.abspath(path)
        if path in refusals or absolute in targets or path in first or (refusal.is_package and absolute.startswith(folder)):
            continue  # a module of the package: Python imports it after the package (see _package_behind)
        importer = _importing(reader, path, lambda f: os.path.abspath(f) in targets or (
            refusal.is_package and os.path.abspath(f).startswith(folder)), refusal)
        if importer is not None:
            refusals[path] = importer
            found.append(importer)
    return found


def _importing(reader: _Reader, path: str, refusing: Callable[[str], bool], refusal: _Refusal) -> _Refusal | None:
    """The refusal of the module at ``path`` from its first top-level import of a refusing file."""
    tree = reader.files.tree(path)
    if tree is None:
        return None
    statement = next((s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))
                      and any(map(refusing, reader.imported_files(s, path)))), None)
    if statement is None:
        return None
    return _Refusal(path, reader.module(path)[0], statement.lineno, statement.end_lineno or statement.lineno,
                    refusal.rocm, refusal.shown, is_package=os.path.basename(path) == "__init__.py")


def _scripts(reader: _Reader, paths: list[str]) -> set[str]:
    """Those of ``paths`` that run as scripts (a ``__main__`` block, a shebang, command-line
    parsing, a top-level ``main()``)."""
    return {p for p in paths if (data := reader.files.data(p)) is None
            or RUNS_AS_SCRIPT.search(data) or _SCRIPT_SIGNS.search(data)}


def _package_behind(reader: _Reader, refusal: _Refusal, behind: dict[str, list[_Behind]],
                    refusals: dict[str, _Refusal]) -> list[_Refusal]:
    """Every module of a package whose ``__init__.py`` refuses lies behind it, but for those whose
    code may run before the refusal, scripts (unless they import the package themselves), and a
    package at a scanned root; returns the scripts that import it as refusals."""
    folder = os.path.dirname(os.path.abspath(refusal.path))
    tree = reader.files.tree(refusal.path)
    if tree is None or folder in reader.roots or any(
            os.path.exists(os.path.join(folder, name)) for name in ("pyproject.toml", "setup.py", ".git")):
        return []  # a stray __init__.py at the top of a project: its scripts import no package
    if _folder_of_scripts(reader, folder):
        return []
    before = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno <= refusal.end_line]
    if any(_DYNAMIC_IMPORT.search(ast.unparse(n)) for n in before if not isinstance(n, (ast.Import, ast.ImportFrom))
           and not hasattr(n, "body")):
        return []  # a module imported by a name built at run time may run before the refusal
    early = _imported_early(reader, refusal.path, before)
    if any(_names_a_module_of(line, refusal.module) for path in early
           for line in _DYNAMIC_IMPORT_LINE.findall(reader.files.data(path) or b"")):
        return []  # ... or by a module that runs before it
    package = refusal.module
    reason = (f"in package {'.'.join(package)}, whose __init__.py refuses to import without CUDA "
              f"(line {refusal.line}; {refusal.shown}): Python imports the package before any of its modules")
    members = [path for path in reader.under(folder) if path != refusal.path and path not in early
               and reader.module(path)[0][:len(package)] == package and len(reader.module(path)[0]) > len(package)]
    scripts = _scripts(reader, members)
    found: list[_Refusal] = []
    for path in members:
        if path in scripts:
            importer = None if path in refusals else _importing(
                reader, path, lambda f: os.path.abspath(f).startswith(folder + os.sep), refusal)
            if importer is not None:
                refusals[path] = importer
                found.append(importer)
            continue
        behind.setdefault(path, []).append(_Behind(0, refusal.rocm, reason))
    return found


def _names_a_module_of(line: bytes, package: tuple[str, ...]) -> bool:
    """Whether an import by a computed name may load a module of ``package``: the line names the
    package, ``__name__``, ``__package__`` or a ``.py`` file."""
    words = [b"__name__", b"__package__", b".py'", b'.py"'] + ([package[0].encode()] if package else [])
    return any(word in line for word in words)


def _folder_of_scripts(reader: _Reader, folder: str) -> bool:
    """A script beside the ``__init__.py`` imports a sibling module by its bare name (``import
    utils``): the folder is run as scripts from itself, not imported as a package."""
    beside = [p for p in reader.under(folder) if os.path.dirname(os.path.abspath(p)) == folder]
    siblings = {os.path.splitext(os.path.basename(p))[0] for p in beside} - {"__init__"}
    for path in _scripts(reader, beside):
        tree = reader.files.tree(path)
        for statement in tree.body if tree else []:
            names = ([a.name for a in statement.names] if isinstance(statement, ast.Import) else
                     [statement.module or ""] if isinstance(statement, ast.ImportFrom) and not statement.level else [])
            if any(name.split(".")[0] in siblings for name in names):
                return True
    return False


def _imported_early(reader: _Reader, init_path: str, before: list[ast.stmt]) -> set[str]:
    """The package's files whose code may run before its ``__init__.py`` refuses: those any of its
    imports up to the refusal load (in functions too), and everything those import, anywhere."""
    early: set[str] = set()
    pending = [(init_path, before)]
    while pending:
        path, statements = pending.pop()
        for statement in statements:
            if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                continue
            for found in reader.imported_files(statement, path):
                if found in early or found == init_path:
                    continue
                early.add(found)
                tree = reader.files.tree(found)
                pending.append((found, [n for n in ast.walk(tree) if isinstance(n, ast.stmt)] if tree else []))
    return early


def _extension_importers(reader: _Reader, refusal: _Refusal, refusals: dict[str, _Refusal]) -> list[_Refusal]:
    """For a ``setup.py`` that refuses to build without CUDA: the modules of its project whose top
    level imports a ``CUDAExtension`` it builds (nothing installs that extension elsewhere)."""
    tree = reader.files.tree(refusal.path)
    names = set()
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "CUDAExtension":
            value = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names.add(tuple(value.value.split(".")))
    folder = os.path.dirname(os.path.abspath(refusal.path))
    found: list[_Refusal] = []
    for path in reader.under(folder) if names else []:
        if path in refusals or _project_of(os.path.abspath(path)) != folder:
            continue
        tree = reader.files.tree(path) if any(n[-1].encode() in (reader.files.data(path) or b"") for n in names) else None
        package = reader.module(path)[1]
        statement = next((s for s in (tree.body if tree else []) if isinstance(s, (ast.Import, ast.ImportFrom))
                          and imported_modules(s, package) & names), None)
        if statement is not None:
            importer = _Refusal(path, reader.module(path)[0], statement.lineno, statement.end_lineno or statement.lineno,
                                refusal.rocm, refusal.shown, is_package=os.path.basename(path) == "__init__.py")
            refusals[path] = importer
            found.append(importer)
    return found


def _project_of(absolute: str) -> str:
    """The nearest folder above the file that holds a ``setup.py`` or a ``pyproject.toml``."""
    folder = os.path.dirname(absolute)
    while not any(os.path.exists(os.path.join(folder, name)) for name in ("setup.py", "pyproject.toml")):
        parent = os.path.dirname(folder)
        if parent == folder:
            return ""
        folder = parent
    return folder


def _lower(finding: Finding, reasons: list[_Behind], kept: list[tuple[int, int]]) -> None:
    if not is_hot(finding) or any(start <= finding.line <= end for start, end in kept):
        return  # a code path that never runs moots a cap at silent too; the refusing function runs to its check
    for reason in reasons:
        if finding.line <= reason.after:
            continue
        if not reason.rocm and finding_severity(finding, "rocm") in ("error", "silent"):
            continue  # torch.cuda is HIP on ROCm: that check passes there
        finding.lower_to_info(f"{reason.reason}; where CUDA is absent this line is never reached")
        return


def _report(check: _Check, result: FileResult, files: ScannedFiles, reached: bool) -> None:
    """TP007 at the check, once; the CUDA query the check reads is that refusal, not a second
    finding.  Info where every import of the module sits under a guard (not ``reached``)."""
    statement = check.statement
    test = statement.test if isinstance(statement, (ast.Assert, ast.If)) else statement
    data = files.data(check.path) or b""
    lines = data.decode("utf-8", "replace").splitlines()
    snippet = lines[test.lineno - 1] if test.lineno <= len(lines) else ""
    end_text = lines[(test.end_lineno or test.lineno) - 1] if (test.end_lineno or test.lineno) <= len(lines) else ""
    span = range(statement.lineno, (test.end_lineno or statement.lineno) + 1)
    for finding in result.findings:
        if finding.line in span and is_hot(finding):  # the CUDA query the check reads
            finding.lower_to_info("the check refuses where CUDA is absent: reported once, as TP007, at this line")
    what = "build" if check.build else "import"
    finding = Finding(CUDA_REQUIRED_AT_IMPORT, result.path, test.lineno, character_column(snippet, test.col_offset),
                      test.end_lineno or test.lineno, character_column(end_text, test.end_col_offset or 0),
                      f"refuses to {what} where CUDA is absent: {ast.unparse(test)[:80]}", snippet)
    if not check.rocm:
        finding.fine_on = frozenset({"rocm"})  # is_available() and device_count() answer as CUDA does there
    if not reached:
        finding.lower_to_info("every import of this module in the scanned files sits under a guard (a CUDA check, a "
                              "try, a function): the package runs without it where CUDA is absent")
    result.findings.append(finding)


def _reached_unguarded(reader: _Reader, path: str) -> bool:
    """Whether a user meets the refusing module where CUDA is absent: it is a package's
    ``__init__.py``, a script or a ``setup.py``, nothing in the scan imports it (an entry point), or a
    module imports it at its top level outside any block; not where every import of it sits in a
    ``try``, an ``if`` or a function."""
    if os.path.basename(path) in ("__init__.py", "setup.py") or path in _scripts(reader, [path]):
        return True
    target = os.path.abspath(path)
    module = reader.module(path)[0]
    guarded = False
    for other in reader.mentioning(module[-1]) if module else []:
        tree = reader.files.tree(other)
        if other == path or tree is None:
            continue
        top = {id(s) for s in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    os.path.abspath(f) == target for f in reader.imported_files(node, other)):
                if id(node) in top:
                    return True
                guarded = True
    return not guarded
