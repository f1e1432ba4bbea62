"""Does a float64 line ever run on MPS, the one device without float64?  Read on the AST of
the file, without knowing any helper by name:

- the line is in a function that the file only hands to a helper whose MPS branch calls it
  on CPU copies (``if x.device.type == "mps": return op(*(t.cpu() for t in tensors))``);
- the float64 tensor is moved to a device chosen as the CPU where the device is MPS
  (``work = torch.device("cpu") if x.device.type == "mps" else x.device``);
- the float64 dtype goes through a function of the file whose MPS branch returns another
  dtype (``if device_type == "mps" and dtype == torch.float64: return torch.float32``);
- ``torch.set_default_dtype(torch.float64)`` in a file that names no device and moves no
  tensor: what it makes under that default is made on the CPU;
- the tensor is traced back to the CPU (``.cpu()``, a device-less factory, a device name bound
  only to the CPU: ``host = torch.device("cpu")``);
- the line follows ``if <device is MPS>: raise`` in its function, or its private function is
  called only under a test that holds for CPU tensors alone;
- the tensor or module is made on or moved to a device that is CUDA or the CPU wherever it is set
  (a written-out device, a name, ``self.device`` or a function of the file giving only such), never MPS;
- the line is in a private module that the package imports only inside functions raising on MPS
  before they use it (read across files, after every file is scanned).
"""
from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torchport.scan.detectors.syntax import import_binds, names_the_cpu, walk_nodes
from torchport.scan.files import Unreadable, package_root, regular_file_bytes
from torchport.scan.rules import FLOAT64

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

_Function = ast.FunctionDef | ast.AsyncFunctionDef

# float64 dtypes by their torch attribute name
_FLOAT64 = frozenset({"float64", "double", "complex128", "cdouble"})

# A CPU copy in an argument: `t.cpu()`, `t.to("cpu")`, `t.to(device="cpu")`.
_CPU_COPY = re.compile(r"""\.cpu\(\)|\.to\(\s*(device\s*=\s*)?['"]cpu['"]""")

# Anything that names or moves to a device: `device`, `.cuda(`, `.to(` given more than a dtype.
_NAMES_A_DEVICE = re.compile(r"device|\.cuda\(|\bcuda\b|\bmps\b")


def _is_mps(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] == "mps"


def _tests_mps(test: ast.expr) -> bool | None:
    """True where ``test`` holds exactly when the device is MPS (``x.type == "mps"``, ``x.is_mps``),
    False where it holds exactly when it is not (``!= "mps"``), None where it says neither."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _tests_mps(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Attribute) and test.attr == "is_mps":
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and (_is_mps(test.left) or _is_mps(test.comparators[0])):
        if isinstance(test.ops[0], (ast.Eq, ast.Is)):
            return True
        if isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
            return False
    return None


def _mentions_mps(test: ast.expr) -> bool:
    """``device_type == "mps" and dtype == torch.float64``: one conjunct tests for MPS."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_mentions_mps(value) for value in test.values)
    return _tests_mps(test) is True



def _functions(context: FileContext) -> dict[str, list[_Function]]:
    found: dict[str, list[_Function]] = {}
    for scope in context.scopes:
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(scope.name, []).append(scope)
    return found


def float64_names(context: FileContext, line: int) -> list[ast.Attribute]:
    """The ``torch.float64``-like names on the line."""
    return [n for n in context._expressions_at(line) if isinstance(n, ast.Attribute) and n.attr in _FLOAT64
            and isinstance(n.value, ast.Name) and n.value.id == "torch"]


def _float64_casts(context: FileContext, line: int) -> list[ast.Call]:
    """The calls on the line that make float64: ``.double()``, ``.to(dtype=torch.float64)``."""
    names = {id(n) for n in float64_names(context, line)}
    return [c for c in context.calls_at(line)
            if (isinstance(c.func, ast.Attribute) and c.func.attr == "double" and not c.args)
            or any(id(a) in names for a in (*c.args, *(k.value for k in c.keywords)))]


# -- a function run on CPU copies where the device is MPS ---------------------------------------


def _parameter_at(function: _Function, index: int) -> str | None:
    positional = function.args.posonlyargs + function.args.args
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return positional[index].arg if index < len(positional) else None


def _calls_on_cpu_for_mps(helper: _Function, parameter: str) -> bool:
    """The helper's MPS branch calls ``parameter`` with every argument copied to the CPU."""
    for statement in ast.walk(helper):
        if not (isinstance(statement, ast.If) and _tests_mps(statement.test) is True):
            continue
        for node in (n for s in statement.body for n in ast.walk(s)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == parameter
                    and node.args and all(_CPU_COPY.search(ast.unparse(a)) for a in node.args)):
                return True
    return False


