"""Tests that a ``conftest.py`` skips wherever CUDA is absent (round 47).

pytest lets a conftest decide at collection which tests run.  stable-pretraining's
``tests/conftest.py`` adds ``pytest.mark.skip`` to every item marked ``gpu`` when its
``_cuda_usable()`` is false, and to every item marked ``ddp`` when
``torch.cuda.device_count() < 2``; a CUDA call in a test marked so never runs without CUDA.

A marker counts when the ``pytest_collection_modifyitems`` hook of a scanned ``conftest.py``, in
the test file's folder or one above it, in a loop ``for item in items:`` adds a skip
(``pytest.mark.skip(...)``, or a name bound once to one) in the body of an ``if`` whose test holds
for every item that carries the marker, wherever CUDA is absent:

- the marker test: ``"gpu" in item.keywords``, ``item.get_closest_marker("gpu")`` (``is not
  None``), alone or ``or``-ed with other tests;
- joined by ``and`` only to tests that hold without CUDA: ``not torch.cuda.is_available()``,
  ``torch.cuda.device_count() < 2``, a name the hook binds once to one, or the negation of a
  function of the conftest that returns false without CUDA (every return, or every return past
  ``if not torch.cuda.is_available(): return False``);
- or alone, where the hook reaches the loop only without CUDA (``if torch.cuda.is_available():
  return`` before it, or the loop inside ``if not torch.cuda.is_available():``).

An ``elif`` counts only when every branch before it skips too.  Nothing before the skip may leave
the loop or the hook (``continue``, ``return``, ``raise``) on another condition.

A finding is lowered when it lies in the body of a test pytest collects by default (a
``test*`` function at the top of a ``test_*.py`` or ``*_test.py`` file, or a ``test*`` method of a
``Test*`` class there without bases) that carries the marker: by its decorators above any
decorator that is no mark, its class's, or the one ``pytestmark`` of its module or class.  The
signature and decorators are kept: they run when the module is imported.  So is every test that
may run unmarked: one named anywhere but at its ``def`` (a call, a subclass), a
``unittest.TestCase``, a test in a file that runs as a script or whose module another scanned
file names (an import collects it again, without the module's ``pytestmark``).

The conftest must be the one pytest reads: a hook at the top of the file, in the test's folder or
above it up to the first folder holding a configuration (``pytest.ini``, ``pytest.toml``,
``pyproject.toml``, ...) that does not say ``--noconftest``.  Without any configuration, a
conftest above the folder pytest is started from is not read; scan cannot know that folder.
"""
from __future__ import annotations

import ast
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator

from torchport.scan.cross_file_guards import (
    RUNS_AS_SCRIPT,
    ScannedFiles,
    binds_name,
    cuda_present,
    memoizing_names,
    module_statements,
    returns_false_without_cuda,
    torch_is_torch,
    unparsed,
)
from torchport.scan.files import any_word
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import is_hot

_HOOK = "pytest_collection_modifyitems"
_HOOK_NEEDLE = _HOOK.encode()
_HOOK_NAME = re.compile(rb"\b" + _HOOK_NEEDLE + rb"\b")
_WORD = re.compile(r"\w+")
_TEST_FILE = re.compile(r"test_\w*\.py|\w+_test\.py")
# Files that may make their folder pytest's rootdir (or the project's root).
_ROOT_FILES = ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg", "pyproject.toml",
               "setup.py")
_EXITS = (ast.Return, ast.Continue, ast.Break, ast.Raise)
_FALSE_CONSTANTS = (False, None, 0)
# How much of a configuration file is read for ``--noconftest``.
_MAX_CONFIG = 1_000_000
# How deep a name bound in the hook is followed to what it was bound.
_DEPTH = 4


