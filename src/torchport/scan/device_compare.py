"""Is a ``"cuda"`` device on a line only compared with?  ``if device == torch.device("cuda"):``,
``if attr.device != torch.device("cuda"):``: building ``torch.device("cuda")`` needs no GPU
(it is a plain value; PyTorch checks the device only when memory is placed on it), and a
comparison answers False where CUDA is absent.  The line itself neither fails nor chooses a
device; what the comparison guards is its own line and is reported there.

Read on the statements that span the line (the scanner's ``FileContext``); nothing else of the
file is walked.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchport.scan.detectors.syntax import last_name

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# Comparisons that only read a value: ``==``, ``!=``, ``is``, ``in`` and their negations.
_READING = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)


def _cuda_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower().startswith("cuda")


def _device_call(node: ast.Call) -> bool:
    """``torch.device(...)``, ``device(...)``."""
    return last_name(node.func) == "device"


def _parents(context: FileContext, line: int) -> tuple[dict[int, ast.AST], list[ast.Constant]]:
    """The parent of every node in the statements spanning ``line``, and the ``"cuda..."``
    constants on the line itself."""
    parents: dict[int, ast.AST] = {}
    constants: list[ast.Constant] = []
    for statement in context.statements:
        if not statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            continue
        # Compound statements' bodies are statements of their own lines: only expressions are walked.
        stack: list[ast.AST] = [statement]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.stmt, ast.excepthandler)):
                    continue
                parents.setdefault(id(child), node)
                stack.append(child)
                if _cuda_constant(child) and getattr(child, "lineno", None) == line:
                    constants.append(child)  # type: ignore[arg-type]
    return parents, constants


def only_compared(context: FileContext, line: int) -> bool:
    """Every ``"cuda"`` device value on the line is an operand of a comparison, written as the
    string or wrapped in ``torch.device(...)``; at least one is wrapped (a bare string compared
    is a device check, which rule TP003 reports and judges on its own)."""
    if "cuda" not in (context.lines[line - 1].lower() if line <= len(context.lines) else ""):
        return False
    parents, constants = _parents(context, line)
    wrapped = False
    for constant in constants:
        parent = parents.get(id(constant))
        if isinstance(parent, ast.Call) and _device_call(parent) and parent.args[:1] == [constant]:
            parent = parents.get(id(parent))
            wrapped = True
        if not (isinstance(parent, ast.Compare) and all(isinstance(op, _READING) for op in parent.ops)):
            return False
    return wrapped