def run_on_cpu_for_mps(context: FileContext, line: int) -> str | None:
    """The name of the helper that runs the line's function on CPU copies where the device is
    MPS: every use of the function in the file hands it to that helper."""
    function = context.innermost_function(line)
    if function is None:
        return None
    outer = next((s for s in reversed(context.enclosing(function.lineno)) if s is not function
                  and isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    low, high = (outer.lineno, outer.end_lineno or outer.lineno) if outer is not None else (1, len(context.lines))
    # a nested function is named only inside the function that defines it
    uses = [n for n in context.loads().get(function.name, ()) if isinstance(n, ast.Name) and low <= n.lineno <= high]
    if not uses:
        return None
    functions, helpers = _functions(context), set()
    for use in uses:
        call = next((c for c in ast.walk(context.tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and any(a is use for a in c.args)), None)
        if call is None:
            return None
        helper = call.func.id if isinstance(call.func, ast.Name) else ""
        index = next(i for i, a in enumerate(call.args) if a is use)
        candidates = [h for h in functions.get(helper, ()) if h is not function]
        parameter = _parameter_at(candidates[0], index) if len(candidates) == 1 else None
        if parameter is None or not _calls_on_cpu_for_mps(candidates[0], parameter):
            return None
        helpers.add(helper)
    return ", ".join(sorted(helpers))


# -- a work device that is the CPU where the device is MPS --------------------------------------


def _cpu_on_mps(value: ast.expr) -> bool:
    """``torch.device("cpu") if x.device.type == "mps" else x.device`` (or the ``!=`` form)."""
    if not isinstance(value, ast.IfExp):
        return False
    on_mps = _tests_mps(value.test)
    return on_mps is not None and names_the_cpu(value.body if on_mps else value.orelse)


def _device_argument(call: ast.Call) -> ast.expr | None:
    given = next((k.value for k in call.keywords if k.arg == "device"), None)
    return given if given is not None else (call.args[0] if call.args else None)


def moved_to_cpu_on_mps(context: FileContext, line: int) -> str | None:
    """The device name, assigned in the function only as the CPU where the device is MPS, that
    every float64 cast on the line moves its tensor to first."""
    casts = _float64_casts(context, line)
    function = context.innermost_function(line)
    if not casts or function is None:
        return None
    found: set[str] = set()
    for cast in casts:
        device = None
        receiver = cast.func.value if isinstance(cast.func, ast.Attribute) else None
        while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
            if receiver.func.attr == "to":
                device = _device_argument(receiver)
                break
            receiver = receiver.func.value
        if not isinstance(device, ast.Name):
            return None
        values = [s.value for s in ast.walk(function) if isinstance(s, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == device.id for t in s.targets)]
        if not values or not all(_cpu_on_mps(v) for v in values):
            return None
        found.add(device.id)
    return ", ".join(sorted(found))


# -- a dtype helper that gives another dtype on MPS ---------------------------------------------


def _other_dtype_on_mps(function: _Function) -> bool:
    """``if device_type == "mps" and dtype == torch.float64: return torch.float32``."""
    for statement in ast.walk(function):
        if isinstance(statement, ast.If) and _mentions_mps(statement.test):
            returned = [s.value for s in statement.body if isinstance(s, ast.Return) and s.value is not None]
            if returned and all(isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)
                                and v.value.id == "torch" and v.attr not in _FLOAT64 for v in returned):
                return True
    return False


def _module_functions(path: str) -> dict[str, list[_Function]]:
    """The top-level functions of a module of the package, parsed once while it is unchanged."""
    try:
        return _parsed_functions(path, Path(path).stat().st_mtime_ns)
    except OSError:
        return {}


@functools.lru_cache(maxsize=256)
def _parsed_functions(path: str, modified: int) -> dict[str, list[_Function]]:
    """``modified`` is only part of the cache key: an edited module is parsed again."""
    try:
        tree = ast.parse(Path(path).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, list[_Function]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, []).append(node)
    return found


def _imported_function(context: FileContext, path: str, name: str) -> list[_Function]:
    """``from lerobot.utils.utils import get_safe_dtype``: the definition in the package's own
    module, found by walking up from this file to the folder that holds the package."""
    found = _imported_module(context, path, name)
    if found is None:
        return []
    module, original = found
    return _module_functions(str(module)).get(original, [])


def _imported_module(context: FileContext, path: str, name: str) -> tuple[Path, str] | None:
    """For ``from pkg.mod import original as name``: the package's own module file (found by walking
    up from ``path`` to the folder that holds the package) and ``original``."""
    for statement in context.tree.body:
        if not (isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0
                and any((a.asname or a.name) == name for a in statement.names)):
            continue
        original = next(a.name for a in statement.names if (a.asname or a.name) == name)
        relative = Path(*statement.module.split("."))
        for folder in Path(path).resolve().parents:
            for module in (folder / relative.with_suffix(".py"), folder / relative / "__init__.py"):
                if module.is_file():
                    return module, original
    return None


def handed_to_a_function(context: FileContext, line: int) -> bool:
    """Every float64 on the line is an argument of a call by a bare name (``f(torch.float64, ...)``):
    read before the whole file is parsed."""
    names = float64_names(context, line)
    calls = [c for c in context.calls_at(line) if isinstance(c.func, ast.Name)]
    return bool(names) and all(any(a is name for c in calls for a in (*c.args, *(k.value for k in c.keywords)))
                               for name in names)


def dtype_lowered_on_mps(context: FileContext, line: int, path: str) -> str | None:
    """The function (of this file, or imported from a module of the package) that every float64
    on the line is handed to, whose MPS branch returns another dtype."""
    names = float64_names(context, line)
    if not names:
        return None
    functions, found = _functions(context), set()
    for name in names:
        call = next((c for c in context.calls_at(line) if isinstance(c.func, ast.Name)
                     and any(a is name for a in (*c.args, *(k.value for k in c.keywords)))), None)
        if call is None or not isinstance(call.func, ast.Name):
            return None
        candidates = functions.get(call.func.id) or _imported_function(context, path, call.func.id)
        if len(candidates) != 1 or not _other_dtype_on_mps(candidates[0]):
            return None
        found.add(candidates[0].name)
    return ", ".join(sorted(found))


# -- a default dtype in a file that names no device --------------------------------------------


def _names_a_dtype(node: ast.expr) -> bool:
    """``torch.float32``, ``x.dtype``: a ``.to()`` argument that changes the dtype only."""
    return isinstance(node, ast.Attribute) and re.search(r"dtype|float|double|half|int|bool|complex", node.attr) is not None


def default_dtype_in_deviceless_file(context: FileContext, line: int) -> bool:
    """``torch.set_default_dtype(torch.float64)`` in a file that names no device and moves no
    tensor (a comment or string may say "cuda": those are stripped by reading the AST)."""
    calls = [c for c in context.calls_at(line) if isinstance(c.func, ast.Attribute)
             and c.func.attr in ("set_default_dtype", "set_default_tensor_type")]
    if not calls:
        return False
    for node in ast.walk(context.tree):
        if isinstance(node, (ast.Name, ast.Attribute, ast.keyword, ast.arg)):
            word = {ast.Name: "id", ast.Attribute: "attr", ast.keyword: "arg", ast.arg: "arg"}[type(node)]
            if _NAMES_A_DEVICE.search(getattr(node, word) or ""):
                return False
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
                and any(not _names_a_dtype(a) for a in node.args)):
            return False
    return True


# -- a tensor on the CPU by construction ---------------------------------------------------------

# torch functions that make a new tensor: without a device it is made on the CPU.
_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "eye", "zeros", "ones", "empty", "full", "arange",
                        "linspace", "logspace", "rand", "randn", "randint", "randperm"})

# How many calls and returns one value is followed through.
_DEPTH = 6


class _Calls:
    """The functions of one file and the calls that name them, indexed once."""

    def __init__(self, context: FileContext) -> None:
        self.functions = _functions(context)
        self.calls: dict[str, list[tuple[ast.Call, _Function | None]]] = {}
        self._index(context.tree.body, None)

    def _index(self, body: list, function: _Function | None) -> None:
        for statement in body:
            inner = statement if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            for node in ast.iter_child_nodes(statement):
                if isinstance(node, ast.stmt):
                    self._index([node], inner)
                    continue
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                        self.calls.setdefault(call.func.id, []).append((call, inner))


@functools.lru_cache(maxsize=8)
def _calls(context: FileContext) -> _Calls:
    return _Calls(context)


def _moves_to(call: ast.Call, is_cpu: Callable[[ast.expr], bool] = names_the_cpu) -> str | None:
    """What a method call does to a tensor's place: "cpu", "other" (a device), or None (nothing)."""
    attr = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if attr == "cpu":
        return "cpu"
    if attr in ("cuda", "mps", "xpu"):
        return "other"
    if attr == "to":
        device = next((k.value for k in call.keywords if k.arg == "device"), None)
        if device is None and call.args and not _names_a_dtype(call.args[0]):
            device = call.args[0]
        if device is None:
            return None
        return "cpu" if is_cpu(device) else "other"
    return None


def _private(function: _Function, context: FileContext) -> bool:
    """Reached only from this file: a leading underscore, or defined inside another function."""
    return function.name.startswith("_") or any(
        isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s is not function
        for s in context.enclosing(function.lineno))