def lower_tests_skipped_by_conftest(work: list, results: list[tuple[FileResult, int]], roots: list[str]) -> None:
    """Lower the findings in the bodies of tests a scanned conftest skips wherever CUDA is absent."""
    files = ScannedFiles(work, roots)
    skipping: dict[str, tuple[dict[str, int], str]] = {}  # folder -> (marker -> line of its skip, display)
    for job in work:
        if os.path.basename(job.path) != "conftest.py" or not files.search(job.path, _HOOK_NAME, (_HOOK_NEEDLE,)):
            continue
        tree = files.tree(job.path)
        markers = skipped_markers(tree) if tree is not None else {}
        if markers:
            skipping[os.path.dirname(os.path.abspath(job.path))] = (markers, job.display)
    if not skipping:
        return
    by_display = {job.display: job.path for job in work}
    under: list[tuple[list[Finding], str, list[tuple[dict[str, int], str]]]] = []
    for result, _ in results:
        hot = [f for f in result.findings if is_hot(f)]  # a test that never runs moots a cap at silent too
        os_path = by_display.get(result.path, "")
        if not hot or not _TEST_FILE.fullmatch(os.path.basename(os_path)):
            continue
        applying = [skipping[folder] for folder in _folders_above(os_path) if folder in skipping]
        if applying:
            under.append((hot, os_path, applying))
    elsewhere = _named_elsewhere(files, [os_path for _, os_path, _ in under])
    for hot, os_path, applying in under:
        tree = files.tree(os_path)
        data = files.data(os_path)
        if tree is None or data is None or os_path in elsewhere or RUNS_AS_SCRIPT.search(data):
            continue  # a file run as a script may run its tests unmarked
        tests = list(marked_tests(tree, data.decode("utf-8", "replace")))
        for finding in hot:
            for first, last, marks in tests:
                if not first <= finding.line <= last:
                    continue
                found = next(((marker, line, display) for markers, display in applying
                              for marker, line in sorted(markers.items()) if marker in marks), None)
                if found:
                    marker, line, display = found
                    finding.lower_to_info(f"inside a test marked {marker}, which {display}:{line} skips "
                                          "where CUDA is absent")
                break


def _named_elsewhere(files: ScannedFiles, paths: list[str]) -> set[str]:
    """The test modules among ``paths`` whose name another scanned file spells (``from test_a
    import test_moves``, ``from .test_a import *``, ``pytest_plugins = ["tests.test_a"]``): it may
    run their tests unmarked, or collect them again.  One pass over every file, whose bytes are
    searched only where they hold "test" (every such module's name does)."""
    stems: dict[bytes, list[str]] = {}
    for path in paths:
        stems.setdefault(os.path.splitext(os.path.basename(path))[0].encode(), []).append(path)
    if not stems:
        return set()
    pattern = any_word(stems)
    found: set[str] = set()
    for job in files.jobs:
        data = files.data(job.path)
        if data is None:
            return set(paths)  # unread: it may name any of them
        if b"test" in data:
            for stem in set(pattern.findall(data)):
                found.update(path for path in stems[stem] if path != job.path)
    return found


def _folders_above(os_path: str) -> Iterator[str]:
    """The file's folder and those above it, up to the first that holds a project's or pytest's
    configuration: pytest reads no conftest above its rootdir.  None at all where that
    configuration turns conftests off (``--noconftest``)."""
    folder = os.path.dirname(os.path.abspath(os_path))
    below: list[str] = []
    while True:
        below.append(folder)
        roots = [os.path.join(folder, name) for name in _ROOT_FILES if os.path.exists(os.path.join(folder, name))]
        if roots:
            if any(_turns_conftests_off(path) for path in roots):
                return
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    yield from below


