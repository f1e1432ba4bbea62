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

- a ``try`` in the same scope whose handlers catch the failed import (``ImportError``,
  ``ModuleNotFoundError``, ``Exception``, ``BaseException`` or a bare ``except``) and carry on: no
  handler raises or exits among its own statements (a ``raise`` under a test re-raises other failures);
- an ``if`` with a conjunct that is false without CUDA (``torch.cuda.is_available()``, a helper whose
  every return is, not shadowed) or for tensors not on CUDA (``x.is_cuda``, ``x.device.type ==
  "cuda"``, ``x.device.type in ("cuda",)``: a device's type, not a string a caller chooses);
- an ``if`` with a conjunct that calls a function the file imports and names for the choice of the
  Triton path (``use_triton(x)``, ``is_triton_available()``; not ``is_triton_disabled()``);
- an ``if`` with a conjunct that is false where triton cannot be imported:
  ``importlib.util.find_spec("triton")``; a name of the file, spelled by no other file and stored by
  no string, whose every store is false, a CUDA query or lies in a ``try`` after ``import triton``; or
  a function without parameters, defined once in the file, every return of which is such a name,
  constant or query;
- an import at the top of a module that is itself imported only behind such guards, followed through
  up to twelve importing modules.

The names such an import binds must be guarded too: each use in the file lies behind one of the
guards above, under a test of the name (``if kernel is not None``), is a comparison with None, or
follows the import in its ``try``; no string in the file spells the name, and no other file imports
it from there or reads an attribute so named.

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
    CudaHelpers, ImportReach, ScannedFiles, ancestors, cuda_present,
    dotted_module, from_module, guard_places, guarded_imports, hot_modules, is_module_file, unparsed, unshadowed)
from torchport.scan.detectors.syntax import bound_names, catches_a_missing_module, import_binds
from torchport.scan.model import FileResult
from torchport.scan.policy import still_hot
from torchport.scan.rules import TRITON_KERNEL

# A call that decides by its name whether to take the Triton path: `use_triton(x)`,
# `is_triton_available()`, `has_triton()`, `triton_supported()`; not `is_triton_disabled()`,
# `use_triton_fallback()` or `triton_cpu_available()`.
_SAYS_YES = re.compile(r"avail|support|installed|enabled|usable|^_*(?:has|use|can|check|is)_triton", re.IGNORECASE)
_SAYS_NO = re.compile(r"disabl|skip|no_|not_|_no|_not|without|fallback|interpret|cpu|emulat|off\b|_off",
                      re.IGNORECASE)
