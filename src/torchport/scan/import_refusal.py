"""TP007: modules that refuse to import where CUDA is absent, and the code only they lead to
(round 61).

Python runs a module's top-level statements before anything that imports it goes on, and a
package's ``__init__.py`` before any module in it.  A module whose top level stops, where CUDA is
absent, with its own error that CUDA is required is the lock-in a user meets: it is reported there,
at error (TP007), once.  The code behind it never runs there, so a CUDA call behind it is no second
consequence and is info (trainstream JIT-builds its extension at ``import trainstream`` and raises
``BuildError("TrainStream needs a CUDA build of PyTorch")``; judges called the memory statistics of
its wrapper, behind that, wrong at silent).

- **A refusal** sits at the top level of a module: ``assert torch.cuda.is_available()``,
  ``if not torch.cuda.is_available(): raise ...``, ``if torch.version.cuda is None: raise ...``
  (or an exit), or a call of a plain function in the same folder whose body opens with such a
  check after its docstring and imports (trainstream's ``_C = _build.load()``).  It may also sit
  in the ``except ImportError:`` of a top-level ``try`` that imports the project's compiled
  extension (a module no scanned ``.py`` file is) where no scanned file builds a CPU extension.
  Not a refusal: a skip (``raise unittest.SkipTest``), a test file's check, a decorated, async or
  generator function, a name bound twice, a ``torch`` that is not torch.
- **Behind it**: the refusing module's lines after the refusal; each module whose top level
  imports the refusing file (the import resolved to that file, not matched by name), from that
  import on; every module of a package whose ``__init__.py`` refuses, read on the chain of
  ``__init__.py`` files, but the modules the ``__init__.py`` imports up to its refusal and what they
  import in turn (their code may run before it), modules that run as scripts, and the package at a
  scanned root; and, for a ``setup.py`` that refuses at its top level and builds a
  ``CUDAExtension``, the modules of its project that import that extension at their top level.
- **Kept**: the refusing function up to its check; and where the refusal asks ``is_available()`` or
  ``device_count()`` (true on ROCm, where torch.cuda is HIP) or sits in a fallback (a ROCm build of
  the extension skips it), every finding that is error or silent on ROCm, TP007 itself fine there.
  Only ``torch.version.cuda`` read outside a fallback refuses a ROCm build too.

Only files the scan read take part, and only imports by statement: ``importlib.import_module``
before a package's refusal keeps its package whole.
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from torchport.scan.cross_file_guards import (RUNS_AS_SCRIPT, ScannedFiles, binds_name, dotted_module,
                                              from_module, imported_modules, module_statements, torch_is_torch)
from torchport.scan.detectors.shared import is_test_file
from torchport.scan.detectors.syntax import character_column
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import is_hot
from torchport.scan.rules import CUDA_REQUIRED_AT_IMPORT, finding_severity

RULE_IDS = (CUDA_REQUIRED_AT_IMPORT,)

# The quick test the workers make on each file: a CUDA query in an ``assert`` or an ``if``, in any
# spelling (``cuda.is_available()`` after ``from torch import cuda``).
_QUERIES = ("is_available()", "version.cuda", "device_count()")
_CHECK_HEAD = re.compile(r"(assert|if)\b")
# A function's opening: how many lines a check may sit below its ``def``.
_OPENING_LINES = 40
# The lines at the left margin a check in a top-level block sits under.
_BLOCK_HEADS = ("try:", "except", "else:", "finally:")
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
_FALLBACK_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "OSError", "Exception"})
# How many imports deep refusing modules are followed.
_DEPTH = 6
# Signs that a module runs as a script: `python pkg/tool.py` imports no package.
_SCRIPT_SIGNS = re.compile(rb"\A#!|\bsys\.argv\b|\bargparse\b|\bparse_args\(|\bfire\.Fire\(|\bclick\.command\b"
                           rb"|^main\(\)", re.MULTILINE)
_DYNAMIC_IMPORT = re.compile(r"\b(?:import_module|__import__|run_module|exec)\(")

# What a refusal reads: the build (no CUDA build of torch, ROCm's included) or the machine
# (is_available(), true on ROCm).
_BUILD, _MACHINE = "build", "machine"
# What a module may call torch's CUDA queries: `import torch as th`, `from torch import cuda`.
_Spellings = dict[str, str]


@dataclass
class _Refusal:
    path: str  # the refusing module
    module: tuple[str, ...]
    line: int  # its top-level statement that refuses (a check, a call, an import)
    end_line: int
    kind: str
    shown: str  # "path:line" of the check itself
    # the refusing function from its ``def`` to its check, which runs before the check refuses
    kept: tuple[str, int, int] | None = None
    is_package: bool = False


@dataclass
class _Check:
    """A check that refuses, and the kinds of the refusals through it (TP007 is reported once)."""
    path: str
    statement: ast.stmt
    kinds: set[str] = field(default_factory=set)
    setup: bool = False


def refusal_hints(text: str) -> tuple[bool, list[str]]:
    """The workers' quick test: whether the file holds such a check at its left margin (or in a
    top-level ``try``), and the functions defined there that may open with one (a check a few lines
    below their ``def``).  The pass over every file reads the candidates whole."""
    at_margin, openings = False, []
    for query in _QUERIES:
        at = text.find(query)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            head = _CHECK_HEAD.match(text[start:at].lstrip(" \t"))
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


def _present(test: ast.expr, names: _Spellings) -> str | None:
    """What ``assert <test>`` refuses without: ``torch.cuda.is_available()``, ``torch.version.cuda``
    (``is not None``), ``torch.cuda.device_count() > 0``, or an ``and`` holding one."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        kinds = {kind for value in test.values if (kind := _present(value, names))}
        return _BUILD if _BUILD in kinds else (_MACHINE if kinds else None)
    source = _canonical(test, names)
    if source == "torch.cuda.is_available()":
        return _MACHINE
    if source in ("torch.version.cuda", "torch.version.cuda is not None"):
        return _BUILD
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and _canonical(test.left, names) == "torch.cuda.device_count()" and isinstance(test.comparators[0], ast.Constant)):
        bound, op = test.comparators[0].value, test.ops[0]
        if (isinstance(op, ast.Gt) and bound == 0) or (isinstance(op, ast.GtE) and bound == 1):
            return _MACHINE
    return None