def _turns_conftests_off(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"noconftest" in handle.read(_MAX_CONFIG)
    except OSError:
        return True  # unread: it may


# -- the conftest -------------------------------------------------------------------------------

def skipped_markers(tree: ast.Module) -> dict[str, int]:
    """Marker -> line of the ``add_marker`` that skips every item carrying it wherever CUDA is
    absent, read in the conftest's ``pytest_collection_modifyitems``."""
    hooks = [s for s in module_statements(tree) if binds_name(s, _HOOK)]
    if len(hooks) != 1 or not isinstance(hooks[0], ast.FunctionDef) or not torch_is_torch(tree):
        return {}
    if hooks[0] not in tree.body:
        return {}  # defined under a condition (`if os.environ.get(...):`): it may not exist
    hook = hooks[0]
    parameters = {a.arg for a in (*hook.args.posonlyargs, *hook.args.args, *hook.args.kwonlyargs)}
    if "items" not in parameters:
        return {}
    reader = _HookReader(tree, hook)
    reader.statements(hook.body, absent=False, item=None)
    return reader.found


class _HookReader:
    def __init__(self, tree: ast.Module, hook: ast.FunctionDef) -> None:
        self.found: dict[str, int] = {}
        self.pytest = _pytest_names(tree)
        self.helpers = _helpers_false_without_cuda(tree)
        stores: dict[str, int] = {}
        for node in ast.walk(hook):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                stores[node.id] = stores.get(node.id, 0) + 1
        declared = {name for node in ast.walk(hook) if isinstance(node, (ast.Global, ast.Nonlocal))
                    for name in node.names}
        self.bound = {node.targets[0].id: node.value for node in ast.walk(hook)
                      if isinstance(node, ast.Assign) and len(node.targets) == 1
                      and isinstance(node.targets[0], ast.Name) and stores.get(node.targets[0].id) == 1
                      and node.targets[0].id not in declared}
        self.items_rebound = stores.get("items", 0) > 0 or "items" in declared
        self.local = set(stores) | declared
        # module-level names bound once (``skip_gpu = pytest.mark.skip(...)`` above the hook)
        self.module_bound = _bound_once(tree)

    def _value(self, name: str) -> ast.expr | None:
        """What a name stands for in the hook: bound once there, or once at the top of the module
        and not in the hook."""
        return self.bound.get(name) if name in self.local else self.module_bound.get(name)

    def statements(self, body: list[ast.stmt], absent: bool, item: str | None) -> None:
        """Read ``body`` in order; ``absent``: it runs only where CUDA is absent; ``item``: the
        loop's item name inside ``for item in items:``."""
        for statement in body:
            if isinstance(statement, ast.For) and item is None:
                if (isinstance(statement.target, ast.Name) and isinstance(statement.iter, ast.Name)
                        and statement.iter.id == "items" and not self.items_rebound and not statement.orelse):
                    self.statements(statement.body, absent, statement.target.id)
            elif isinstance(statement, ast.If):
                if self._exits_where_cuda_is(statement):
                    absent = True  # `if torch.cuda.is_available(): return`
                    continue
                if self._true_without_cuda(statement.test) and not statement.orelse:
                    self.statements(statement.body, True, item)  # `if not torch.cuda.is_available():`
                elif item is not None:
                    self._branches(statement, absent, item)
            if any(isinstance(n, _EXITS) for n in ast.walk(statement)):
                return  # what follows may not run for every item

    def _exits_where_cuda_is(self, statement: ast.If) -> bool:
        return (not statement.orelse and isinstance(statement.body[-1], ast.Return)
                and self._false_without_cuda(statement.test))

    def _branches(self, statement: ast.If, absent: bool, item: str) -> None:
        """An ``if``/``elif`` chain in the loop: the markers of each branch that skips, while
        every branch before it skips too."""
        branch: ast.stmt = statement
        while isinstance(branch, ast.If):
            line = self._skip_line(branch.body, item)
            if line is None:
                return
            for marker in self._markers(branch.test, absent, item):
                self.found.setdefault(marker, line)
            branch = branch.orelse[0] if len(branch.orelse) == 1 else None  # type: ignore[assignment]

    def _skip_line(self, body: list[ast.stmt], item: str) -> int | None:
        """The line of ``item.add_marker(<a skip>)`` at the top of ``body``, reached for sure."""
        for statement in body:
            if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                    and isinstance(statement.value.func, ast.Attribute) and statement.value.func.attr == "add_marker"
                    and unparsed(statement.value.func.value) == item and statement.value.args
                    and self._is_skip(statement.value.args[0])):
                return statement.lineno
            if any(isinstance(n, _EXITS) for n in ast.walk(statement)):
                return None
        return None

    def _is_skip(self, mark: ast.expr, depth: int = 0) -> bool:
        if isinstance(mark, ast.Name) and depth < _DEPTH:
            value = self._value(mark.id)
            return value is not None and self._is_skip(value, depth + 1)
        call = mark if isinstance(mark, ast.Call) else None
        name = self._mark_name(call.func if call else mark)
        if name == "skip":
            return True
        if name == "skipif" and call is not None:
            condition = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == "condition"), None)
            return condition is not None and (
                isinstance(condition, ast.Constant) and condition.value is True or self._true_without_cuda(condition))
        return False

    def _mark_name(self, node: ast.expr) -> str | None:
        """``skip`` of ``pytest.mark.skip`` (``mark.skip`` with ``from pytest import mark``)."""
        if not isinstance(node, ast.Attribute):
            return None
        holder = node.value
        if isinstance(holder, ast.Attribute) and holder.attr == "mark" and isinstance(holder.value, ast.Name) \
                and holder.value.id in self.pytest.modules:
            return node.attr
        if isinstance(holder, ast.Name) and holder.id in self.pytest.marks:
            return node.attr
        return None

    def _markers(self, test: ast.expr, absent: bool, item: str) -> set[str]:
        """The markers an item must carry for ``test`` to hold wherever CUDA is absent."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            return set().union(*(self._markers(v, absent, item) for v in test.values))
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            marking = [v for v in test.values if not self._true_without_cuda(v)]
            return self._markers(marking[0], True, item) if len(marking) == 1 else set()
        marker = _marker_tested(test, item)
        return {marker} if marker is not None and absent else set()

    def _true_without_cuda(self, test: ast.expr, depth: int = 0) -> bool:
        if depth > _DEPTH:
            return False
        if isinstance(test, ast.Name):
            value = self._value(test.id)
            return value is not None and self._true_without_cuda(value, depth + 1)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._false_without_cuda(test.operand, depth + 1)
        if isinstance(test, ast.BoolOp):
            parts = [self._true_without_cuda(v, depth + 1) for v in test.values]
            return any(parts) if isinstance(test.op, ast.Or) else all(parts)
        return _count_below_one(test)

    def _false_without_cuda(self, test: ast.expr, depth: int = 0) -> bool:
        if depth > _DEPTH:
            return False
        if isinstance(test, ast.Name):
            value = self._value(test.id)
            return value is not None and self._false_without_cuda(value, depth + 1)
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self._false_without_cuda(v, depth + 1) for v in test.values)
        return cuda_present(test, self.helpers.__contains__)


def _marker_tested(test: ast.expr, item: str) -> str | None:
    """``"gpu" in item.keywords``, ``item.get_closest_marker("gpu")`` (``is not None``): the
    marker whose presence makes ``test`` true."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
            and unparsed(test.comparators[0]) == f"{item}.keywords"
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str)):
        return test.left.value
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        test = test.left
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
            and test.func.attr in ("get_closest_marker", "get_marker") and unparsed(test.func.value) == item):
        name = test.args[0] if len(test.args) == 1 and not test.keywords else next(
            (k.value for k in test.keywords if k.arg == "name"), None) if not test.args else None
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return name.value
    return None


