"""The torch.library registrations of one file, by op: which devices each op has a kernel for.

A registration for CUDA alone (TP001, detectors/devices.py) leaves the other devices without a
kernel only if nothing else registers one for them.  In the same file, ``custom_op`` without
``device_types``, ``impl(..., "default")`` and ``register_kernel(op, None)`` give every device a
kernel (CompositeExplicitAutograd), and ``register_kernel("cpu")`` or ``impl(lib, "op", "CPU")``
gives the CPU one: torch's own ``register_kernel`` example registers its op for "cpu" and then for
"cuda".  Registrations in other files are not read.
"""
from __future__ import annotations

import ast
import dataclasses
import re

from torchport.scan.detectors.syntax import kernel_device_arguments, kernel_devices, last_name, string_value, walk_nodes

EVERY_DEVICE = "*"
# Dispatch keys whose kernel every device uses ("default" is torch.library.impl's name for the first).
_EVERY_DEVICE_KEYS = frozenset({"default", "compositeexplicitautograd", "compositeimplicitautograd"})
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


def registrations(tree: ast.Module) -> list[Registration]:
    """Every kernel registration of the file whose devices are written out, in file order."""
    libraries = _libraries(tree)
    names = _op_names(tree)
    found = []
    for node in walk_nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        op = _op(node, names, libraries)
        if op is None:
            continue
        devices = _devices(node, libraries)
        if devices is not None:
            found.append(Registration(op, devices, node.lineno, node))
    found.sort(key=lambda r: (r.line, r.call.col_offset))
    return found


def _devices(call: ast.Call, libraries: dict[str, str]) -> frozenset[str] | None:
    if _library_method(call, libraries):
        key = call.args[2] if len(call.args) > 2 else next(
            (k.value for k in call.keywords if k.arg == "dispatch_key"), None)
        value = "" if key is None else string_value(key)
        if value is None:
            return None
        # Library.impl's default key is the library's own, and else CompositeImplicitAutograd.
        return frozenset({EVERY_DEVICE}) if value == "" else _normalised([value.lower()])
    every_device = last_name(call.func) in ("custom_op", "register_kernel")
    if every_device and any(isinstance(value, ast.Constant) and value.value is None
                            for value in kernel_device_arguments(call) or ()):
        return frozenset({EVERY_DEVICE})  # device_types=None: the function serves every device
    devices = kernel_devices(call)
    if devices is None:
        return None
    if not devices and every_device:
        return frozenset({EVERY_DEVICE})  # no device_types: the function serves every device
    return _normalised(devices) if devices else None


def _normalised(devices: list[str]) -> frozenset[str]:
    return frozenset(EVERY_DEVICE if device in _EVERY_DEVICE_KEYS else device for device in devices)


def _op(call: ast.Call, names: dict[str, str], libraries: dict[str, str]) -> str | None:
    """The op a registration call is for, or None for a call that registers no kernel."""
    func, args = call.func, call.args
    name = last_name(func)
    on_torch_library = not isinstance(func, ast.Attribute) or bool(_LIBRARY_RECEIVER.fullmatch(ast.unparse(func.value)))
    first = args[0] if args else None
    if _library_method(call, libraries):
        assert isinstance(func, ast.Attribute)
        op_name = string_value(first) if first is not None else None
        return None if op_name is None else _qualified(libraries[ast.unparse(func.value)], op_name)
    if name == "custom_op" and on_torch_library:
        return string_value(first) if first is not None else None
    if name == "register_kernel":
        if not on_torch_library:
            assert isinstance(func, ast.Attribute)
            receiver = ast.unparse(func.value)
            return names.get(receiver, receiver)
        if first is None:
            return None
        return string_value(first) or names.get(ast.unparse(first), ast.unparse(first))
    if name == "impl" and on_torch_library and first is not None:
        qualified = string_value(first)
        if qualified is not None:
            return qualified
        op_name = string_value(args[1]) if len(args) > 1 else None
        library = ast.unparse(first)
        return None if op_name is None else _qualified(libraries.get(library, library), op_name)
    return None


def _qualified(namespace: str, op_name: str) -> str:
    return op_name if "::" in op_name else f"{namespace}::{op_name}"


def _library_method(call: ast.Call, libraries: dict[str, str]) -> bool:
    """``lib.impl("op", fn, "CUDA")`` on a ``torch.library.Library`` the file makes."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "impl" and ast.unparse(func.value) in libraries


def _libraries(tree: ast.Module) -> dict[str, str]:
    """``lib = torch.library.Library("ns", "IMPL")`` (or ``self.lib = Library(...)``): namespace by name."""
    found = {}
    for node in walk_nodes(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call) \
                and last_name(node.value.func) == "Library" and node.value.args:
            namespace = string_value(node.value.args[0])
            if namespace is not None:
                found[ast.unparse(node.targets[0])] = namespace
    return found


def _op_names(tree: ast.Module) -> dict[str, str]:
    """The names the file gives its ops: ``@custom_op("ns::op") def op`` and ``op = custom_op("ns::op", fn)``."""
    found = {}
    for node in walk_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and last_name(decorator.func) == "custom_op" and decorator.args:
                    qualified = string_value(decorator.args[0])
                    if qualified is not None:
                        found[node.name] = qualified
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call) \
                and last_name(node.value.func) == "custom_op" and node.value.args:
            qualified = string_value(node.value.args[0])
            if qualified is not None:
                found[ast.unparse(node.targets[0])] = qualified
    return found
