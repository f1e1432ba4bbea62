"""The torch.library registrations of one file, by op: which devices each op has a kernel for.

A registration for CUDA alone (TP001, detectors/devices.py) leaves the other devices without a
kernel only if nothing else registers one for them.  In the same file, ``custom_op`` without
``device_types``, ``impl(..., "default")`` and ``register_kernel(op, None)`` give every device a
kernel (CompositeExplicitAutograd), and ``register_kernel("cpu")`` or ``impl(lib, "op", "CPU")``
gives the CPU one: torch's own ``register_kernel`` example registers its op for "cpu" and then for
"cuda".  Registrations in other files are not read.

Only what the file surely does counts as another kernel: a registration among the module's own
statements (not in a function, a class or an ``if``), of an op named unambiguously (a name or a
``Library`` bound once in the file).
"""
from __future__ import annotations

import ast
import dataclasses
import re

from torchport.scan.detectors.syntax import call_argument, kernel_device_values, last_name, string_value, walk_nodes

EVERY_DEVICE = "*"
# What torch.library reads as a kernel every device uses: impl's "default" (exactly so:
# library.py's _device_type_to_key) and the composite dispatch keys.
_EVERY_DEVICE_KEYS = frozenset({"default", "CompositeExplicitAutograd", "CompositeImplicitAutograd"})
# Devices (and dispatch keys, lowercased) that are scan targets: a kernel for one makes a
# registration for CUDA alone fine on that target.
TARGET_OF_DEVICE = {"cpu": "cpu", "mps": "mps", "xpu": "xpu", "xla": "xla"}
_LIBRARY_RECEIVER = re.compile(r"(?:torch\.)?library")


@dataclasses.dataclass(frozen=True)
class Registration:
    op: str  # "ns::name"; where the file does not say, the expression that names the op
    devices: frozenset[str]  # lowercased device types or dispatch keys; EVERY_DEVICE for all
    line: int
    call: ast.Call
    unconditional: bool  # among the module's own statements: it surely runs on import


@dataclasses.dataclass(frozen=True)
class _Library:
    namespace: str
    dispatch_key: str  # Library(ns, kind, dispatch_key): what its impl() uses when given no key


def registrations(tree: ast.Module) -> list[Registration]:
    """Every kernel registration of the file whose op and devices are written out, in file order."""
    bound = _bindings(tree)
    libraries = _libraries(tree, bound)
    names = _op_names(tree, bound)
    top_level = {id(node) for statement in tree.body for node in _run_on_import(statement)}
    found = []
    for node in walk_nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        op = _op(node, names, libraries)
        if op is None:
            continue
        devices = _devices(node, libraries)
        if devices is not None:
            found.append(Registration(op, devices, node.lineno, node, id(node) in top_level))
    found.sort(key=lambda r: (r.line, r.call.col_offset))
    return found