def _count_below_one(test: ast.expr) -> bool:
    """``torch.cuda.device_count() < 2`` (``== 0``, ``<= 1``): true without CUDA."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call)
            and unparsed(test.left) == "torch.cuda.device_count()"):
        return False
    bound = test.comparators[0]
    if not (isinstance(bound, ast.Constant) and isinstance(bound.value, int) and not isinstance(bound.value, bool)):
        return False
    op = test.ops[0]
    return (isinstance(op, ast.Lt) and bound.value >= 1 or isinstance(op, ast.LtE) and bound.value >= 0
            or isinstance(op, ast.Eq) and bound.value == 0)


class _PytestNames:
    def __init__(self) -> None:
        self.modules: set[str] = set()  # `import pytest` (as ...)
        self.marks: set[str] = set()  # `from pytest import mark` (as ...)


def _pytest_names(tree: ast.Module) -> _PytestNames:
    names = _PytestNames()
    for statement in module_statements(tree):
        if isinstance(statement, ast.Import):
            names.modules |= {a.asname or a.name for a in statement.names if a.name == "pytest"}
        elif isinstance(statement, ast.ImportFrom) and statement.module == "pytest" and not statement.level:
            names.marks |= {a.asname or a.name for a in statement.names if a.name == "mark"}
    # a name the file binds otherwise too is not pytest's
    names.modules = {n for n in names.modules if _bound_only_by_import(tree, n)}
    names.marks = {n for n in names.marks if _bound_only_by_import(tree, n)}
    return names


def _bound_only_by_import(tree: ast.Module, name: str) -> bool:
    return all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in module_statements(tree) if binds_name(s, name)) \
        and not any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(tree))


def _bound_once(tree: ast.Module) -> dict[str, ast.expr]:
    """Names assigned once at the top of the module and bound nowhere else (not by an import, a
    ``def``, a ``class``, another store anywhere in the file)."""
    bindings = _binding_counts(tree)
    return {statement.targets[0].id: statement.value for statement in tree.body
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and bindings.get(statement.targets[0].id) == 1}


def _binding_counts(tree: ast.AST) -> dict[str, int]:
    """How many times each name is bound anywhere in ``tree``: stores, imports, definitions,
    ``global``/``nonlocal`` declarations (counted as a binding of their own), in one walk."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names = [node.id]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = list(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names = [node.name]
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names = [node.rest]
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _helpers_false_without_cuda(tree: ast.Module) -> set[str]:
    """Functions of the conftest, without parameters, that return something false wherever CUDA
    is absent: every return, or every return past ``if not torch.cuda.is_available(): return
    False`` at the top of the body (stable-pretraining's ``_cuda_usable``)."""
    memoizing = memoizing_names(tree)
    found: set[str] = set()
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or function.args.args or function.args.posonlyargs \
                or function.args.kwonlyargs or function.args.vararg or function.args.kwarg:
            continue
        if any(unparsed(d).split("(")[0] not in memoizing for d in function.decorator_list):
            continue
        if sum(1 for s in module_statements(tree) if binds_name(s, function.name)) != 1:
            continue
        if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)) for n in ast.walk(function)):
            continue
        if _false_past_a_guard(function) or returns_false_without_cuda(function):
            found.add(function.name)
    return found