# Calls that end the program: a handler making them does not carry on.
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit", "os.abort"})
# How many importing modules deep the guard is followed.
_MAX_DEPTH = 12
_Scope = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def lower_guarded_triton_modules(work: list, results: list[tuple[FileResult, int]],
                                 whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower the Triton findings of modules the rest of the package imports only behind a guard."""
    found_modules = hot_modules(work, results, whole_package, roots, lambda result, _: [
        f for f in result.findings if f.rule_id == TRITON_KERNEL and still_hot(f)])
    if found_modules is None:
        return
    files, candidates = found_modules
    guards = _Guards(files, roots)
    for os_path, hot in candidates:
        found = guards.imports_of(os_path)
        if not found:
            continue
        module = ".".join(dotted_module(os_path)[0])
        for finding in hot:
            finding.lower_to_info(
                f"module {module} is imported only behind a guard ({guard_places(found)}): where the guard fails "
                "(triton cannot be imported, or the CUDA or device test is false), the package neither imports "
                "nor calls this kernel")


class _Guards:
    """The guarded imports of each module, read once."""

    def __init__(self, files: ScannedFiles, roots: list[str]) -> None:
        self.files = files
        self.reach = ImportReach(files, roots)
        self.helpers = CudaHelpers(files)
        self._imports: dict[str, list[str] | None] = {}
        self._reading: set[str] = set()
        self._cut = False  # an answer read while a chain was cut short depends on where it began
        self._provisional: dict[str, list[str] | None] = {}
        self._flags: dict[str, tuple[set[str], set[str], set[str]]] = {}
        self._after_import: dict[int, set[int]] = {}
        self._reads: dict[str, _Reads | None] = {}
        self._uses_by_file: dict[str, tuple[dict[str, list[ast.Name]], set[str]] | None] = {}

    def imports_of(self, os_path: str, depth: int = 0) -> list[str] | None:
        """Where the package imports the module, each import behind a guard; None where one is not."""
        if depth == 0:
            self._provisional.clear()
        if os_path in self._imports:
            return self._imports[os_path]
        if os_path in self._provisional:
            self._cut = True
            return self._provisional[os_path]
        if os_path in self._reading or depth > _MAX_DEPTH:
            self._cut = True
            return None
        if (self.files.is_test(os_path) or os.path.basename(os_path) == "__init__.py"
                or not self.reach.only_by_imports(os_path)):
            self._imports[os_path] = None
            return None
        cut_before, self._cut = self._cut, False
        self._reading.add(os_path)
        try:
            found = guarded_imports(dotted_module(os_path)[0], os_path, self.files,
                                    lambda node, parents, path: self._guard(node, parents, path, os_path, depth))
        finally:
            self._reading.discard(os_path)
        # an answer read while a chain was cut short is kept for this module's reading only, so that a
        # cyclic import graph is read once per module and the answers do not depend on the order
        (self._provisional if self._cut else self._imports)[os_path] = found
        self._cut = self._cut or cut_before
        return found

    def _guard(self, node: ast.AST, parents: dict[int, ast.AST], path: str, module_path: str,
               depth: int) -> str | None:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            if described := self._use_guard(node, parents, path, dotted_module(module_path)[0][-1]):
                return described
            return self._in_guarded_module(path, depth)
        at_top = True
        for ancestor, child in ancestors(node, parents):
            if isinstance(ancestor, _Scope):
                at_top = False  # a `try` around a definition does not guard its calls
            elif (isinstance(ancestor, ast.Try) and at_top and child in ancestor.body and _carries_on(ancestor)
                  and self._bindings_guarded(node, ancestor, parents, path, module_path)):
                return f"in a `try` that catches a failed import (line {ancestor.lineno})"
            elif (isinstance(ancestor, ast.If) and child in ancestor.body and self._guards(ancestor, parents, path)
                  and self._bindings_guarded(node, None, parents, path, module_path)):
                return f"under `{unparsed(ancestor.test)}`"
        # a module imported at the top of a guarded one fails to import, or is not imported, with it
        return self._in_guarded_module(path, depth) if at_top else None

    def _in_guarded_module(self, path: str, depth: int) -> str | None:
        if self.imports_of(path, depth + 1):
            return f"in module {'.'.join(dotted_module(path)[0])}, itself imported only behind a guard"
        return None

    def _use_guard(self, node: ast.AST, parents: dict[int, ast.AST], path: str, name: str) -> str | None:
        """A use of a name a guarded import bound: compared with None, under a guard or a test of the
        name, or in the body of the ``try`` that imports it."""
        parent = parents.get(id(node))
        if (isinstance(parent, ast.Compare) and len(parent.ops) == 1 and isinstance(parent.ops[0], (ast.Is, ast.IsNot))
                and isinstance(parent.comparators[0], ast.Constant) and parent.comparators[0].value is None):
            return "compared with None"
        for ancestor, child in ancestors(node, parents):
            if isinstance(ancestor, ast.Try) and child in ancestor.body and _carries_on(ancestor) and any(
                    name in import_binds(s) for s in ancestor.body[:ancestor.body.index(child)]):
                return f"in the `try` that imports it (line {ancestor.lineno})"
            if isinstance(ancestor, (ast.If, ast.IfExp)) and child is not ancestor.test and (
                    child in ancestor.body if isinstance(ancestor, ast.If) else child is ancestor.body) and (
                    _tests_name(ancestor.test, name) or self._guards(ancestor, parents, path)):
                return f"under `{unparsed(ancestor.test)}`"
            if isinstance(ancestor, ast.BoolOp) and isinstance(ancestor.op, ast.And):
                earlier = ancestor.values[:ancestor.values.index(child)] if child in ancestor.values else []
                if any(_tests_name(value, name) for value in earlier):
                    return "after a test of it"
        return None

    def _guards(self, statement: ast.If | ast.IfExp, parents: dict[int, ast.AST], path: str) -> bool:
        local = {n for scope, _ in ancestors(statement, parents) if isinstance(scope, _Scope) for n in bound_names(scope)}
        flags, checks, defined = self._flags_of(path, parents)
        return _guards(statement.test, unshadowed(self.helpers.in_file(path), statement, parents),
                       flags - local, checks - local, local | defined)

    def _bindings_guarded(self, node: ast.Import | ast.ImportFrom, statement: ast.Try | None,
                          parents: dict[int, ast.AST], path: str, module_path: str) -> bool:
        """Every name the import binds, other than the module's own, is used only behind a guard or a
        test of it in the file, is not exported, and no other file imports it from there."""
        stem = dotted_module(module_path)[0][-1]
        names = {a.asname or a.name for a in node.names} - {stem, "*"} if isinstance(node, ast.ImportFrom) else {
            a.asname for a in node.names if a.asname and a.asname != stem}
        if not names:
            return True
        if "*" in {a.name for a in node.names}:
            return False
        uses = self._uses(path)
        if uses is None:
            return False
        loads, strings = uses
        if names & strings:
            return False  # `__all__`, `getattr(module, "add")`
        if any(self._use_guard(use, parents, path, use.id) is None for name in names for use in loads.get(name, ())):
            return False
        for name in names:
            mentioning = self.files.mentioning(name.encode())
            if mentioning is None or any(other != path and self._takes(other, name, path)
                                         and not self.files.is_test(other) for other in mentioning):
                return False
        return True

    def _uses(self, path: str) -> tuple[dict[str, list[ast.Name]], set[str]] | None:
        """The names the file reads, each with its reads, and the strings it spells; read once a file."""
        if path not in self._uses_by_file:
            tree = self.files.tree(path)
            if tree is None:
                self._uses_by_file[path] = None
            else:
                loads: dict[str, list[ast.Name]] = {}
                strings: set[str] = set()
                for node in ast.walk(tree):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                        loads.setdefault(node.id, []).append(node)
                    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                        strings.add(node.value)
                self._uses_by_file[path] = loads, strings
        return self._uses_by_file[path]

    def _flags_of(self, path: str, parents: dict[int, ast.AST]) -> tuple[set[str], set[str], set[str]]:
        """The file's triton flags and check functions, and the names it binds other than by an import."""
        if path not in self._flags:
            tree = self.files.tree(path)
            if tree is None:
                self._flags[path] = set(), set(), set()
            else:
                flags, checks, defined = _triton_flags(tree, parents, self._after_import)
                # a name another file spells may be stored there (`api.HAS_TRITON = True`, `setattr(api, ...)`)
                self._flags[path] = ({n for n in flags if self._only_here(n, path)},
                                     {n for n in checks if self._only_here(n, path)}, defined)
        return self._flags[path]

    def _takes(self, os_path: str, name: str, importer: str) -> bool:
        """The file at ``os_path`` imports ``name`` from the module at ``importer``, or reads an
        attribute so named (of it, maybe); an unparsed file may do either."""
        if os_path not in self._reads:
            tree = self.files.tree(os_path)
            self._reads[os_path] = None if tree is None else _Reads(tree, os_path)
        reads = self._reads[os_path]
        return reads is None or name in reads.attributes or any(
            is_module_file(module, importer) for module in reads.imported_from.get(name, ()))

    def _only_here(self, name: str, path: str) -> bool:
        mentioning = self.files.mentioning(name.encode())
        return mentioning is not None and set(mentioning) <= {path}


class _Reads:
    """What a file reads of other modules: the attribute names it reads, and the modules it imports
    each name from (read once per file)."""

    def __init__(self, tree: ast.Module, os_path: str) -> None:
        package = dotted_module(os_path)[1]
        self.attributes: set[str] = set()
        self.imported_from: dict[str, list[tuple[str, ...]]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                self.attributes.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.imported_from.setdefault(alias.name, []).append(from_module(node, package))


def _tests_name(test: ast.expr, name: str) -> bool:
    """``add``, ``add is not None``, ``callable(add)``, alone or and-ed."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_tests_name(value, name) for value in test.values)
    if isinstance(test, ast.Name):
        return test.id == name
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.left, ast.Name) and test.left.id == name
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        return True
    return (isinstance(test, ast.Call) and unparsed(test.func) == "callable" and len(test.args) == 1
            and isinstance(test.args[0], ast.Name) and test.args[0].id == name)


def _carries_on(statement: ast.Try) -> bool:
    """A handler catches a failed import, and none raises or exits at its top: the package goes on
    without the module (a ``raise`` under a test in the handler re-raises other failures only)."""
    def stops(handler: ast.ExceptHandler) -> bool:
        return any(isinstance(s, ast.Raise) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                                and unparsed(s.value.func) in _EXITS) for s in handler.body)
    return (any(catches_a_missing_module(h.type) for h in statement.handlers)
            and not any(stops(h) for h in statement.handlers))


def _guards(test: ast.expr, helper: Callable[[str], bool], flags: set[str], checks: set[str],
            read: set[str]) -> bool:
    """A conjunct of ``test`` is false without CUDA, for tensors not on CUDA, or without triton, or
    calls a function named for the choice of the Triton path that the file imports (one it defines,
    ``read``, counts only where its returns say so)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_guards(value, helper, flags, checks, read) for value in test.values)
    if cuda_present(test, helper) or _on_cuda(test) or _finds_triton(test):
        return True
    if isinstance(test, ast.Name):
        return test.id in flags
    if not isinstance(test, ast.Call):
        return False
    if isinstance(test.func, ast.Name) and not test.args and not test.keywords and test.func.id in checks:
        return True
    name = unparsed(test.func).split(".")[-1]
    if isinstance(test.func, ast.Name) and name in read:
        return False
    return "triton" in name.lower() and bool(_SAYS_YES.search(name)) and not _SAYS_NO.search(name)


def _is_cuda_string(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] == "cuda"


def _on_cuda(test: ast.expr) -> bool:
    """``x.is_cuda``, ``x.device.type == "cuda"``, ``x.device.type in ("cuda",)``: the type of a device,
    not a string a caller or a setting may choose."""
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
        return True
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Attribute)
            and test.left.attr == "type"):
        return False
    right = test.comparators[0]
    if isinstance(test.ops[0], ast.Eq):
        return _is_cuda_string(right)
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