def _run_on_import(statement: ast.stmt) -> list[ast.AST]:
    """The nodes of a module-level statement that run when the module is imported: a def's
    decorators (not its body), an expression or assignment (not a lambda's body)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node for decorator in statement.decorator_list for node in walk_nodes(decorator)]
    if isinstance(statement, (ast.Expr, ast.Assign)):
        found: list[ast.AST] = []
        pending: list[ast.AST] = [statement]
        while pending:
            node = pending.pop()
            if not isinstance(node, ast.Lambda):  # a lambda's body runs only when it is called
                found.append(node)
                pending.extend(ast.iter_child_nodes(node))
        return found
    return []


def _devices(call: ast.Call, libraries: dict[str, _Library]) -> frozenset[str] | None:
    if _library_method(call, libraries):
        assert isinstance(call.func, ast.Attribute)
        key = call_argument(call, 2, "dispatch_key")
        value = "" if key is None else string_value(key)
        if value is None:
            return None
        # Library.impl's default key is the library's own, and CompositeImplicitAutograd where
        # that is "" too (library.py: `if dispatch_key == "": dispatch_key = self.dispatch_key`).
        value = value or libraries[ast.unparse(call.func.value)].dispatch_key or "CompositeImplicitAutograd"
        return _normalised([value])
    values = kernel_device_values(call)
    if values is None:
        return None
    if last_name(call.func) in ("custom_op", "register_kernel") and (not values or None in values):
        return frozenset({EVERY_DEVICE})  # no device_types, or None: the function serves every device
    if not values or None in values:
        return None
    return _normalised([value for value in values if value is not None])


def _normalised(devices: list[str]) -> frozenset[str]:
    return frozenset(EVERY_DEVICE if device in _EVERY_DEVICE_KEYS else device.lower() for device in devices)


def _op(call: ast.Call, names: dict[str, str], libraries: dict[str, _Library]) -> str | None:
    """The op a registration call is for; None for a call that registers no kernel, or for an op
    the file does not name unambiguously."""
    func, args = call.func, call.args
    name = last_name(func)
    on_torch_library = not isinstance(func, ast.Attribute) or bool(_LIBRARY_RECEIVER.fullmatch(ast.unparse(func.value)))
    first = args[0] if args else None
    if _library_method(call, libraries):
        assert isinstance(func, ast.Attribute)
        op_name = string_value(first) if first is not None else None
        return None if op_name is None else _qualified(libraries[ast.unparse(func.value)].namespace, op_name)
    if name == "custom_op" and on_torch_library:
        return string_value(first) if first is not None else None
    if name == "register_kernel":
        if not on_torch_library:
            assert isinstance(func, ast.Attribute)
            return names.get(ast.unparse(func.value))
        if first is None:
            return None
        return string_value(first) or names.get(ast.unparse(first))
    if name == "impl" and on_torch_library and first is not None:
        qualified = string_value(first)
        if qualified is not None:
            return qualified
        op_name = string_value(args[1]) if len(args) > 1 else None
        library = libraries.get(ast.unparse(first))
        return None if op_name is None or library is None else _qualified(library.namespace, op_name)
    return None


def _qualified(namespace: str, op_name: str) -> str:
    return op_name if "::" in op_name else f"{namespace}::{op_name}"


def _library_method(call: ast.Call, libraries: dict[str, _Library]) -> bool:
    """``lib.impl("op", fn, "CUDA")`` on a ``torch.library.Library`` the file makes."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "impl" and ast.unparse(func.value) in libraries


def _bindings(tree: ast.Module) -> dict[str, int]:
    """How often the file binds each name (``x``, ``self.x``): assignments, parameters, loop and
    ``with`` targets, imports, defs.  A name bound more than once may be another object where read."""
    count: dict[str, int] = {}
    for node in walk_nodes(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            key = ast.unparse(node)
        elif isinstance(node, ast.arg):
            key = node.arg
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            key = node.name
        elif isinstance(node, ast.alias):
            key = node.asname or node.name.split(".")[0]
        else:
            continue
        count[key] = count.get(key, 0) + 1
    return count


def _libraries(tree: ast.Module, bound: dict[str, int]) -> dict[str, _Library]:
    """``lib = torch.library.Library("ns", "IMPL", "CPU")`` at module level, ``lib`` bound nowhere else."""
    found = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.value, ast.Call) and last_name(statement.value.func) == "Library" \
                and statement.value.args:
            call = statement.value
            namespace = string_value(call.args[0])
            key = call_argument(call, 2, "dispatch_key")
            dispatch_key = "" if key is None else string_value(key)
            target = ast.unparse(statement.targets[0])
            if namespace is not None and dispatch_key is not None and bound.get(target) == 1:
                found[target] = _Library(namespace, dispatch_key)
    return found


def _op_names(tree: ast.Module, bound: dict[str, int]) -> dict[str, str]:
    """The names the file gives its ops at module level, each bound nowhere else:
    ``@custom_op("ns::op") def op`` and ``op = custom_op("ns::op", fn)``."""
    found = {}
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in statement.decorator_list:
                if isinstance(decorator, ast.Call) and last_name(decorator.func) == "custom_op" and decorator.args:
                    qualified = string_value(decorator.args[0])
                    if qualified is not None and bound.get(statement.name) == 1:
                        found[statement.name] = qualified
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.value, ast.Call) and last_name(statement.value.func) == "custom_op" \
                and statement.value.args:
            qualified = string_value(statement.value.args[0])
            target = ast.unparse(statement.targets[0])
            if qualified is not None and bound.get(target) == 1:
                found[target] = qualified
    return found
