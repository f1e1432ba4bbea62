"""Is a line reached only on a distributed path that already needs CUDA?

Two shapes, read in the finding's own function (the whole file parsed, nothing else walked):

- **After an NCCL process group.**  ``init_process_group("nccl")`` (or ``backend="nccl"``, or a
  name the function bound to ``"nccl"`` before) as a statement of the function's own body: NCCL
  runs only on NVIDIA GPUs, so where CUDA is absent that call fails and nothing after it runs.
  The call is the lock-in and stays reported at its own line; the lines after it in the same
  function are not a second one.
- **A device count that only divides a rank for ``torch.cuda.set_device``.**  ``rank %
  torch.cuda.device_count()`` (or ``n = torch.cuda.device_count()`` read only as the divisor of
  ``%``) whose result is handed to ``torch.cuda.set_device`` in the same function: where CUDA is
  absent the count is 0 and ``%`` raises ZeroDivisionError, so the count does not silently
  change anything; the path is the GPU-per-rank setup that ``set_device`` ties to CUDA and that is
  reported there.
"""
from __future__ import annotations

import ast
from torchport.scan.detectors.syntax import last_name, walk_nodes
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _called(node: ast.AST, name: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    return last_name(node.func) == name


def _is_nccl(node: ast.AST | None, nccl_names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value == "nccl"
    return isinstance(node, ast.Name) and node.id in nccl_names


def _nccl_group(statement: ast.stmt, nccl_names: set[str]) -> bool:
    """``init_process_group("nccl")`` / ``init_process_group(backend="nccl", ...)`` as a statement."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if call is None or not _called(call, "init_process_group"):
        return False
    assert isinstance(call, ast.Call)
    backend = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
    return _is_nccl(backend, nccl_names)


def after_nccl_group(context: FileContext, line: int) -> str | None:
    """The line (as text, for the reason) of an NCCL ``init_process_group`` that the function runs before ``line``."""
    if "nccl" not in context.text:
        return None
    function = context.innermost_function(line)
    if function is None:
        return None
    nccl_names: set[str] = set()
    for statement in function.body:
        if (statement.end_lineno or statement.lineno) >= line:
            return None
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    if statement.value.value == "nccl":
                        nccl_names.add(target.id)
                    else:
                        nccl_names.discard(target.id)
        if _nccl_group(statement, nccl_names):
            return str(statement.lineno)
    return None


def _device_count(node: ast.AST) -> bool:
    return (_called(node, "device_count") and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "cuda")


def _parents(function: _Function) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in walk_nodes(function):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _divisor(node: ast.AST, parents: dict[int, ast.AST]) -> ast.BinOp | None:
    parent = parents.get(id(node))
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mod) and parent.right is node:
        return parent
    return None


def count_divides_for_set_device(context: FileContext, line: int) -> str | None:
    """The line of the ``torch.cuda.set_device`` that receives ``x % torch.cuda.device_count()``
    computed on ``line``, where every use of the count is such a divisor."""
    if "set_device" not in context.text:
        return None
    function = context.innermost_function(line)
    if function is None:
        return None
    parents = _parents(function)
    counts = [n for n in walk_nodes(function) if _device_count(n) and getattr(n, "lineno", None) == line]
    if not counts:
        return None
    moduli: list[ast.BinOp] = []
    for count in counts:
        modulo = _divisor(count, parents)
        if modulo is None:
            stored = parents.get(id(count))
            if not (isinstance(stored, ast.Assign) and len(stored.targets) == 1
                    and isinstance(stored.targets[0], ast.Name)):
                return None
            name = stored.targets[0].id
            reads = [n for n in walk_nodes(function) if isinstance(n, ast.Name) and n.id == name
                     and isinstance(n.ctx, ast.Load)]
            found = [_divisor(read, parents) for read in reads]
            if not reads or any(m is None for m in found):
                return None
            moduli.extend(m for m in found if m is not None)
        else:
            moduli.append(modulo)
    for modulo in moduli:
        set_device_line = _handed_to_set_device(function, modulo, parents)
        if set_device_line is not None:
            return str(set_device_line)
    return None


def _cuda_set_device(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set_device"
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "cuda")


def _set_device_calls(function: _Function) -> list[ast.Call]:
    return [n for n in walk_nodes(function) if isinstance(n, ast.Call) and _cuda_set_device(n)]


def _handed_to_set_device(function: _Function, modulo: ast.BinOp, parents: dict[int, ast.AST]) -> int | None:
    calls = _set_device_calls(function)
    for call in calls:
        if modulo in call.args:
            return call.lineno
    stored = parents.get(id(modulo))
    if isinstance(stored, ast.Assign) and len(stored.targets) == 1 and isinstance(stored.targets[0], ast.Name):
        name = stored.targets[0].id
        for call in calls:
            if call.lineno > modulo.lineno and any(isinstance(a, ast.Name) and a.id == name for a in call.args):
                return call.lineno
    return None