def _triton_flags(tree: ast.Module, parents: dict[int, ast.AST],
                  after_import: dict[int, set[int]]) -> tuple[set[str], set[str], set[str]]:
    """The file's names true only where triton imports (``_TRITON_AVAILABLE``); its functions without
    parameters, bound once, that return only such names, false constants or CUDA queries
    (``_check_triton()``); and every name it binds other than by an import."""
    # one walk: each name's stores (the assignment, or None for any other binding), the names an `if` or a
    # `return` reads (the only ones that may be flags), and whether a string may name what is stored
    stores: dict[str, list[ast.Assign | ast.AnnAssign | None]] = {}
    defined: set[str] = set()
    read: set[str] = set()
    by_string = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        stores.setdefault(name.id, []).append(node if name is target else None)
                        defined.add(name.id)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if not _assigned(node, parents):
                stores.setdefault(node.id, []).append(None)  # `for`, `with ... as`, `:=`, `+=`, `del`
            defined.add(node.id)
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)):
            read.update(n.id for n in ast.walk(node.test) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            read.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "globals", "vars", "setattr"):
            by_string = True
        for bound in _other_bindings(node):
            stores.setdefault(bound, []).append(None)
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                defined.add(bound)
    if by_string:
        return set(), set(), defined  # a name may be stored by a string

    def asks(store: ast.Assign | ast.AnnAssign | None) -> bool:
        return store is not None and store.value is not None and (
            _after_triton_import(store, parents, after_import) or cuda_present(store.value)
            or _finds_triton(store.value))
    flags = {name for name in read & stores.keys()
             if all(asks(s) or (s is not None and s.value is not None and _false_constant(s.value)) for s in stores[name])
             and any(asks(s) for s in stores[name])}
    checks = set()
    for statement in tree.body:
        if (isinstance(statement, ast.FunctionDef) and not statement.args.args and not statement.args.posonlyargs
                and not statement.args.vararg and not statement.decorator_list
                and len(stores.get(statement.name, [])) == 1):
            returns = [n for n in ast.walk(statement) if isinstance(n, ast.Return)]
            if returns and all(r.value is not None and (_false_without_triton(r.value) or (
                    isinstance(r.value, ast.Name) and r.value.id in flags)) for r in returns):
                checks.add(statement.name)
    return flags, checks, defined