def _rebinds(value: ast.expr, name: str, is_cpu: Callable[[ast.expr], bool] = names_the_cpu) -> bool | None:
    """``x = x.double().flip(0)``: True where methods on the name itself move nothing, False where
    one moves it to a device, None where the value is not a method chain on the name."""
    moves = []
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        moves.append(_moves_to(value, is_cpu))
        value = value.func.value
    if not (isinstance(value, ast.Name) and value.id == name and moves):
        return None
    return "other" not in moves


class _HostTracer:
    """Follows a tensor back to where it was made, through names, arithmetic, torch functions,
    the returns of the file's functions and the calls of its private ones."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.calls = _calls(context)
        self.following: set[tuple[int, str]] = set()  # (function, name) pairs being followed: no cycles
        self.function: _Function | None = None  # the function whose names a device argument is read in

    def is_cpu(self, device: ast.expr) -> bool:
        """``"cpu"``, or a name that the function reading it (or the first enclosing function, or the
        module, that assigns it) binds only to the CPU: ``host = torch.device("cpu")``."""
        if names_the_cpu(device):
            return True
        if not isinstance(device, ast.Name) or self.function is None:
            return False
        scopes = [s for s in reversed(self.context.enclosing(self.function.lineno))
                  if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            if any(a.arg == device.id for a in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs)):
                return False  # a device passed in: the caller chooses it
            values: list[ast.expr | None] = [
                s.value for s in ast.walk(scope) if isinstance(s, (ast.Assign, ast.AnnAssign))
                and any(isinstance(t, ast.Name) and t.id == device.id
                        for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))]
            if values:
                return all(v is not None and names_the_cpu(v) for v in values)
        module = [s.value for s in self.context.tree.body if isinstance(s, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == device.id for t in s.targets)]
        return bool(module) and all(names_the_cpu(v) for v in module)

    def host(self, node: ast.expr | None, function: _Function | None, depth: int = 0) -> int | None:
        """The line where ``node``'s tensor was moved to or made on the CPU, None where unknown."""
        if node is None or depth > _DEPTH:
            return None
        self.function = function
        if isinstance(node, ast.BinOp):
            return self.host(node.left, function, depth) or self.host(node.right, function, depth)
        if isinstance(node, ast.UnaryOp):
            return self.host(node.operand, function, depth)
        if isinstance(node, ast.Subscript):
            return self.host(node.value, function, depth)
        if isinstance(node, ast.Name):
            return self._host_name(node, function, depth)
        if isinstance(node, ast.Call):
            return self._host_call(node, function, depth)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return self._host_kept_list(node.attr, function, depth)
        return None

    def _host_kept_list(self, attribute: str, function: _Function | None, depth: int) -> int | None:
        """``self.fake_features``, a list its class only empties (``self.fake_features = []``),
        appends CPU copies to (``self.fake_features.append(features.cpu())``) and joins
        (``torch.cat(self.fake_features)``), the file naming the attribute nowhere else (no
        alias, no subclass, no store from outside): the line of the first such copy."""
        owner = next((c for c in reversed(self.context.enclosing(function.lineno)) if isinstance(c, ast.ClassDef)),
                     None) if function is not None else None
        key = (id(owner), "self." + attribute)
        if owner is None or key in self.following:
            return None
        appended = _appended_only(self.context, owner, attribute)
        if not appended:
            return None
        self.following.add(key)
        try:
            lines = [self.host(value, method, depth + 1) for value, method in appended]
        finally:
            self.following.discard(key)
        return lines[0] if all(lines) else None

    def _host_call(self, call: ast.Call, function: _Function | None, depth: int) -> int | None:
        moved = _moves_to(call, self.is_cpu)
        if moved == "cpu":
            return call.func.end_lineno or call.lineno  # the line of `.to("cpu")` in a chain
        if moved == "other":
            return None
        func = call.func
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id == "torch":
                device = next((k.value for k in call.keywords if k.arg == "device"), None)
                if device is not None:
                    return call.lineno if self.is_cpu(device) else None
                if func.attr in _FACTORIES:
                    return call.lineno  # made without a device: on the CPU
                return self.host(call.args[0], function, depth) if call.args else None
            return self.host(base, function, depth)  # a tensor's method keeps it where it is
        if isinstance(func, ast.Name):
            callee = self.calls.functions.get(func.id, [])
            if len(callee) == 1:
                returns = [r.value for r in ast.walk(callee[0]) if isinstance(r, ast.Return)]
                return self._all_host(returns, callee[0], depth + 1)
        return None

    def _all_host(self, values: list, function: _Function | None, depth: int) -> int | None:
        lines = [self.host(v, function, depth) for v in values]
        return lines[0] if lines and all(lines) else None

    def _host_name(self, name: ast.Name, function: _Function | None, depth: int) -> int | None:
        key = (id(function), name.id)
        if function is None or key in self.following:
            return None
        self.following.add(key)
        try:
            return self._host_name_in(name, function, depth)
        finally:
            self.following.discard(key)

    def _host_name_in(self, name: ast.Name, function: _Function, depth: int) -> int | None:
        values: list[tuple[ast.expr, int | None]] = []  # (value, index in an unpacked tuple)
        for statement in ast.walk(function):
            if not isinstance(statement, ast.Assign):
                continue
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id == name.id:
                    self.function = function
                    rebound = _rebinds(statement.value, name.id, self.is_cpu)
                    if rebound is False:
                        return None  # `x = x.to(device)` somewhere in the function
                    if rebound is None:
                        values.append((statement.value, None))
                elif isinstance(target, ast.Tuple):
                    values.extend((statement.value, i) for i, t in enumerate(target.elts)
                                  if isinstance(t, ast.Name) and t.id == name.id)
        if values:
            lines = [self._host_element(value, index, function, depth) for value, index in values]
            return lines[0] if all(lines) else None
        return self._host_parameter(name.id, function, depth)

    def _host_element(self, value: ast.expr, index: int | None, function: _Function, depth: int) -> int | None:
        """An unpacked element: ``_, inverse = torch.unique(x, ...)`` follows ``x``; ``a, b = f(...)``
        follows element ``index`` of every ``return`` of ``f``."""
        if index is None:
            return self.host(value, function, depth)
        if isinstance(value, ast.Tuple):
            return self.host(value.elts[index], function, depth) if index < len(value.elts) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            callee = self.calls.functions.get(value.func.id, [])
            if len(callee) == 1:
                returns = [r.value for r in ast.walk(callee[0]) if isinstance(r, ast.Return)]
                if returns and all(isinstance(r, ast.Tuple) and index < len(r.elts) for r in returns):
                    return self._all_host([r.elts[index] for r in returns  # type: ignore[union-attr]
                                           ], callee[0], depth + 1)
                return None
        return self.host(value, function, depth)

    def _host_parameter(self, parameter: str, function: _Function, depth: int) -> int | None:
        """A parameter of a private function: every call of it in the file passes a CPU tensor."""
        names = [a.arg for a in function.args.posonlyargs + function.args.args]
        if parameter not in names or not _private(function, self.context):
            return None
        index = names.index(parameter)
        sites = self.calls.calls.get(function.name, [])
        passed = []
        for call, caller in sites:
            given = next((k.value for k in call.keywords if k.arg == parameter), None)
            if given is None and index < len(call.args) and not any(isinstance(a, ast.Starred)
                                                                    for a in call.args[:index + 1]):
                given = call.args[index]
            if given is None:
                return None
            passed.append((given, caller))
        lines = [self.host(given, caller, depth + 1) for given, caller in passed]
        return lines[0] if lines and all(lines) else None


