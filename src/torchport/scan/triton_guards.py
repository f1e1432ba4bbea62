"""Triton modules the rest of the package imports only behind a guard (round 64).

A Triton kernel is a lock-in where it runs: a module that imports ``triton`` fails to import where
triton is absent (CPU and MPS builds of torch, TPU and Trainium hosts without it), and a launched
kernel fails on tensors of a device Triton does not target.  Many packages ship such modules beside
a portable path and reach them only through a guard, which judges read as such: piper-kernels'
``try: from .triton import kernel / except ModuleNotFoundError: kernel = None``, dpgmm's
``if device.type == "cuda": try: from .variants.triton import Updater``, flash-mlm's
``if _TRITON_AVAILABLE: from flash_mlm.mlm_kernel import ...``.

This pass runs after every file is scanned, over the packages scanned whole.  An error or silent
Triton finding (TP503) of a module is lowered to info when every import of the module in the
package's other files (tests aside), and every other use of its name there, lies behind one of:

- a ``try`` whose handlers catch the failed import (``ImportError``, ``ModuleNotFoundError``,
  ``Exception``, ``BaseException`` or a bare ``except``) and carry on: no handler ends in ``raise``;
- an ``if`` with a conjunct that is false without CUDA (``torch.cuda.is_available()``, a helper
  whose every return is) or for tensors not on CUDA (``x.is_cuda``, ``x.device.type == "cuda"``,
  ``device == "cuda"``, ``x.device.type in ("cuda",)``);
- an ``if`` with a conjunct that calls a function named for the choice of the Triton path
  (``use_triton(x)``, ``is_triton_available()``, ``has_triton()``, ``triton_supported()``);
- an ``if`` with a conjunct that is false where triton cannot be imported:
  ``importlib.util.find_spec("triton")``, a name of the file whose every store is false, a CUDA
  query, or lies in a ``try`` after ``import triton``, and a function without parameters of the
  file every return of which is such a name, constant or query;
- a module that is itself imported only behind such guards (the kernels its guarded module imports).

Only the Triton findings are lowered: the guard keeps triton's absence and non-CUDA tensors away
from the kernels, and says nothing of the module's other code.  Kept, as in the CUDA-check pass
(``cross_file_guards``): a module that also runs as a script, one a built import, a notebook, a
config or an entry point may name, and every module of a package that finds modules at run time.
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable

from torchport.scan.cross_file_guards import (
    FINDS_MODULES, FINDS_MODULES_NEEDLES, CudaHelpers, ImportReach, ScannedFiles, ancestors, cuda_present,
    dotted_module, guarded_imports, unparsed)
from torchport.scan.model import FileResult
from torchport.scan.policy import still_hot
from torchport.scan.rules import TRITON_KERNEL

# Handlers that catch an import failing for want of triton.
_CATCHES_IMPORT_FAILURE = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# A call that decides by its name whether to take the Triton path: `use_triton(x)`,
# `is_triton_available()`, `has_triton()`, `triton_supported()`.
_ASKS_FOR_TRITON = re.compile(r"_*(?:(?:is|has|use|can|should|check|supports?)_\w*triton\w*"
                              r"|triton\w*_(?:available|supported|enabled|usable))")
# How many importing modules deep the guard is followed.
_MAX_DEPTH = 4


def lower_guarded_triton_modules(work: list, results: list[tuple[FileResult, int]],
                                 whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower the Triton findings of modules the rest of the package imports only behind a guard."""
    by_display = {job.display: job.path for job in work}
    candidates = []
    for result, _ in results:
        os_path = by_display.get(result.path, "")
        hot = [f for f in result.findings if f.rule_id == TRITON_KERNEL and still_hot(f)]
        if (hot and os_path.endswith(".py") and os.path.basename(os_path) != "__init__.py"
                and whole_package(os_path)):
            candidates.append((os_path, hot))
    if not candidates:
        return
    files = ScannedFiles([job for job in work if job.path.endswith(".py")], roots)
    if files.anywhere(FINDS_MODULES, FINDS_MODULES_NEEDLES):
        return  # a registry walk may import any module of the package
    guards = _Guards(files, roots)
    for os_path, hot in candidates:
        found = guards.imports_of(os_path)
        if not found:
            continue
        where = ", ".join(found[:3]) + (" ..." if len(found) > 3 else "")
        module = ".".join(dotted_module(os_path)[0])
        for finding in hot:
            finding.lower_to_info(
                f"module {module} is imported only behind a guard ({where}): where triton cannot be imported "
                "(CPU and MPS builds of torch) or, under a CUDA test, where tensors are not on CUDA, the package does "
                "not reach this kernel")