def _false_past_a_guard(function: ast.FunctionDef) -> bool:
    for statement in function.body:
        if (isinstance(statement, ast.If) and not statement.orelse
                and isinstance(statement.test, ast.UnaryOp) and isinstance(statement.test.op, ast.Not)
                and cuda_present(statement.test.operand)):
            returns = [n for n in ast.walk(statement) if isinstance(n, ast.Return)]
            return (isinstance(statement.body[-1], ast.Return)
                    and all(_falsy(r.value) for r in returns))
        if any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(statement)):
            return False
    return False


def _falsy(value: ast.expr | None) -> bool:
    return value is None or isinstance(value, ast.Constant) and value.value in _FALSE_CONSTANTS


# -- the test file --------------------------------------------------------------------------------

def marked_tests(tree: ast.Module, text: str) -> Iterator[tuple[int, int, set[str]]]:
    """(first line of the body, last line, the markers it carries) for each test pytest collects
    by default in the file, that nothing else in the file can run: not named but at its ``def``
    (a call, a subclass, an alias would run it unmarked), not a ``unittest.TestCase`` (the unittest
    runner knows no pytest marker).  The caller leaves out a file that runs as a script."""
    words = Counter(_WORD.findall(text))  # one pass: a file may hold thousands of tests

    def spelled_once(name: str) -> bool:
        return words[name] == 1

    pytest = _pytest_names(tree)
    bound = _bound_once(tree)
    marks_of: Callable[[ast.expr], set[str]] = lambda node: _marks(node, pytest, bound)  # noqa: E731
    module_marks = _pytestmark(tree, tree.body, marks_of)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if spelled_once(node.name):
                yield _body_span(node) + (module_marks | _decorated(node, marks_of),)
        elif (isinstance(node, ast.ClassDef) and node.name.startswith("Test") and spelled_once(node.name)
              and all(unparsed(base) == "object" for base in node.bases) and not node.keywords):
            class_marks = module_marks | _decorated(node, marks_of) | _pytestmark(node, node.body, marks_of)
            for method in node.body:
                if (isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name.startswith("test")
                        and spelled_once(method.name)):
                    yield _body_span(method) + (class_marks | _decorated(method, marks_of),)