# Calls that join a list of tensors into one: reading the list there keeps its tensors' place.
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.vstack", "torch.hstack"})


def _appended_only(context: FileContext, owner: ast.ClassDef, attribute: str) -> list[tuple[ast.expr, _Function]]:
    """What the class appends to ``self.<attribute>``, with the method appending it, when every
    mention of ``.<attribute>`` in the file is in the class: a store of ``[]``, the receiver of
    ``.append(one value)``, or the list handed to a join (``torch.cat``); empty otherwise."""
    if not any(f".{attribute}.append(" in line for line in context.lines):
        return []  # most `self.x` read in a float64 line are no such list: spare the walk
    parents = context.parents
    mentions = [n for n in ast.walk(context.tree) if isinstance(n, ast.Attribute) and n.attr == attribute]
    inside = {id(n) for n in ast.walk(owner)}
    appended: list[tuple[ast.expr, _Function]] = []
    for node in mentions:
        parent = parents.get(id(node))
        if id(node) not in inside or not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            return []
        if isinstance(node.ctx, ast.Store):
            if not (isinstance(parent, ast.Assign) and isinstance(parent.value, ast.List) and not parent.value.elts):
                return []
        elif (isinstance(parent, ast.Attribute) and parent.attr == "append"
              and isinstance(call := parents.get(id(parent)), ast.Call) and len(call.args) == 1 and not call.keywords):
            method = next((s for s in reversed(context.enclosing(node.lineno))
                           if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            if method is None:
                return []
            appended.append((call.args[0], method))
        elif not (isinstance(parent, ast.Call) and parent.args and parent.args[0] is node
                  and ast.unparse(parent.func) in _JOINS):
            return []
    return appended


def _handed_only_the_cpu(context: FileContext, call: ast.Call) -> bool:
    """``model.weights_to(torch.device("cpu"), torch.float64)`` as a statement of its own: a call
    given nothing but the CPU and a float64 dtype, whose result is not used, puts its float64
    values on the CPU.  A result that is used may be moved on (``[0].to(device)``,
    ``torch.as_tensor(..., device=device)``)."""
    if any(k.arg not in ("device", "dtype") for k in call.keywords):
        return False
    given = [*call.args, *(k.value for k in call.keywords)]
    if not any(names_the_cpu(a) for a in given) or not all(names_the_cpu(a) or _is_float64(a) for a in given):
        return False
    return any(isinstance(s, ast.Expr) and s.value is call for s in context.statements if s.lineno == call.lineno)


def on_cpu_by_construction(context: FileContext, line: int) -> str | None:
    """Where every float64 cast on the line gets its tensor from the CPU: "line N" of the move
    to the CPU (or of the device-less factory) it was traced back to."""
    every = _float64_casts(context, line)
    given_the_cpu = [c for c in every if _handed_only_the_cpu(context, c)]
    rest = [c for c in every if c not in given_the_cpu]
    # a cast's tensor is its receiver; a torch factory given a device makes it there
    receivers: list[ast.expr] = [
        c.func.value if c.func.attr in ("to", "double", "type") else c for c in rest
        if isinstance(c.func, ast.Attribute) and (c.func.attr in ("to", "double", "type") or (
            isinstance(c.func.value, ast.Name) and c.func.value.id == "torch"
            and any(k.arg == "device" for k in c.keywords)))]
    function = context.innermost_function(line)
    if not every or function is None or len(receivers) != len(rest):
        return None
    tracer = _HostTracer(context)
    lines = [tracer.host(receiver, function) for receiver in receivers] + [c.lineno for c in given_the_cpu]
    found = sorted({n for n in lines if n is not None})
    return ", ".join(f"line {n}" for n in found) if None not in lines else None


# -- a function that raises where the device is MPS, before the float64 ---------------------------


def _holds_on_mps(test: ast.expr) -> bool:
    """True where ``test`` holds whenever the device is MPS: ``x.device.type == "mps"``, ``x.is_mps``,
    ``device.type in ("mps", "xpu")``, ``x.device.type not in ("cpu", "cuda")``, or an ``or`` of one."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_holds_on_mps(value) for value in test.values)
    if _tests_mps(test) is True:
        return True
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn))
            and isinstance(test.left, ast.Attribute) and test.left.attr == "type"
            and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set))):
        return False
    kinds = test.comparators[0].elts
    if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in kinds):
        return False
    named = any(_is_mps(k) for k in kinds)
    return named if isinstance(test.ops[0], ast.In) else not named


def _only_raises(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise) and not any(
        isinstance(n, (ast.Return, ast.Break, ast.Continue)) for s in body for n in ast.walk(s))


def raised_on_mps_before(context: FileContext, line: int) -> str | None:
    """The line of an ``if <device is MPS>: raise`` that runs before ``line`` in its function: a
    statement of a block holding the line (the function's body or a block nested in it), ahead of it."""
    function = context.innermost_function(line)
    if function is None:
        return None
    body: list[ast.stmt] = function.body
    while body:
        holding = None
        for statement in body:
            if (statement.end_lineno or statement.lineno) < line:
                if (isinstance(statement, ast.If) and not statement.orelse and _holds_on_mps(statement.test)
                        and _only_raises(statement.body)):
                    return f"line {statement.lineno}"
            elif statement.lineno <= line:
                holding = statement
                break
        if holding is None or isinstance(holding, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        blocks = [getattr(holding, f, None) for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(holding, "handlers", ())]
        body = next((b for b in blocks if isinstance(b, list) and b
                     and b[0].lineno <= line <= (b[-1].end_lineno or b[-1].lineno)), [])
    return None


# -- a float64 line in the branch that MPS does not take ------------------------------------------


def _tested_device(test: ast.expr) -> str | None:
    """``device`` in ``device.type == "mps"`` (``!=``) or ``device.is_mps``: the device a test
    reads the type of.  Not ``device == "mps"``, which is False for ``torch.device("mps")``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _tested_device(test.operand)
    if isinstance(test, ast.Attribute) and test.attr == "is_mps":
        return ast.unparse(test.value)
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))
            and isinstance(test.left, ast.Attribute) and test.left.attr == "type" and _is_mps(test.comparators[0])):
        return ast.unparse(test.left.value)
    return None


def _places_only_on(function: _Function, device: str) -> bool:
    """Every device the function names for its tensors (``device=...``, ``.to(...)`` given more
    than a dtype) is ``device`` (or ``x.device`` of a tensor of it) or the CPU: the one device
    the test reads is the one its tensors are on."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        given = [k.value for k in node.keywords if k.arg == "device"]
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and node.args and not _names_a_dtype(
                node.args[0]):
            given.append(node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "mps", "xpu"):
            return False
        if any(ast.unparse(d) != device and not names_the_cpu(d) for d in given):
            return False
    return True


def in_branch_off_mps(context: FileContext, line: int) -> str | None:
    """``if device.type == "mps": ...float32... else: x.double()`` (or the body of ``!= "mps"``),
    in a function whose tensors are all put on that device or the CPU: the line runs only where
    the device is not MPS.  The line of that test."""
    function = context.innermost_function(line)
    if function is None:
        return None
    for statement in ast.walk(function):
        if not isinstance(statement, ast.If):
            continue
        holds = _tests_mps(statement.test)
        branch = statement.orelse if holds is True else statement.body if holds is False else []
        device = _tested_device(statement.test)
        if (branch and device is not None and branch[0].lineno <= line <= (branch[-1].end_lineno or 0)
                and _places_only_on(function, device)):
            return f"line {statement.lineno}"
    return None


# -- a float64 dtype replaced at once where the device is MPS --------------------------------------


def replaced_on_mps_next(context: FileContext, line: int) -> str | None:
    """``self._double_dtype = torch.float64`` followed at once by ``if self._device.type == "mps":
    self._double_dtype = torch.float32``: the object's dtype is never float64 where the object's
    device is MPS.  The dtype and the device tested are both the object's (``self.``); the last
    store of the dtype in the ``if`` is not float64.  The line of that ``if``."""
    for block in context.blocks():
        for index, statement in enumerate(block[:-1]):
            if statement.lineno != line:
                continue
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and _on_self(statement.targets[0]) and _is_float64(statement.value)):
                return None
            following = block[index + 1]
            target = ast.dump(statement.targets[0])
            stores = [s.value for s in getattr(following, "body", []) if isinstance(s, ast.Assign)
                      and len(s.targets) == 1 and ast.dump(s.targets[0]) == target]
            owner = next((c for c in reversed(context.enclosing(line)) if isinstance(c, ast.ClassDef)), None)
            if (isinstance(following, ast.If) and not following.orelse and _tests_mps(following.test) is True
                    and _tested_on_self(following.test) and stores and not _is_float64(stores[-1]) and owner is not None
                    and _used_only_with_its_device(owner, statement.targets[0], following.test)):
                return f"line {following.lineno}"
            return None
    return None


def _used_only_with_its_device(owner: ast.ClassDef, dtype: ast.expr, test: ast.expr) -> bool:
    """The object's device (``self._device`` in ``self._device.type``) is stored once in its class,
    and every other read of the dtype (``self._double_dtype``) is in a call that also passes that
    device (``torch.zeros(n, dtype=self._double_dtype, device=self._device)``): in this class the
    dtype never meets a device the test did not see (``Accum().to("mps")``, ``x_on_mps.to(self.dtype)``).
    Subclasses in other files are not read."""
    subject = test.left if isinstance(test, ast.Compare) else test
    device = subject.value if isinstance(subject, ast.Attribute) else None
    if not isinstance(device, ast.Attribute):
        return False
    device_text, dtype_text = ast.unparse(device), ast.unparse(dtype)
    stores = reads = paired = 0
    for node in walk_nodes(owner):
        if isinstance(node, ast.Attribute):
            text = ast.unparse(node)
            stores += text == device_text and isinstance(node.ctx, ast.Store)
            reads += text == dtype_text and isinstance(node.ctx, ast.Load)
        elif isinstance(node, ast.Call):
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                arguments.append(node.func.value)
            with_dtype = sum(1 for a in arguments if ast.unparse(a) == dtype_text)
            if with_dtype and any(ast.unparse(a) == device_text for a in arguments):
                paired += with_dtype
    return stores == 1 and paired == reads


def _on_self(node: ast.expr) -> bool:
    """``self.x``, ``self.x.y``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _tested_on_self(test: ast.expr) -> bool:
    """``self._device.type == "mps"``, ``self.x.is_mps``: the device tested is the object's."""
    subject = test.left if isinstance(test, ast.Compare) else test
    return isinstance(subject, ast.Attribute) and _on_self(subject.value)


def _is_float64(node: ast.expr) -> bool:
    """``torch.float64``, ``torch.double``."""
    return (isinstance(node, ast.Attribute) and node.attr in _FLOAT64 and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


# -- a private function chosen only for CPU inputs ------------------------------------------------


def _requires_cpu(test: ast.expr, functions: dict[str, list[_Function]], depth: int = 0) -> bool:
    """True where ``test`` holds only when a tensor is on the CPU: ``x.device.type == "cpu"``,
    ``x.is_cpu``, an ``and`` with such a conjunct, or a call of the file's function (by a bare name)
    every ``return`` of which is such a test."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_requires_cpu(value, functions, depth) for value in test.values)
    if isinstance(test, ast.Attribute) and test.attr == "is_cpu":
        return True
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.left, ast.Attribute) and test.left.attr == "type"
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "cpu"):
        return True
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and depth < 2:
        helper = functions.get(test.func.id, [])
        if len(helper) != 1:
            return False
        returns = [r.value for r in ast.walk(helper[0]) if isinstance(r, ast.Return)]
        return bool(returns) and all(r is not None and _requires_cpu(r, functions, depth + 1) for r in returns)
    return False


def chosen_only_on_cpu(context: FileContext, line: int) -> str | None:
    """``if _eligible(pred): return _loss_cpu(pred)``: the line is in a private function that its
    file calls only in the body of an ``if`` whose test holds only for CPU tensors."""
    function = context.innermost_function(line)
    if function is None or not function.name.startswith("_") or function.name.startswith("__"):
        return None
    uses = [n for n in context.loads().get(function.name, ()) if isinstance(n, ast.Name)]
    if not uses:
        return None
    functions, tests = _functions(context), set()
    for use in uses:
        guard = next((s for s in ast.walk(context.tree) if isinstance(s, ast.If)
                      and any(n is use for b in s.body for n in ast.walk(b)) and _requires_cpu(s.test, functions)),
                     None)
        if guard is None:
            return None
        tests.add(guard.lineno)
    return ", ".join(f"line {n}" for n in sorted(tests))


# -- a device that is CUDA or the CPU wherever it is set, never MPS --------------------------------

# The device prefixes that are never MPS: a float64 tensor there works.
_NOT_MPS = ("cuda", "cpu")
# How many names, calls and attributes deep a device is followed back to its value.
_DEVICE_DEPTH = 5
# Past this many Python files in a project, its other files are not read for stores of a name (nothing is lowered).
_MAX_PACKAGE_FILES = 2000
# What marks the folder above a package as its project's: scripts there may store into the package.
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Folders no package imports from: environments, caches, version control.
_NOT_PACKAGE = frozenset({"__pycache__", "site-packages", "node_modules", "venv", "env"})
# Stores by a computed name: `setattr(obj, "device", ...)` (with the name spelled in a string), and
# `obj.__dict__.update(...)`, `vars(obj)[...]`, `globals()[...]` (with any name).
_SETATTR = re.compile(rb"setattr(?:__)?\(")
_DICT_STORE = re.compile(rb"__dict__|\bvars\(|globals\(\)")


def _names_not_mps(text: str) -> bool:
    return text.split(":")[0] in _NOT_MPS


def _literal_not_mps(node: ast.expr | None) -> bool:
    """A device written out as CUDA or the CPU: ``"cuda:0"``, an index, ``f"cuda:{rank}"``,
    ``torch.device(...)`` of one, ``"cuda" if ... else "cpu"``."""
    if isinstance(node, ast.Constant):
        return (isinstance(node.value, str) and _names_not_mps(node.value)) or type(node.value) is int
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and ":" in first.value \
            and _names_not_mps(first.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # "cuda:%d" % rank
        return isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) \
            and ":" in node.left.value and _names_not_mps(node.left.value)
    if isinstance(node, ast.IfExp):
        return _literal_not_mps(node.body) and _literal_not_mps(node.orelse)
    if isinstance(node, ast.Call) and _is_torch_device(node.func):
        return _literal_not_mps(_device_type(node))
    return False


def _is_torch_device(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "device" and isinstance(func.value, ast.Name) \
        and func.value.id == "torch"


def _device_type(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "type"), None)


def _flat(body: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of ``body``, not those of the functions, lambdas and classes defined in it."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _bindings(nodes: list[ast.AST], name: str) -> list[ast.expr] | None:
    """The values ``name`` is assigned among ``nodes``; None where it is also bound some other way
    whose value is unknown here (a loop, ``with``, unpacking, an import, a ``match`` capture, a
    ``def``)."""
    values: list[ast.expr] = []
    plain_targets: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    values.append(node.value)
                    plain_targets.add(id(target))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            plain_targets.add(id(node.target))
            if node.value is not None:
                values.append(node.value)
    for node in nodes:
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load) \
                and id(node) not in plain_targets:
            return None
        if name in import_binds(node) or (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return None
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name == name \
                or isinstance(node, ast.MatchMapping) and node.rest == name:
            return None
    return values


@functools.lru_cache(maxsize=65536)
def _stores_name(path: str, modified: int, name: str, attribute: bool) -> bool:
    """The file stores ``name`` as an attribute (``x.name = ...``, ``x.name, y = ...``, ``x.name +=
    ...``), or by a computed name in a file that spells it, or, for an ``attribute``, in a class body
    (``name = ...``, ``def name(self)``: a subclass's); ``modified`` is only part of the cache key."""
    try:
        data = regular_file_bytes(path, 64 << 20)
    except Unreadable:
        return True
    if data is None or name.encode() not in data:
        return False
    word = re.escape(name.encode())
    # `.name` among a statement's targets: before its `=`, with no call or `=` before it on the line
    if re.search(rb"(?m)^[^=(\n#]*\." + word + rb"\b[^=(\n]*(?<![=!<>])=(?!=)", data):
        return True
    if (_SETATTR.search(data) or _DICT_STORE.search(data)) and re.search(rb"(?<![\w])" + word + rb"(?![\w])", data):
        return True
    if not attribute or not re.search(rb"(?m)^[ \t]+(?:" + word + rb"\s*(?::[^=\n]*)?=(?!=)|(?:async[ \t]+)?def[ \t]+"
                                      + word + rb"\b)", data):
        return False
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return True
    return any(isinstance(owner, ast.ClassDef) and _bindings(_flat(owner.body), name) != []
               for owner in ast.walk(tree))


def _package_files(path: str) -> list[str] | None:
    """The other Python files of the project holding ``path``: below the folder that holds the package's
    setup files or repository (a script's folder or the package's top folder without one); None past
    ``_MAX_PACKAGE_FILES``."""
    folder = package_root(path)
    project = os.path.dirname(folder)
    if any(os.path.exists(os.path.join(project, marker)) for marker in _PROJECT_MARKERS):
        folder = project
    found: list[str] = []
    for root, folders, files in os.walk(folder):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in _NOT_PACKAGE]
        found.extend(os.path.join(root, f) for f in files if f.endswith(".py"))
        if len(found) > _MAX_PACKAGE_FILES:
            return None
    own = str(Path(path).resolve())
    return [f for f in found if str(Path(f).resolve()) != own]


class _DeviceValues:
    """Follows a device expression back to every value it can have: a written-out device, a name
    bound in a function nested in no other or at the top of the module, ``self.device`` of a class
    of the file, or a call of a plain function of the file.  Anything else (a parameter, a tensor's
    ``.device``, an import other than a module's written-out device, a method) may be MPS."""

    def __init__(self, context: FileContext, path: str) -> None:
        self.context = context
        self.path = path
        self.classes = {s.name: s for s in context.scopes if isinstance(s, ast.ClassDef)}
        self.module_nodes = _flat(context.tree.body)
        self.declared = {n for node in walk_nodes(context.tree) if isinstance(node, (ast.Global, ast.Nonlocal))
                         for n in node.names}
        self._attribute_stores: dict[str, list[tuple[ast.expr | None, _Function | None]] | None] | None = None
        self._other_files: dict[tuple[str, bool], bool] = {}
        self._answers: dict[tuple[str, str], bool] = {}

    def never_mps(self, node: ast.expr | None, function: _Function | None, depth: int = 0) -> bool:
        if node is None or depth > _DEVICE_DEPTH:
            return False
        if _literal_not_mps(node):
            return True
        if isinstance(node, ast.IfExp):
            return self.never_mps(node.body, function, depth + 1) and self.never_mps(node.orelse, function, depth + 1)
        if isinstance(node, ast.Call) and _is_torch_device(node.func):
            return self.never_mps(_device_type(node), function, depth + 1)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.cuda.current_device":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called = node.func.id
            if function is not None and (called in _parameters(function) or _bindings(_flat(function.body), called)):
                return False  # the caller's own `_device`, not the file's: the answer remembered is the file's
            return self._remembered(("call", called), lambda: self._call(called, depth))
        if isinstance(node, ast.Name):
            return self._name(node.id, function, depth)
        if isinstance(node, ast.Attribute) and self._own_object(node.value, function):
            return self._remembered(("attribute", node.attr), lambda: self._attribute(node.attr, depth))
        return False

    def _remembered(self, key: tuple[str, str], answer: Callable[[], bool]) -> bool:
        if key not in self._answers:
            self._answers[key] = False  # a cycle (`a` returns `b()`, `b` returns `a()`) is no answer
            self._answers[key] = answer()
        return self._answers[key]

    def _call(self, name: str, depth: int) -> bool:
        """A plain function of the file, defined once at its top, bound no other way, every return a
        device that is never MPS."""
        if name in self.declared:
            return False
        definitions = [s for s in self.context.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and s.name == name]
        if len(definitions) != 1 or definitions[0].decorator_list:
            return False
        bound_elsewhere = [n for n in self.module_nodes if n is not definitions[0] and (
            name in import_binds(n) or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
            or isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))]
        if bound_elsewhere or self._stored_elsewhere(name):
            return False
        returns = [n for n in _flat(definitions[0].body) if isinstance(n, ast.Return)]
        return bool(returns) and all(self.never_mps(r.value, definitions[0], depth + 1) for r in returns)

    def _name(self, name: str, function: _Function | None, depth: int) -> bool:
        if name in self.declared:
            return False  # `global DEVICE` or `nonlocal device` somewhere: stored where this does not read
        if function is not None:
            if name in _parameters(function):
                return False
            bound = _bindings(_flat(function.body), name)
            if bound is None:
                return False
            if bound:
                return all(self.never_mps(v, function, depth + 1) for v in bound)
        module = _bindings(self.module_nodes, name)
        if module is None:
            return self._imported_literal(name)
        if self._computed_store(name) or self._stored_elsewhere(name):
            return False
        return bool(module) and all(self.never_mps(v, None, depth + 1) for v in module)

    def _imported_literal(self, name: str) -> bool:
        """``from pkg.config import DEVICE`` where the package's module binds DEVICE only to a
        written-out device that is never MPS, and nothing stores it by another route."""
        if sum(name in import_binds(n) for n in walk_nodes(self.context.tree)) != 1:
            return False
        found = _imported_module(self.context, self.path, name)
        if found is None or self._stored_elsewhere(name):
            return False
        module, original = found
        try:
            data = regular_file_bytes(str(module), 64 << 20)
            tree = ast.parse(data) if data is not None else None
        except (Unreadable, SyntaxError, ValueError):
            return False
        if tree is None or any(isinstance(n, (ast.Global, ast.Nonlocal)) and original in n.names
                               for n in ast.walk(tree)):
            return False
        values = _bindings(_flat(tree.body), original)
        return values is not None and bool(values) and all(_literal_not_mps(v) for v in values)

    def _own_object(self, node: ast.expr, function: _Function | None) -> bool:
        """``self`` in a method of a class of the file whose bases are the file's own classes, or a
        name the function binds only to a new instance of such a class (``instance = cls(...)``):
        not a tensor, whose ``.device`` its caller chose, nor a library class's property."""
        if not isinstance(node, ast.Name) or function is None:
            return False
        owner = self._class_of(function)
        if owner is None or not self._own_hierarchy(owner):
            return False
        if node.id == "self":
            return True
        values = _bindings(_flat(function.body), node.id)
        return values is not None and bool(values) and all(
            isinstance(v, ast.Call) and ast.unparse(v.func) in ("cls", "cls.__new__") for v in values)

    def _class_of(self, function: _Function) -> ast.ClassDef | None:
        return next((c for c in self.classes.values() if function in c.body), None)

    def _own_hierarchy(self, owner: ast.ClassDef, depth: int = 0) -> bool:
        if depth > _DEVICE_DEPTH or owner.keywords:
            return False
        for base in owner.bases:
            if isinstance(base, ast.Name) and base.id == "object":
                continue
            if not isinstance(base, ast.Name) or base.id not in self.classes \
                    or not self._own_hierarchy(self.classes[base.id], depth + 1):
                return False
        return True

    def _attribute(self, attribute: str, depth: int) -> bool:
        """Every store of ``.attribute`` in the file (on any object, a class body's too) is never MPS,
        none is by a computed name, and no other file of the package stores it."""
        stores = self._stores().get(attribute, [])
        if not stores or self._computed_store(attribute) or self._stored_elsewhere(attribute, attribute=True):
            return False
        return all(self.never_mps(v, f, depth + 1) for v, f in stores)

    def _stores(self) -> dict[str, list[tuple[ast.expr | None, _Function | None]] | None]:
        """Every attribute the file stores, with each value and its function, read in one walk;
        None for one stored so that its value is unknown (``+=``, unpacked, a field, a property)."""
        if self._attribute_stores is None:
            found: dict[str, list[tuple[ast.expr | None, _Function | None]] | None] = {}

            def add(name: str, value: ast.expr | None, function: _Function | None) -> None:
                known = found.setdefault(name, [])
                if known is not None:
                    if value is None:
                        found[name] = None
                    else:
                        known.append((value, function))

            for owner in self.classes.values():
                for statement in owner.body:
                    if isinstance(statement, ast.Assign):
                        for target in statement.targets:
                            for stored in ast.walk(target):
                                if isinstance(stored, ast.Name):
                                    add(stored.id, statement.value if stored is target else None, None)
                    elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                        add(statement.target.id, None, None)  # a field: its constructor's caller sets it
                    elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        add(statement.name, None, None)  # a property or a method of that name
            for node in walk_nodes(self.context.tree):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        for stored in ast.walk(target):
                            if isinstance(stored, ast.Attribute) and isinstance(stored.ctx, ast.Store):
                                add(stored.attr, node.value if stored is target else None,
                                    self.context.innermost_function(node.lineno))
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem,
                                       ast.NamedExpr, ast.Delete)):
                    for stored in ast.walk(node):
                        if isinstance(stored, ast.Attribute) and not isinstance(stored.ctx, ast.Load):
                            add(stored.attr, None, None)
            self._attribute_stores = found
        return self._attribute_stores

    def _stored_elsewhere(self, name: str, attribute: bool = False) -> bool:
        """Another file of the project stores ``name`` as an attribute (``mod.DEVICE = ...``,
        ``obj.device = ...``) or by a computed name, or for an ``attribute`` in a class body (a
        subclass's ``device = "mps"``)."""
        if (name, attribute) not in self._other_files:
            files = _package_files(self.path)
            self._other_files[name, attribute] = files is None or any(
                _stores_name(f, _modified(f), name, attribute) for f in files)
        return self._other_files[name, attribute]

    def _computed_store(self, name: str) -> bool:
        """This file stores by a computed name: ``setattr`` with ``name`` in a string, or a dict of
        names (``__dict__``, ``vars``, ``globals()``)."""
        text = self.context.text.encode(errors="replace")
        return _DICT_STORE.search(text) is not None or (
            _SETATTR.search(text) is not None and any(isinstance(n, ast.Constant) and n.value == name
                                                      for n in walk_nodes(self.context.tree)))


def _modified(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _parameters(function: _Function) -> set[str]:
    arguments = function.args
    return {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                            arguments.kwarg) if a is not None}


def _placements(cast: ast.Call, parents: dict[int, ast.AST]) -> list[ast.expr] | None:
    """Every device a float64-making call's tensor is put on: its own ``device=`` or a ``.to(device)``
    before it in the chain (``torch.ones(n).to(DEVICE).double()``), and every ``.to(...)`` after it
    (``torch.tensor(x, dtype=torch.float64).to(DEVICE)``); None where none is found or one moves
    it by other means."""
    found: list[ast.expr] = []
    given = next((k.value for k in cast.keywords if k.arg == "device"), None)
    if given is None and isinstance(cast.func, ast.Attribute) and cast.func.attr == "to" and cast.args \
            and not _is_float64(cast.args[0]):
        given = cast.args[0]
    receiver = cast.func.value if isinstance(cast.func, ast.Attribute) else None
    while given is None and isinstance(receiver, ast.Call):
        given = next((k.value for k in receiver.keywords if k.arg == "device"), None)
        if given is None and isinstance(receiver.func, ast.Attribute) and receiver.func.attr == "to":
            given = _device_argument(receiver)
        receiver = receiver.func.value if isinstance(receiver.func, ast.Attribute) else None
    if given is not None:
        found.append(given)
    node: ast.AST = cast
    while True:  # the methods called on the result: `.to(device)` moves it again
        attribute = parents.get(id(node))
        if not isinstance(attribute, ast.Attribute):
            break
        outer = parents.get(id(attribute))
        if not (isinstance(outer, ast.Call) and outer.func is attribute):
            break
        if attribute.attr in ("to", "cuda", "mps", "cpu", "type"):
            if attribute.attr != "to":
                return None
            moved = next((k.value for k in outer.keywords if k.arg == "device"), None) or next(
                (a for a in outer.args if not _names_a_dtype(a)), None)
            if moved is not None:
                found.append(moved)
        node = outer
    return found or None


def placed_on_cuda_or_cpu(context: FileContext, line: int, path: str) -> str | None:
    """The devices, each CUDA or the CPU wherever its value comes from (``DEVICE = torch.device("cuda"
    if torch.cuda.is_available() else "cpu")``, ``self.device`` set only so, a ``_device()`` function
    returning only so), that every float64 tensor of the line is made on or moved to: on a Mac it is
    the CPU, where float64 works."""
    function = context.innermost_function(line)
    if function is not None and any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s is not function
                                    for s in context.enclosing(line)):
        return None  # a closure: a name may be its enclosing function's
    if context.enclosing(line) and isinstance(context.enclosing(line)[-1], ast.ClassDef):
        return None  # a class body: its names are not the module's
    parents = context.parents
    casts = [c for c in _float64_casts(context, line) if isinstance(c.func, ast.Attribute) and c.func.attr == "double"]
    for name in float64_names(context, line):
        argument_of = parents.get(id(name))
        call = parents.get(id(argument_of)) if isinstance(argument_of, ast.keyword) else argument_of
        if not isinstance(call, ast.Call) or call.func is name:
            return None  # `dtype = torch.float64`: where it goes is not read here
        casts.append(call)  # a call begun on an earlier line too: `torch.tensor(\n x, dtype=torch.float64)`
    if not casts:
        return None
    values = _device_values(context, path)
    found: set[str] = set()
    for cast in casts:
        devices = _placements(cast, parents)
        if devices is None or any(_in_lambda(d, parents) for d in devices) \
                or not all(values.never_mps(d, function) for d in devices):
            return None
        found.update(ast.unparse(d) for d in devices)
    return ", ".join(sorted(found))