def _absent(test: ast.expr, names: _Spellings) -> str | None:
    """What ``if <test>: raise`` refuses without: ``not`` one of ``_present``'s tests,
    ``torch.version.cuda is None``, ``torch.cuda.device_count() == 0`` (``< 1``), or an ``or``
    holding one."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        kinds = {kind for value in test.values if (kind := _absent(value, names))}
        return _BUILD if _BUILD in kinds else (_MACHINE if kinds else None)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if isinstance(test.operand, ast.BoolOp):
            return None  # `not (a and b)`: read no further
        if _canonical(test.operand, names) == "torch.cuda.device_count()":
            return _MACHINE
        return _present(test.operand, names)
    if _canonical(test, names) == "torch.version.cuda is None":
        return _BUILD
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and _canonical(test.left, names) == "torch.cuda.device_count()" and isinstance(test.comparators[0], ast.Constant)):
        bound, op = test.comparators[0].value, test.ops[0]
        if (isinstance(op, ast.Eq) and bound == 0) or (isinstance(op, ast.Lt) and bound == 1) or (
                isinstance(op, ast.LtE) and bound == 0):
            return _MACHINE
    return None


def _stops(statement: ast.stmt) -> bool:
    """A raise (not a skip) or an exit."""
    if isinstance(statement, ast.Raise):
        return statement.exc is None or "skip" not in ast.unparse(statement.exc).lower()
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and ast.unparse(statement.value.func) in _EXIT_CALLS)


def _check(statement: ast.stmt, names: _Spellings) -> str | None:
    """The kind of refusal the statement is, if it is one."""
    if isinstance(statement, ast.Assert):
        return _present(statement.test, names)
    if isinstance(statement, ast.If) and statement.body and _stops(statement.body[-1]):
        return _absent(statement.test, names)
    return None


def _opening_check(function: ast.stmt, names: _Spellings) -> ast.stmt | None:
    """The check a plain function opens with, after its docstring, imports and other such checks;
    the strongest of them where several open it.  A decorator may catch what it raises, and an
    async or generator function runs nothing when called."""
    if (not isinstance(function, ast.FunctionDef) or function.decorator_list
            or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(function))):
        return None
    found: ast.stmt | None = None
    for statement in function.body:
        kind = _check(statement, names)
        if kind is not None:
            if found is None or (kind == _BUILD and _check(found, names) != _BUILD):
                found = statement
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

    def __init__(self, files: ScannedFiles, roots: list[str]) -> None:
        self.files = files
        self.paths = {os.path.abspath(job.path): job.path for job in files.jobs}
        self.roots = {os.path.abspath(root) for root in roots}
        self._modules: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._cpu_extension: bool | None = None

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
        for statement in module_statements(init):
            if not binds_name(statement, name):
                continue
            if not (isinstance(statement, ast.ImportFrom) and (
                    from_module(statement, package) == package + (name,)
                    or (from_module(statement, package) == package
                        and any((a.asname or a.name) == name and a.name == name for a in statement.names)))):
                return False
        return True

    def builds_cpu_extension(self) -> bool:
        if self._cpu_extension is None:
            self._cpu_extension = any(b"CppExtension" in (self.files.data(job.path) or b"")
                                      for job in self.files.jobs)
        return self._cpu_extension

    def refusing_function(self, path: str, name: str) -> tuple[ast.stmt, ast.stmt, str] | None:
        """(the function, the check it opens with, its kind) where ``path`` defines ``name`` once."""
        data = self.files.data(path)
        if data is None or name not in refusal_hints(data.decode("utf-8", "replace"))[1]:
            return None
        tree = self.files.tree(path)
        if tree is None or not _bound_once(tree, name):
            return None
        function = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
        check = _opening_check(function, spellings(tree)) if function is not None else None
        if function is None or check is None:
            return None
        return function, check, _check(check, spellings(tree)) or _MACHINE


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
        if any(_names_a_scanned_module(reader, s, path) for s in imports) or reader.builds_cpu_extension():
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


def _own_refusal(reader: _Reader, path: str, checks: dict[tuple[str, int], _Check]) -> _Refusal | None:
    """The first refusal at the top level of the module: a check, or a call of a function beside
    it that opens with one (recorded in ``checks``)."""
    tree = reader.files.tree(path)
    if tree is None or is_test_file(path):
        return None
    module = reader.module(path)[0]
    is_package = os.path.basename(path) == "__init__.py"
    bound: dict[str, tuple[str, str]] | None = None
    names = spellings(tree)
    for statement, in_fallback in _top_level(reader, path, tree):
        kind = _check(statement, names)
        if kind is not None:
            kind = _MACHINE if in_fallback else kind
            check = checks.setdefault((path, statement.lineno), _Check(path, statement,
                                                                       setup=os.path.basename(path) == "setup.py"))
            check.kinds.add(kind)
            return _Refusal(path, module, statement.lineno, statement.end_lineno or statement.lineno, kind,
                            f"{reader.files.display.get(path, path)}:{statement.lineno}", is_package=is_package)
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
        function, check_statement, kind = found
        kind = _MACHINE if in_fallback else kind
        check = checks.setdefault((home[0], check_statement.lineno), _Check(home[0], check_statement))
        check.kinds.add(kind)
        return _Refusal(path, module, statement.lineno, statement.end_lineno or statement.lineno, kind,
                        f"{reader.files.display.get(home[0], home[0])}:{check_statement.lineno}",
                        (home[0], function.lineno, check_statement.end_lineno or check_statement.lineno),
                        is_package)
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
                data = reader.files.data(submodule) or b""
                for function in refusal_hints(data.decode("utf-8", "replace"))[1]:
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
    kind: str
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
    reader = _Reader(files, roots)
    checks: dict[tuple[str, int], _Check] = {}
    refusals = {path: found for path in sorted(candidates) if (found := _own_refusal(reader, path, checks))}
    if not refusals:
        return
    behind: dict[str, list[_Behind]] = {}
    pending = list(refusals.values())
    for _ in range(_DEPTH):
        following: list[_Refusal] = []
        for refusal in pending:
            behind.setdefault(refusal.path, []).append(_Behind(
                refusal.end_line, refusal.kind,
                f"past line {refusal.line}, where this module refuses to import without CUDA ({refusal.shown})"))
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
    for path, reasons in behind.items():
        result = results_by_path.get(path)
        if result is not None:
            for finding in result.findings:
                _lower(finding, reasons, [(start, end) for home, start, end in kept if home == path])
    for check in checks.values():
        result = results_by_path.get(check.path)
        if result is not None:
            _report(check, result, files)


def _callers_beside(files: ScannedFiles, jobs: list, openings: list[tuple[str, list[str]]]) -> set[str]:
    """The modules beside one that defines a function opening with a check that spell a call of it
    (in its own file, only a call at the left margin: ``_C = load()``)."""
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
    for path in reader.files.mentioning(refusal.module[-1].encode()) or [] if refusal.module else []:
        absolute = os.path.abspath(path)
        if path in refusals or absolute in targets or (refusal.is_package and absolute.startswith(folder)):
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
                    refusal.kind, refusal.shown, is_package=os.path.basename(path) == "__init__.py")


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
    if tree is None or folder in reader.roots:
        return []
    before = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno <= refusal.end_line]
    if any(_DYNAMIC_IMPORT.search(ast.unparse(n)) for n in before if not isinstance(n, (ast.Import, ast.ImportFrom))
           and not hasattr(n, "body")):
        return []  # a module imported by a name built at run time may run before the refusal
    early = _imported_early(reader, refusal.path, before)
    package = refusal.module
    reason = (f"in package {'.'.join(package)}, whose __init__.py refuses to import without CUDA "
              f"(line {refusal.line}; {refusal.shown}): Python imports the package before any of its modules")
    members = [path for absolute, path in reader.paths.items() if absolute.startswith(folder + os.sep)
               and path != refusal.path and path not in early and reader.module(path)[0][:len(package)] == package
               and len(reader.module(path)[0]) > len(package)]
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
        behind.setdefault(path, []).append(_Behind(0, refusal.kind, reason))
    return found


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
    for absolute, path in reader.paths.items():
        if not names or path in refusals or not absolute.startswith(folder + os.sep) or _project_of(absolute) != folder:
            continue
        tree = reader.files.tree(path) if any(n[-1].encode() in (reader.files.data(path) or b"") for n in names) else None
        package = reader.module(path)[1]
        statement = next((s for s in (tree.body if tree else []) if isinstance(s, (ast.Import, ast.ImportFrom))
                          and imported_modules(s, package) & names), None)
        if statement is not None:
            importer = _Refusal(path, reader.module(path)[0], statement.lineno, statement.end_lineno or statement.lineno,
                                refusal.kind, refusal.shown, is_package=os.path.basename(path) == "__init__.py")
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
        if reason.kind == _MACHINE and finding_severity(finding, "rocm") in ("error", "silent"):
            continue  # torch.cuda is HIP on ROCm: that check passes there
        finding.lower_to_info(f"{reason.reason}; where CUDA is absent this line is never reached")
        return


def _report(check: _Check, result: FileResult, files: ScannedFiles) -> None:
    """TP007 at the check, once; the CUDA query the check reads is that refusal, not a second finding."""
    statement = check.statement
    test = statement.test if isinstance(statement, (ast.Assert, ast.If)) else statement
    data = files.data(check.path) or b""
    lines = data.decode("utf-8", "replace").splitlines()
    snippet = lines[test.lineno - 1] if test.lineno <= len(lines) else ""
    end_text = lines[(test.end_lineno or test.lineno) - 1] if (test.end_lineno or test.lineno) <= len(lines) else ""
    span = range(statement.lineno, (statement.test.end_lineno or statement.lineno) + 1) if isinstance(
        statement, (ast.Assert, ast.If)) else range(statement.lineno, statement.lineno + 1)
    for finding in result.findings:
        if finding.line in span and is_hot(finding):  # the CUDA query the check reads
            finding.lower_to_info("the check refuses where CUDA is absent: reported once, as TP007, at this line")
    what = "build" if check.setup else "import"
    finding = Finding(CUDA_REQUIRED_AT_IMPORT, result.path, test.lineno, character_column(snippet, test.col_offset),
                      test.end_lineno or test.lineno, character_column(end_text, test.end_col_offset or 0),
                      f"refuses to {what} where CUDA is absent: {ast.unparse(test)[:80]}", snippet)
    if _BUILD not in check.kinds:
        finding.fine_on = frozenset({"rocm"})  # is_available() and device_count() answer as CUDA does there
    result.findings.append(finding)
