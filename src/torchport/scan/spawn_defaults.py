"""Is a parameter default of a worker that ``torch.multiprocessing.spawn`` starts ever used?
``mp.spawn(_worker, args=(a, b, device_type), nprocs=n)`` calls ``_worker(rank, a, b,
device_type)``: the process index first, then every item of ``args``.  A ``"cuda"`` default of
a parameter that those items fill is never used.  Only a private (underscored) function counts,
and only when every use of its name in the file is such a ``spawn`` or ``start_processes`` call:
another use (a direct call, an export) could run the default.

Read on the whole file's AST; nothing else of the package is walked.
"""
from __future__ import annotations

import ast
from torchport.scan.detectors.syntax import last_name, walk_nodes
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# torch.multiprocessing's launchers that call ``fn(process_index, *args)``.
_LAUNCHERS = frozenset({"spawn", "start_processes"})


def _defaulted_parameter(context: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef, line: int,
                         column: int) -> str | None:
    """The positional parameter whose default spans (line, column) (1-based, in characters)."""
    positional = [*function.args.posonlyargs, *function.args.args]
    for argument, default in zip(positional[len(positional) - len(function.args.defaults):], function.args.defaults):
        if context.holds(default, line, column):
            return argument.arg
    return None


def _filled_by_launcher(call: ast.Call, function: ast.Name, position: int) -> bool:
    """``spawn(function, args=(...))`` whose tuple reaches the parameter at ``position`` (0 is
    the process index the launcher passes itself)."""
    func = call.func
    name = last_name(func)
    if name not in _LAUNCHERS:
        return False
    handed = call.args[:1] == [function] or any(k.arg == "fn" and k.value is function for k in call.keywords)
    if not handed:
        return False
    items = next((k.value for k in call.keywords if k.arg == "args"), call.args[1] if len(call.args) > 1 else None)
    return (isinstance(items, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in items.elts)
            and 1 <= position <= len(items.elts))


def filled_by_spawn(context: FileContext, line: int, column: int) -> str | None:
    """The worker's name, where the finding is a default of its parameter that every launch fills."""
    function = context.innermost_function(line)
    if function is None or not function.name.startswith("_") or line >= function.body[0].lineno:
        return None
    if any(isinstance(s, ast.ClassDef) for s in context.enclosing(line)):
        return None  # a method is launched bound, with another parameter list
    parameter = _defaulted_parameter(context, function, line, column)
    if parameter is None:
        return None
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    position = positional.index(parameter)
    uses = [n for n in walk_nodes(context.tree) if isinstance(n, ast.Name) and n.id == function.name]
    if not uses:
        return None
    launches = [n for n in walk_nodes(context.tree) if isinstance(n, ast.Call)]
    for use in uses:
        if not any(_filled_by_launcher(call, use, position) for call in launches):
            return None
    return function.name