def _in_lambda(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, ast.Lambda):
            return True
    return False


@functools.lru_cache(maxsize=8)
def _device_values(context: FileContext, path: str) -> _DeviceValues:
    """One reader a file: the file's stores are indexed once, whatever the number of float64 lines."""
    return _DeviceValues(context, path)


# -- a private module imported only by functions that raise on MPS first ---------------------------


def _refusing_importer(tree: ast.Module, stem: str) -> int | None:
    """The line of the ``if <device is MPS>: raise`` that guards every import of module ``stem`` in
    this file: each is a ``from pkg import``/``from pkg.stem import`` inside a function whose body
    raises on MPS before any use of the imported names. None where one is not so guarded."""
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
               and ((isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == stem)
                    or any(a.name.split(".")[-1] == stem for a in node.names))]
    if not imports:
        return None
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    guard_line = None
    for node in imports:
        if not isinstance(node, ast.ImportFrom):
            return None
        holder = min((f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)),
                     key=lambda f: (f.end_lineno or f.lineno) - f.lineno, default=None)
        if holder is None:
            return None
        guard = next((s for s in holder.body if isinstance(s, ast.If) and not s.orelse
                      and _holds_on_mps(s.test) and _only_raises(s.body)), None)
        if guard is None:
            return None
        names = {a.asname or a.name for a in node.names}
        if any(isinstance(n, ast.Name) and n.id in names and n.lineno <= (guard.end_lineno or guard.lineno)
               for n in ast.walk(holder)):
            return None
        guard_line = guard.lineno
    return guard_line