def _assigned(name: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """The name is a target of an ``=`` assignment, alone or in a tuple or list target."""
    parent = parents.get(id(name))
    while isinstance(parent, (ast.Tuple, ast.List, ast.Starred)):
        parent = parents.get(id(parent))
    return isinstance(parent, (ast.Assign, ast.AnnAssign))


def _other_bindings(node: ast.AST) -> list[str]:
    """Names an import, a definition, a parameter or an ``except ... as`` binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return import_binds(node)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    return []


def _false_constant(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and (value.value is False or value.value is None)


def _false_without_triton(value: ast.expr) -> bool:
    return _false_constant(value) or cuda_present(value) or _finds_triton(value)


def _after_triton_import(statement: ast.AST, parents: dict[int, ast.AST],
                         after_import: dict[int, set[int]]) -> bool:
    """The statement lies in a ``try`` body after an ``import triton`` of that body."""
    for ancestor, child in ancestors(statement, parents):
        if isinstance(ancestor, ast.Try):
            if id(ancestor) not in after_import:  # the statements after its first import of triton, once
                first = next((i for i, s in enumerate(ancestor.body) if _imports_triton(s)), len(ancestor.body))
                after_import[id(ancestor)] = {id(s) for s in ancestor.body[first + 1:]}
            if id(child) in after_import[id(ancestor)]:
                return True
    return False


def _imports_triton(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Import):
        return any(a.name.split(".")[0] == "triton" for a in statement.names)
    return (isinstance(statement, ast.ImportFrom) and not statement.level
            and (statement.module or "").split(".")[0] == "triton")
