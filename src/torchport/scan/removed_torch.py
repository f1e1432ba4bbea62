"""Code past what torch no longer has.

A module that imports, at its top level, a name current torch lacks
(``from torch.autograd.gradcheck import zero_gradients``, ``from torch._six import inf``) fails to
import, so nothing below that import runs, on CUDA or anywhere else.  A statement that surely
calls a removed function (``torch.rfft(x, 2)``, ``torch.symeig(a)``) raises, so the statements
after it in the same block never run.  A CUDA call there is not what stops a user on another
accelerator: the removed API stops everyone first, on the current torch every other accelerator
needs.

The workers read each file's candidates (``candidates_in``); the pass over every file
(``lower_past_removed_api``) reads, only when a candidate exists, what the scanned files put back
into torch (``shims``: ``sys.modules["torch._six"] = ...``, ``torch.rfft = ...``,
``setattr(torch, ...)``), and lowers a candidate in a package scanned whole only where no file
puts its name back.  The table holds only what is absent (or raises when called) on torch 2.13,
checked on its CPU build; an old torch that still had the name is not a porting target.
"""
from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from torchport.scan import files
from torchport.scan.detectors.syntax import dotted_name
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import still_hot
from torchport.scan.python import parse_whole

# module -> names it no longer has (absent from torch 2.13)
REMOVED_NAMES: dict[str, frozenset[str]] = {
    "torch": frozenset({"_six", "rfft", "irfft", "ifft", "gels", "gesv", "potrf", "potrs", "potri", "pstrf",
                        "trtrs", "btrifact", "btrisolve", "is_deterministic", "set_deterministic"}),
    "torch.autograd.gradcheck": frozenset({"zero_gradients"}),
    "torch._utils": frozenset({"_accumulate"}),
    "torch.utils.data.dataset": frozenset({"_accumulate"}),
    "torch.utils.data.dataloader": frozenset({"numpy_type_map", "DataLoaderIter", "_DataLoaderIter",
                                              "string_classes", "int_classes", "_use_shared_memory",
                                              "_worker_loop", "_worker_manager_loop", "pin_memory_batch"}),
    "torch.nn.modules.linear": frozenset({"_LinearWithBias"}),
    "torch.hub": frozenset({"_download_url_to_file"}),
    "torch.utils.model_zoo": frozenset({"_download_url_to_file"}),
}
# Modules torch 2.13 does not have (their submodules neither).
REMOVED_MODULES = frozenset({"torch._six", "torch._thnn", "torch.legacy", "torch.nn._functions", "torch.utils.ffi",
                             "torch.utils.trainer"})
# ``torch.NAME(...)`` that raises on torch 2.13: the names above that were functions, the linear
# algebra that raises "deprecated since version 1.9 and is now removed", and ``torch.fft(x, n)``,
# a call of what is now a module.
REMOVED_CALLS = (REMOVED_NAMES["torch"] - {"_six"}) | frozenset(
    {"symeig", "eig", "lstsq", "solve", "matrix_rank", "fft"})

# Text a file with findings must hold before its tree is read: a removed name as a word, a
# removed module in a dotted name or an import, or a call ``.NAME(`` of a removed function
# through any name.  Bounded, so that no line costs more than its length.
_NAMES = "|".join(sorted({name for names in REMOVED_NAMES.values() for name in names}))
_MODULE_TAILS = "|".join(sorted(module.rsplit(".", 1)[1] for module in REMOVED_MODULES))
HINT = re.compile(rf"\b(?:{_NAMES})\b"
                  rf"|\b(?:torch|utils|nn)\.(?:{_MODULE_TAILS})\b"
                  rf"|\bimport[ \t][\w, \t]{{0,200}}?\b(?:{_MODULE_TAILS})\b"
                  rf"|\.(?:{'|'.join(sorted(REMOVED_CALLS))})\s*\(")
# A shim whose name the file computes: it may put back any name of the module it names.
_ANY = "*"


@dataclass(frozen=True)
class Candidate:
    """A hot finding past what torch removed: each stop is the removed name (``torch._six``,
    ``torch.rfft``) and the reason it gives; the first no scanned file puts back lowers it."""
    index: int  # of the finding in its file's list
    stops: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Stop:
    key: str
    text: str  # as the user wrote it, for the reason
    line: int