def _body_span(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """The lines of the body that hold nothing of the signature (its defaults and annotations run
    when the module is imported, even in a skipped test)."""
    header = [function.lineno] + [getattr(n, "end_lineno", None) or 0 for n in ast.walk(function.args)]
    if function.returns is not None:
        header.append(function.returns.end_lineno or function.returns.lineno)
    first = function.body[0].lineno
    if max(header) >= first:
        first = max(header) + 1
    return first, function.end_lineno or function.body[-1].lineno


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
               marks_of: Callable[[ast.expr], set[str]]) -> set[str]:
    """The markers of the decorators above every decorator that is no mark: one that is no mark
    may return another object, without the marks applied before it."""
    found: set[str] = set()
    for decorator in node.decorator_list:
        marks = marks_of(decorator)
        if not marks:
            break
        found |= marks
    return found


def _pytestmark(scope: ast.Module | ast.ClassDef, body: list[ast.stmt],
                marks_of: Callable[[ast.expr], set[str]]) -> set[str]:
    """The markers of the one ``pytestmark = ...`` at the top of ``body``, where nothing else in the
    module or class binds the name (a rebinding in a block, an annotation, ``global``)."""
    bindings = [s for s in _statements_of(body) if binds_name(s, "pytestmark")]
    if len(bindings) != 1 or not isinstance(bindings[0], ast.Assign) or bindings[0] not in body:
        return set()
    if any(isinstance(n, ast.Global) and "pytestmark" in n.names for n in ast.walk(scope)):
        return set()
    return marks_of(bindings[0].value)


def _statements_of(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module's or a class's body, those in its blocks included."""
    return module_statements(ast.Module(body=body, type_ignores=[]))


def _marks(node: ast.expr, pytest: _PytestNames, bound: dict[str, ast.expr], depth: int = 0) -> set[str]:
    """The markers an expression of a decorator or ``pytestmark`` applies: ``pytest.mark.gpu``,
    ``pytest.mark.gpu(...)``, ``mark.gpu``, a name bound once to one, a list of them."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return set().union(*(_marks(e, pytest, bound, depth) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.Name) and depth < _DEPTH and node.id in bound:
        return _marks(bound[node.id], pytest, bound, depth + 1)
    if isinstance(node, ast.Call):
        node = node.func
    if not isinstance(node, ast.Attribute):
        return set()
    holder = node.value
    if (isinstance(holder, ast.Attribute) and holder.attr == "mark" and isinstance(holder.value, ast.Name)
            and holder.value.id in pytest.modules) or (isinstance(holder, ast.Name) and holder.id in pytest.marks):
        return {node.attr}
    return set()