def _mentions(tree: ast.Module, stem: str) -> int:
    """How often the code names module ``stem``: in imports, names, attributes and strings other
    than docstrings (``importlib.import_module("pkg._program")`` names it too)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            count += stem in (node.module or "").split(".")
        elif isinstance(node, ast.alias):
            count += stem in node.name.split(".")
        elif isinstance(node, ast.Name):
            count += node.id == stem
        elif isinstance(node, ast.Attribute):
            count += node.attr == stem
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            count += stem in node.value
    return count


def lower_modules_refused_on_mps(work: list, results: list, whole_package: Callable[[str], bool]) -> None:
    """float64 in a function of a private module (``_program.py``) that every scanned file imports
    only inside a function raising on MPS before it uses what it imports: the module's code never
    runs on MPS. Read after every file is scanned: it needs who imports the module."""
    by_display = {job.display: job.path for job in work}
    pending: dict[str, list] = {}
    for result, _ in results:
        os_path = by_display.get(result.path)
        stem = Path(os_path).stem if os_path else ""
        if not stem.startswith("_") or stem.startswith("__") or not whole_package(os_path or ""):
            continue
        hot = [f for f in result.findings if f.rule_id == FLOAT64 and f.severity_cap is None]
        if hot:
            pending[os_path or ""] = hot
    for os_path, hot in pending.items():
        stem = Path(os_path).stem
        needle = re.compile(rb"(?<![\w])" + re.escape(stem.encode()) + rb"(?![\w])")
        guards: list[str] = []
        for job in work:
            if job.path == os_path:
                continue
            try:
                data = Path(job.path).read_bytes()
            except OSError:
                guards = []
                break
            found = len(needle.findall(data))
            if not found:
                continue
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                guards = []
                break
            line = _refusing_importer(tree, stem)
            imports = sum(1 for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                          and (n.module or "").split(".")[-1] == stem)
            if line is None or imports != _mentions(tree, stem):  # named other than by those imports
                guards = []
                break
            guards.append(f"{job.display}:{line}")
        if not guards:
            continue
        try:
            tree = ast.parse(Path(os_path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        spans = [(f.lineno, f.end_lineno or f.lineno) for f in ast.walk(tree)
                 if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for finding in hot:
            if any(low <= finding.line <= high for low, high in spans):
                finding.severity_cap = "perf"
                finding.cap_reason = (f"float64 in private module {stem}, which the package imports only in "
                                      f"functions that raise where the device is MPS before using it "
                                      f"({', '.join(sorted(guards))}): the MPS error cannot happen")