def _imports(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """Name -> the torch module it is bound to (``import torch as th``, ``import torch.utils.data.
    dataloader as dl``, ``from torch.utils.data import dataloader``), in any scope; and the names
    also bound to something else somewhere (``import compat as torch``), which are not read."""
    bound: dict[str, str] = {}
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            other.add(node.arg)  # a parameter named torch is the caller's object
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            other.add(node.id)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    name = alias.asname or "torch"
                    bound[name] = alias.name if alias.asname else "torch"
                else:
                    other.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name
                if node.module and not node.level and (node.module == "torch" or node.module.startswith("torch.")):
                    bound[name] = f"{node.module}.{alias.name}"
                else:
                    other.add(name)
    return bound, other


def _module_of(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The torch module an expression names (``th.utils.data.dataloader`` -> its dotted name)."""
    dotted = dotted_name(node)
    if not dotted:
        return None
    head, _, rest = dotted.partition(".")
    if head not in bound:
        return None
    return f"{bound[head]}.{rest}" if rest else bound[head]


def _removed_import(statement: ast.stmt) -> _Stop | None:
    """A top-level import of what torch 2.13 lacks, spelled as the user wrote it."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            for module in REMOVED_MODULES:
                if alias.name == module or alias.name.startswith(module + "."):
                    return _Stop(module, f"import {alias.name}", statement.lineno)
    elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
        module = statement.module
        names = ", ".join(alias.name for alias in statement.names)
        for removed in REMOVED_MODULES:
            if module == removed or module.startswith(removed + "."):
                return _Stop(removed, f"from {module} import {names}", statement.lineno)
        for alias in statement.names:
            full = f"{module}.{alias.name}"
            if alias.name in REMOVED_NAMES.get(module, ()) or full in REMOVED_MODULES:
                return _Stop(full, f"from {module} import {alias.name}", statement.lineno)
    return None


def _surely_evaluated(node: ast.AST):
    """The node and what evaluating it surely evaluates: the test of a conditional expression, the
    first operand of ``and``/``or``, the first iterable of a comprehension; not a lambda's body."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.IfExp):
            stack.append(node.test)
        elif isinstance(node, ast.Compare):
            stack.extend((node.left, node.comparators[0]))  # a chain stops at the first false link
        elif isinstance(node, ast.AnnAssign):
            stack.extend(n for n in (node.target, node.value) if n is not None)  # no annotation: maybe unevaluated
        elif isinstance(node, ast.BoolOp):
            stack.append(node.values[0])
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.append(node.generators[0].iter)
        elif not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)


def _removed_call(statement: ast.stmt, torch_names: set[str]) -> _Stop | None:
    """``torch.NAME(...)`` of a removed function that the simple statement surely calls."""
    if not isinstance(statement, _SIMPLE):
        return None
    for node in _surely_evaluated(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in torch_names \
                and node.func.attr in REMOVED_CALLS:
            return _Stop(f"torch.{node.func.attr}", f"{node.func.value.id}.{node.func.attr}(...)", statement.lineno)
    return None


def _stops(tree: ast.Module) -> tuple[_Stop | None, dict[int, _Stop]]:
    """The first top-level import of a removed name, and the simple statements (by id) that surely
    call a removed function."""
    first = next((stop for statement in tree.body if (stop := _removed_import(statement))), None)
    bound, other = _imports(tree)
    torch_names = {name for name, module in bound.items() if module == "torch"} - other
    calls: dict[int, _Stop] = {}
    if torch_names:
        for node in ast.walk(tree):
            if isinstance(node, _SIMPLE):
                stop = _removed_call(node, torch_names)
                if stop is not None:
                    calls[id(node)] = stop
    return first, calls


_BODIES = ("body", "orelse", "finalbody")


class _Blocks:
    """For each block of the file, its statements' first lines and the first statement that surely
    calls a removed function, found once: a finding then costs a bisection per level."""

    def __init__(self, calls: dict[int, _Stop]) -> None:
        self.calls = calls
        self._read: dict[int, tuple[list[int], int | None]] = {}

    def _block(self, body: list[ast.stmt]) -> tuple[list[int], int | None]:
        if id(body) not in self._read:
            first = next((i for i, statement in enumerate(body) if id(statement) in self.calls), None)
            self._read[id(body)] = ([statement.lineno for statement in body], first)
        return self._read[id(body)]

    def stop_before(self, tree: ast.Module, line: int) -> _Stop | None:
        """A statement before ``line`` in one of the blocks that hold it that surely calls a
        removed function."""
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            for field in _BODIES:
                body = getattr(node, field, None)
                if not isinstance(body, list) or not body or not (
                        body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)):
                    continue  # another branch: what it calls is not on the line's path
                starts, first = self._block(body)
                index = bisect.bisect_right(starts, line) - 1  # the statement at or before the line
                holds = index >= 0 and line <= (body[index].end_lineno or body[index].lineno)
                before = index if holds else index + 1  # statements wholly before the line
                if first is not None and first < before:
                    return self.calls[id(body[first])]
                if holds:
                    stack.append(body[index])  # it holds the line: read its own blocks
            stack.extend(getattr(node, "handlers", ()))
            stack.extend(getattr(node, "cases", ()))
        return None


def candidates_in(text: str, findings: list[Finding]) -> list[Candidate]:
    """The file's error or silent findings past a removed torch API (the tree parsed only when
    the file has such findings and names a removed API)."""
    if not any(still_hot(f) for f in findings) or "torch" not in text or not HINT.search(text):
        return []
    tree = parse_whole(text)
    return candidates(tree, findings) if tree is not None else []


def candidates(tree: ast.Module, findings: list[Finding]) -> list[Candidate]:
    """The error or silent findings of the file that lie past a removed torch API."""
    first, calls = _stops(tree)
    if first is None and not calls:
        return []
    blocks = _Blocks(calls) if calls else None
    found = []
    for index, finding in enumerate(findings):
        if not still_hot(finding):
            continue
        stops = []
        if first is not None and finding.line > first.line:
            stops.append((first.key, f"past `{first.text}` (line {first.line}), which fails on torch 2.13: the "
                                     "module cannot be imported"))
        stop = blocks.stop_before(tree, finding.line) if blocks is not None else None
        if stop is not None:
            stops.append((stop.key, f"past `{stop.text}` (line {stop.line}), which raises on torch 2.13: the "
                                    "block stops there"))
        if stops:
            found.append(Candidate(index, tuple(stops)))
    return found


def _torch_strings(tree: ast.Module) -> list[str]:
    """Every string of the file that names a torch module or name."""
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (node.value == "torch" or node.value.startswith("torch."))]


class _Shims:
    """What one file puts back into torch, read from its tree (its imports first, then every
    store and call)."""

    def __init__(self, tree: ast.Module) -> None:
        self.bound, _ = _imports(tree)
        self.found: set[str] = set()
        self._strings: list[str] | None = None
        self._tree = tree
        # names for sys and sys.modules: `import sys as _sys`, `from sys import modules`
        self.sys_names = {"sys"}
        self.modules_names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self.sys_names.update(a.asname for a in node.names if a.name == "sys" and a.asname)
            elif isinstance(node, ast.ImportFrom) and node.module == "sys":
                self.modules_names.update(a.asname or a.name for a in node.names if a.name == "modules")
        for node in ast.walk(tree):
            self._read(node)

    def _is_sys_modules(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.modules_names
        return isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name) \
            and node.value.id in self.sys_names

    def _module(self, node: ast.expr) -> str | None:
        """The torch module an expression names: a name bound to one, ``sys.modules["torch"]``,
        ``importlib.import_module("torch")``, ``vars(torch)``, ``torch.__dict__``."""
        if isinstance(node, ast.Subscript) and self._is_sys_modules(node.value):
            key = node.slice
            return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) \
                and key.value.startswith("torch") else None
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and node.args[0].value.startswith("torch"):
                return node.args[0].value
        return _module_of(node, self.bound)

    def _key(self, node: ast.expr) -> None:
        """A sys.modules key: a torch string; a computed key puts back every torch name the file
        spells (``sys.modules[name]``, ``m.__name__``), but ``__name__`` (the file's own module)
        nothing."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == "torch" or node.value.startswith("torch."):
                self.found.add(node.value)
            return
        if isinstance(node, ast.Name) and node.id == "__name__":
            return
        head = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else (
            node.left if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) else None)
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith("torch"):
            self.found.add(head.value.rstrip(".") + "." + _ANY)
            return
        if self._strings is None:
            self._strings = _torch_strings(self._tree)
        self.found.update(self._strings)

    def _read(self, node: ast.AST) -> None:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if self._is_sys_modules(node.value):
                self._key(node.slice)
            elif (module := self._namespace_of(node.value)) is not None:
                key = node.slice
                self.found.add(f"{module}.{key.value}" if isinstance(key, ast.Constant) and isinstance(key.value, str)
                               else f"{module}.{_ANY}")
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            module = self._module(node.value)
            if module is not None:
                self.found.add(f"{module}.{node.attr}")
        elif isinstance(node, ast.Call):
            self._call(node)

    def _namespace_of(self, node: ast.expr) -> str | None:
        """``torch.__dict__`` or ``vars(torch)``: the module whose names a subscript store sets."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self._module(node.value)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "vars" and node.args:
            return self._module(node.args[0])
        return None

    def _call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Attribute) and self._is_sys_modules(func.value):
            if name in ("setdefault", "__setitem__") and node.args:
                self._key(node.args[0])
            elif name == "update":
                for argument in node.args:
                    if isinstance(argument, ast.Dict):
                        for key in argument.keys:
                            if key is not None:
                                self._key(key)
                    else:
                        self.found.add("torch." + _ANY)  # a mapping built elsewhere
        elif name == "setattr" and node.args:  # setattr, monkeypatch.setattr, mock's
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("torch."):
                self.found.add(first.value)  # monkeypatch.setattr("torch.rfft", f)
                return
            module = self._module(first)
            if module is None or len(node.args) < 2:
                return
            attribute = node.args[1]
            self.found.add(f"{module}.{attribute.value}" if isinstance(attribute, ast.Constant)
                           and isinstance(attribute.value, str) else f"{module}.{_ANY}")
        elif name in ("patch", "object") and node.args:  # mock.patch("torch.rfft", ...), patch.object(torch, "rfft")
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("torch."):
                self.found.add(first.value)
            elif (module := self._module(first)) is not None and len(node.args) >= 2 \
                    and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                self.found.add(f"{module}.{node.args[1].value}")


def shims(tree: ast.Module) -> list[str]:
    """What the file puts back into torch: ``sys.modules["torch._six"] = ...`` (or ``setdefault``,
    ``update``, through any name for sys) gives ``torch._six``; ``torch.rfft = ...``,
    ``setattr(torch, "rfft", ...)``, ``monkeypatch.setattr``, ``mock.patch("torch.rfft")`` or
    ``torch.__dict__["rfft"] = ...`` gives ``torch.rfft``; a name the file computes gives the module
    followed by ``.*``."""
    return sorted(_Shims(tree).found)


def _put_back(key: str, shimmed: set[str]) -> bool:
    """Whether a shim puts back ``key``: the name itself, a module above it (``torch.utils.data.
    dataloader`` put in sys.modules brings its names), or a computed name on such a module."""
    parts = key.split(".")
    above = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(name in shimmed or name + "." + _ANY in shimmed for name in above)


def lower_past_removed_api(work: list, results: list[tuple[FileResult, int]], read,
                           whole_package: Callable[[str], bool]) -> None:
    """Lower every candidate, in a package scanned whole, whose removed name no scanned file
    puts back (``read`` gives a job's text)."""
    by_display = {job.display: job.path for job in work}
    pending = [(result, candidate) for result, _ in results for candidate in result.past_removed
               if whole_package(by_display.get(result.path, ""))]
    if not pending:
        return
    # a file that puts a name back spells it, or sets a name it computes on torch itself
    pending_words = {key.rsplit(".", 1)[1] for _, candidate in pending for key, _ in candidate.stops}
    # ... or the module above it, put back whole: `sys.modules["torch.utils.data.dataloader"] = m`
    pending_modules = {".".join(key.split(".")[:i]) for _, candidate in pending for key, _ in candidate.stops
                       for i in range(2, key.count(".") + 1)}
    pending_words |= pending_modules
    literals = (*pending_words, "setattr(", "__dict__", "vars(")
    needle = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(pending_words))) + r")\b"
                        r"|setattr\(\s*\w*torch\w*\s*,|torch\w*\.__dict__\s*\[|vars\(\s*\w*torch")
    shimmed: set[str] = set()
    byte_literals = [literal.encode() for literal in literals]
    for job, data in files.read_bytes(job for job in work if job.kind == "python"):
        if data is None:
            continue
        if b"torch" not in data or not any(literal in data for literal in byte_literals):
            continue  # the quick test on bytes: most files stop here
        text = read(job)
        if text is None or not needle.search(text):
            continue
        tree = parse_whole(text)
        if tree is not None:
            shimmed.update(shims(tree))
        elif re.search(r"modules|setattr", text):
            shimmed.add("torch." + _ANY)  # unparsable, names a removed name, and may put it back
    for result, candidate in pending:
        finding = result.findings[candidate.index]
        reason = next((reason for key, reason in candidate.stops if not _put_back(key, shimmed)), None)
        if reason is not None and still_hot(finding):
            finding.lower_to_info(reason + "; this line is never reached on current torch, with CUDA or without")
