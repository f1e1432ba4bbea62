"""Is the finding in a value that a function stores and never reads?

``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` in a data module's
``setup`` that then places nothing by ``device``, or ``ngpus_per_node = torch.cuda.device_count()``
left behind when an algorithm stopped using it: the CUDA choice is made and dropped, so nothing runs
differently anywhere.  What is read:

- the finding sits in the value of a statement that binds plain names only (``name = ...``,
  ``a, b = ...``) inside a function, not in a class body (a class attribute is read as ``self.name``);
- computing the value cannot fail or act where CUDA is absent: constants, formatting, names,
  attributes, conditionals, no subscript and no division or modulo (``n // torch.cuda.device_count()``
  divides by zero there), and no calls beyond ``_ANSWERING_CALLS``, queries that only answer
  (``torch.cuda.is_available()``, ``torch.cuda.device_count()``, ``torch.device(...)``,
  ``os.environ.get``, ``str``, ``"...".format(...)``).  ``_ = Model.from_pretrained(...,
  device="cuda:0")`` still loads the model, so it keeps its finding;
- no code of the function reads any of the names: its nested functions included, no ``global`` or
  ``nonlocal`` of the name, and the function never looks names up by string (``locals()``,
  ``vars()``, ``eval``, ``exec``, a frame's ``f_locals``).  A read in a comment or a docstring does not count.

A name at the top of a module is not read here: another module, a notebook, a config loader or a
star re-export may read it, which one file cannot show (policy.py's older ``_unread_flag`` reads a
CUDA check stored in a lower-case module name spelled once in its file).
"""
from __future__ import annotations

import ast
import functools
import weakref
from typing import TYPE_CHECKING

from torchport.scan.detectors.syntax import dotted_name, walk_nodes

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# Calls that only answer a question or build a value, and cannot fail without CUDA.
_ANSWERING_CALLS = frozenset({
    "torch.cuda.is_available", "torch.cuda.device_count", "torch.device", "torch.backends.mps.is_available",
    "torch.backends.cudnn.is_available", "os.environ.get", "os.getenv", "str", "int", "bool", "len",
})
# Builtins that reach a function's names by string.
_LOOKUPS_BY_NAME = frozenset({"vars", "locals", "eval", "exec"})
# Nodes that run code, bind a name of their own or leave the expression.
_ACTIVE = (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)
# Operators that fail for some operands (a count of 0 devices).
_FAILING_OPS = (ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _answers_only(value: ast.expr) -> bool:
    for node in ast.walk(value):
        if isinstance(node, _ACTIVE):
            return False
        # `n // torch.cuda.device_count()` divides by zero and `TABLE[torch.cuda.device_count()]`
        # may index past the end where CUDA is absent
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.BinOp) and isinstance(node.op, _FAILING_OPS)):
            return False
        if isinstance(node, ast.Call):
            func = node.func
            formatting = (isinstance(func, ast.Attribute) and func.attr == "format"
                          and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str))
            if not (formatting or dotted_name(func) in _ANSWERING_CALLS):
                return False
    return True


def _bound_names(statement: ast.Assign | ast.AnnAssign) -> list[str] | None:
    """The names a statement binds; None where it also stores elsewhere (``self.x``, ``d[k]``)."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    names: list[str] = []
    for target in targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for element in elements:
            if not isinstance(element, ast.Name):
                return None
            names.append(element.id)
    return names


@functools.lru_cache(maxsize=256)
def _reads(function: _Function) -> frozenset[str] | None:
    """Every name read in ``function``, decorators and nested functions included; None where it
    looks names up by string."""
    found = set()
    for node in walk_nodes(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)  # bound outside the function: read there
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _LOOKUPS_BY_NAME) or (
                isinstance(node, ast.Attribute) and node.attr == "f_locals"):  # `sys._getframe().f_locals`
            return None
    return frozenset(found)


# context -> line -> the assignments whose value spans that line, built once per file
_BY_LINE: weakref.WeakKeyDictionary[FileContext, dict[int, list[ast.Assign | ast.AnnAssign]]] = (
    weakref.WeakKeyDictionary())


def _assignments_at(context: FileContext, line: int) -> list[ast.Assign | ast.AnnAssign]:
    by_line = _BY_LINE.get(context)
    if by_line is None:
        by_line = _BY_LINE[context] = {}
        for statement in context.statements:
            if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                for number in range(statement.value.lineno, (statement.value.end_lineno or statement.lineno) + 1):
                    by_line.setdefault(number, []).append(statement)
    return by_line.get(line, [])


def _candidate(context: FileContext, line: int, column: int) -> tuple[list[str], _Function] | None:
    """The names and the function of the statement whose answering value holds the finding."""
    holding = [s for s in _assignments_at(context, line) if s.value is not None and context.holds(s.value, line, column)]
    if len(holding) != 1:
        return None
    statement = holding[0]
    names = _bound_names(statement)
    if not names or statement.value is None or not _answers_only(statement.value):
        return None
    scopes = context.enclosing(statement.lineno)
    if not scopes or not isinstance(scopes[-1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None  # at the top of the module, or in a class body
    return names, scopes[-1]


def may_be_unread(context: FileContext, line: int, column: int) -> bool:
    """``unread_local``'s conditions that the scanner's tree can answer: it keeps only part of a
    long function, so whether a name is read needs the whole file."""
    return _candidate(context, line, column) is not None


def unread_local(whole: FileContext, line: int, column: int) -> str | None:
    """The local names (``device``; ``a, b``) that hold the finding's value unread, where the
    finding at ``line``/``column`` is in that value; ``whole`` is the whole file's context."""
    found = _candidate(whole, line, column)
    if found is None:
        return None
    names, function = found
    reads = _reads(function)
    if reads is None or set(names) & reads:
        return None
    return ", ".join(names)