class _Guards:
    """The guarded imports of each module, read once."""

    def __init__(self, files: ScannedFiles, roots: list[str]) -> None:
        self.files = files
        self.reach = ImportReach(files, roots)
        self.helpers = CudaHelpers(files)
        self._imports: dict[str, list[str] | None] = {}
        self._flags: dict[str, tuple[set[str], set[str]]] = {}

    def imports_of(self, os_path: str, depth: int = 0) -> list[str] | None:
        """Where the package imports the module, each import behind a guard; None where one is not."""
        if os_path not in self._imports:
            self._imports[os_path] = None  # a module reached through itself is no evidence
            if (depth <= _MAX_DEPTH and not self.files.is_test(os_path)
                    and os.path.basename(os_path) != "__init__.py" and self.reach.only_by_imports(os_path)):
                self._imports[os_path] = guarded_imports(
                    dotted_module(os_path)[0], os_path, self.files,
                    lambda node, parents, path: self._guard(node, parents, path, depth))
        return self._imports[os_path]

    def _guard(self, node: ast.AST, parents: dict[int, ast.AST], path: str, depth: int) -> str | None:
        helper = self.helpers.in_file(path)
        flags, checks = self._flags_of(path)
        for ancestor, child in ancestors(node, parents):
            if isinstance(ancestor, ast.Try) and child in ancestor.body and _carries_on(ancestor):
                return f"in a `try` that catches a failed import (line {ancestor.lineno})"
            if isinstance(ancestor, ast.If) and child in ancestor.body and _guards(ancestor.test, helper, flags, checks):
                return f"under `{unparsed(ancestor.test)}`"
        if self.imports_of(path, depth + 1):
            return f"in module {'.'.join(dotted_module(path)[0])}, itself imported only behind a guard"
        return None

    def _flags_of(self, path: str) -> tuple[set[str], set[str]]:
        if path not in self._flags:
            tree = self.files.tree(path)
            self._flags[path] = _triton_flags(tree) if tree is not None else (set(), set())
        return self._flags[path]


def _carries_on(statement: ast.Try) -> bool:
    """A handler catches a failed import and none ends in ``raise``: the package goes on without it."""
    def catches(handler: ast.ExceptHandler) -> bool:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught is not None else []
        return caught is None or any(unparsed(n).split(".")[-1] in _CATCHES_IMPORT_FAILURE for n in names)
    return (any(catches(h) for h in statement.handlers)
            and not any(isinstance(h.body[-1], ast.Raise) for h in statement.handlers))


def _guards(test: ast.expr, helper: Callable[[str], bool], flags: set[str], checks: set[str]) -> bool:
    """A conjunct of ``test`` is false without CUDA, for tensors not on CUDA, or without triton."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_guards(value, helper, flags, checks) for value in test.values)
    if cuda_present(test, helper) or _on_cuda(test) or _finds_triton(test):
        return True
    if isinstance(test, ast.Name):
        return test.id in flags
    if not isinstance(test, ast.Call):
        return False
    if isinstance(test.func, ast.Name) and not test.args and not test.keywords and test.func.id in checks:
        return True
    return bool(_ASKS_FOR_TRITON.fullmatch(unparsed(test.func).split(".")[-1]))


def _is_cuda_string(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] == "cuda"


def _on_cuda(test: ast.expr) -> bool:
    """``x.is_cuda``, ``x.device.type == "cuda"``, ``device == "cuda:0"``, ``x.device.type in ("cuda",)``."""
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
        return True
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    right = test.comparators[0]
    if isinstance(test.ops[0], ast.Eq):
        return _is_cuda_string(right) or _is_cuda_string(test.left)
    if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts:
        return all(_is_cuda_string(e) for e in right.elts)
    return False


def _finds_triton(test: ast.expr) -> bool:
    """``importlib.util.find_spec("triton")``, alone or compared ``is not None``."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        test = test.left
    return (isinstance(test, ast.Call) and unparsed(test.func).split(".")[-1] == "find_spec" and len(test.args) == 1
            and isinstance(test.args[0], ast.Constant) and test.args[0].value == "triton")


def _triton_flags(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The file's names true only where triton imports (``_TRITON_AVAILABLE``), and its functions without
    parameters that return only such names, false constants or CUDA queries (``_check_triton()``)."""
    # each store of a name: (false without triton, whatever its value; not merely a false constant)
    stores: dict[str, list[tuple[bool, bool]]] = {}
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            asks = _after_triton_import(node, parents) or cuda_present(node.value) or _finds_triton(node.value)
            store = (asks or _false_constant(node.value), asks)
            targets: list[ast.AST] = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, (ast.AugAssign, ast.Delete, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
                               ast.NamedExpr)):
            store, targets = (False, False), [node]  # any name these bind is no flag
        else:
            for bound in _other_bindings(node):
                stores.setdefault(bound, []).append((False, False))
            continue
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and isinstance(name.ctx, (ast.Store, ast.Del)):
                    stores.setdefault(name.id, []).append(store)
    flags = {name for name, kinds in stores.items() if all(ok for ok, _ in kinds) and any(asks for _, asks in kinds)}
    checks = set()
    for statement in tree.body:
        if (isinstance(statement, ast.FunctionDef) and not statement.args.args and not statement.args.posonlyargs
                and not statement.args.vararg and not statement.decorator_list):
            returns = [n for n in ast.walk(statement) if isinstance(n, ast.Return)]
            if returns and all(r.value is not None and (_false_without_triton(r.value) or (
                    isinstance(r.value, ast.Name) and r.value.id in flags)) for r in returns):
                checks.add(statement.name)
    return flags, checks


def _other_bindings(node: ast.AST) -> list[str]:
    """Names an import, a definition or an ``except ... as`` binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    return []


def _false_constant(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and (value.value is False or value.value is None)


def _false_without_triton(value: ast.expr) -> bool:
    return _false_constant(value) or cuda_present(value) or _finds_triton(value)


def _after_triton_import(statement: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """The statement lies in a ``try`` body after an ``import triton`` of that body."""
    for ancestor, child in ancestors(statement, parents):
        if isinstance(ancestor, ast.Try) and child in ancestor.body:
            before = ancestor.body[:ancestor.body.index(child)]
            if any(isinstance(s, ast.Import) and any(a.name.split(".")[0] == "triton" for a in s.names)
                   or isinstance(s, ast.ImportFrom) and (s.module or "").split(".")[0] == "triton" and not s.level
                   for s in before):
                return True
    return False
