"""Is a line reached only when the device is CUDA (or XLA)?  Reads the tests that must hold for
the line to run and recognises, on the AST, the forms a device test takes: a tensor's
``.is_cuda``, ``device == "cuda"`` (or ``== torch.device("cuda")``), ``device.type in ("cuda", "xla")``,
``str(device).startswith("cuda")``, a flag stored from such a test, and a call to a helper of
the same file whose body returns one (``def _is_cuda(device): return device.type == "cuda"``).
An early ``return``/``raise`` on the negated test guards what follows it in the function.

No device helper, option or package is known by name.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchport.scan import default_path
from torchport.scan.detectors.syntax import dotted_name, walk_nodes

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# Device types that a user without CUDA reaches only on purpose: CUDA itself, and XLA, whose
# branch runs only where torch_xla is installed and chosen.
_GUARDED_TYPES = ("cuda", "xla")

# How many helpers or stored flags deep one test is followed.
_DEPTH = 3


def _guarded_string(node: ast.expr) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``"xla"``, or ``torch.device("cuda")`` (``device == torch.device("cuda")``
    holds only for a CUDA device too)."""
    if (isinstance(node, ast.Call) and dotted_name(node.func) == "torch.device" and node.args
            and not node.keywords):
        node = node.args[0]
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.split(":", 1)[0] in _GUARDED_TYPES)


def _guarded_strings(node: ast.expr) -> bool:
    """``("cuda", "xla")``: every member names a guarded device type."""
    return (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts)
            and all(_guarded_string(e) for e in node.elts))


def is_device_test(context: FileContext, test: ast.expr, taken: bool, depth: int = 0) -> bool:
    """Whether branch ``taken`` of ``test`` runs only when a device is CUDA or XLA."""
    if depth > _DEPTH:
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return is_device_test(context, test.operand, not taken, depth)
    if isinstance(test, ast.BoolOp):
        # `a and b` taken, or `a or b` not taken: every operand holds, so one device test is enough
        if isinstance(test.op, ast.And) == taken:
            return any(is_device_test(context, v, taken, depth) for v in test.values)
        return all(is_device_test(context, v, taken, depth) for v in test.values)
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
        return taken
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, (ast.Eq, ast.Is)) and (_guarded_string(left) or _guarded_string(right)):
            return taken
        if isinstance(op, (ast.NotEq, ast.IsNot)) and (_guarded_string(left) or _guarded_string(right)):
            return not taken
        if isinstance(op, ast.In) and _guarded_strings(right):
            return taken
        if isinstance(op, ast.NotIn) and _guarded_strings(right):
            return not taken
        return False
    if isinstance(test, ast.Call):
        func = test.func
        if (isinstance(func, ast.Attribute) and func.attr == "startswith" and len(test.args) == 1
                and (_guarded_string(test.args[0]) or _guarded_strings(test.args[0]))):
            return taken
        if isinstance(func, ast.Name) and taken:
            return _helper_returns_device_test(context, func.id, depth + 1)
        return False
    if isinstance(test, ast.Name) and taken:
        return _flag_from_device_test(context, test.id, depth + 1)
    return False


def _helper_returns_device_test(context: FileContext, name: str, depth: int) -> bool:
    """``def _is_cuda(device): return isinstance(...) and device.type == "cuda"``: every return
    of the file's function ``name`` is a device test."""
    for statement in context.statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
            returns = [n for n in walk_nodes(statement) if isinstance(n, ast.Return)]
            return bool(returns) and all(r.value is not None and is_device_test(context, r.value, True, depth)
                                         for r in returns)
    return False


def _flag_from_device_test(context: FileContext, name: str, depth: int) -> bool:
    """``on_cuda = x.device.type == "cuda"``: every value the file stores under ``name`` is a
    device test."""
    values = [s.value for s in context.statements if isinstance(s, ast.Assign) and len(s.targets) == 1
              and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name]
    return bool(values) and all(is_device_test(context, v, True, depth) for v in values)


def _early_exits(context: FileContext, line: int) -> Iterator[ast.expr]:
    """The tests of ``if ...: return`` or ``raise`` before ``line`` in its function: what follows
    runs only where the test is false."""
    function = context.innermost_function(line)
    if function is None:
        return
    for step in function.body:
        if (step.end_lineno or step.lineno) >= line:
            break
        if (isinstance(step, ast.If) and not step.orelse and step.body
                and isinstance(step.body[-1], (ast.Return, ast.Raise))):
            yield step.test


def guarded_by_device_test(context: FileContext, line: int, column: int) -> str | None:
    """The device test that must hold for ``line`` to run, or None when none does."""
    for test, taken in default_path.conditions(context, line, column):
        if is_device_test(context, test, taken):
            return context.source(test)
    for test in _early_exits(context, line):
        if is_device_test(context, test, False):
            return context.source(test)
    return None
