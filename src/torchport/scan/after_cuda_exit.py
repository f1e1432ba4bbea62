"""Is code reached only past an early exit where CUDA is absent?

- A private function: a caller that starts ``if not torch.cuda.is_available(): return`` (or
  ``raise``, ``sys.exit(...)``) and then calls ``self._measure_peak(...)``: where CUDA is absent
  the caller has returned before the call, so the private function's CUDA calls are not reached.
  The caller may also be the script block ``if __name__ == "__main__":`` that exits first (a
  kernel package's benchmark: ``raise SystemExit("CUDA device required")``, then ``_main()``).
  Uses of the function in other files are not seen, so only a private (underscored) one counts.
- A branch for a request: ``if self.device_type == "gpu": device = torch.device("cuda")`` after
  the same function refused that request where CUDA is absent (``if not
  torch.cuda.is_available(): if self.device_type == "gpu": raise ValueError(...)``).

Read on the AST of the whole file.
"""
from __future__ import annotations

import ast
import os
import re
from typing import TYPE_CHECKING

from torchport.scan.detectors.syntax import wraps_in_place

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext


# How many private callers deep one use is followed.
_DEPTH = 3


def _availability_call(node: ast.expr) -> bool:
    """``torch.cuda.is_available()``."""
    return (isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute)
            and node.func.attr == "is_available" and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "cuda")


def _unavailable(test: ast.expr) -> bool:
    """``not torch.cuda.is_available()``, alone or as one operand of an ``or``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_unavailable(value) for value in test.values)
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _availability_call(test.operand)


# Calls that end the process: `sys.exit(1)`, `exit()`, `quit()`, `os._exit(1)`, each by the name
# its module is imported under.
_EXIT_CALLS = {"sys.exit": "sys", "exit": "exit", "quit": "quit", "os._exit": "os"}


def _ends_the_path(statement: ast.stmt, rebound: set[str]) -> bool:
    if isinstance(statement, (ast.Return, ast.Raise)):
        return True
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    name = ast.unparse(statement.value.func)
    return name in _EXIT_CALLS and _EXIT_CALLS[name] not in rebound


def _rebound(tree: ast.Module) -> set[str]:
    """Of `sys`, `os`, `exit` and `quit`, the names the file binds to something else than the
    module or builtin (`def exit(msg): ...`, `sys = SimpleNamespace(...)`, `from x import exit`)."""
    names = set(_EXIT_CALLS.values())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in names:
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            found.add(node.name)
        elif isinstance(node, ast.alias) and (node.asname or node.name) in names and node.name not in ("sys", "os"):
            found.add(node.asname or node.name)
        elif isinstance(node, ast.arg) and node.arg in names:
            found.add(node.arg)
    return found


def _exits_without_cuda(statement: ast.stmt, rebound: set[str]) -> bool:
    """``if not torch.cuda.is_available(): return``: a body that ends in a return, a raise or an
    exit (after printing why, or anything else: the path ends there)."""
    return (isinstance(statement, ast.If) and not statement.orelse and _unavailable(statement.test)
            and bool(statement.body) and _ends_the_path(statement.body[-1], rebound))


def _script_block(context: FileContext, line: int) -> ast.If | None:
    """The module-level ``if __name__ == "__main__":`` whose body holds the line."""
    for statement in context.tree.body:
        if (isinstance(statement, ast.If) and statement.body
                and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)
                and ast.unparse(statement.test).replace("'", '"') in ('__name__ == "__main__"', '"__main__" == __name__')):
            return statement
    return None


def _past_cuda_exit(context: FileContext, line: int, rebound: set[str]) -> bool:
    """The line follows, in its function or in the module's script block, an early exit where
    CUDA is absent."""
    function = context.innermost_function(line)
    holder = function if function is not None else _script_block(context, line)
    return holder is not None and any(
        (s.end_lineno or s.lineno) < line and _exits_without_cuda(s, rebound) for s in holder.body)


def _handed_on(context: FileContext, name: str) -> bool:
    """The file may call the function where its uses do not show: it decorates it (a decorator may
    register it: ``@atexit.register``), hands it to a decorator (``@with_setup(_warmup)``), lists it
    in ``__all__`` or looks names up by string (``globals()[...]``)."""
    for scope in context.scopes:
        for decorator in scope.decorator_list:
            if scope.name == name and not wraps_in_place(decorator):
                return True
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(decorator)):
                return True
    return (f'"{name}"' in context.text or f"'{name}'" in context.text
            or "globals()" in context.text or "locals()" in context.text)


def _imported_elsewhere(path: str | None, name: str) -> bool:
    """Another module of the file's package, or of its folder when it is in none, imports it: a file
    that names both the module and the function (``from .fused_langevin import _main``).  Unknown
    (True) without a path."""
    if path is None:
        return True
    stem = os.path.splitext(os.path.basename(path))[0]
    word, module = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)"), re.compile(rf"(?<!\w){re.escape(stem)}(?!\w)")
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    root, package = folder, os.path.isfile(os.path.join(folder, "__init__.py"))
    while package and os.path.isfile(os.path.join(os.path.dirname(root), "__init__.py")) and (
            os.path.dirname(root) != root):
        root = os.path.dirname(root)
    files = _python_files(root, package)
    return files is None or any(other != path and word.search(text) and module.search(text) for other, text in files)


def _python_files(root: str, package: bool) -> tuple[tuple[str, str], ...] | None:
    """Every Python file under a package's root (of the folder alone when it is in no package) and
    its text; None when one cannot be read.  Read afresh each time: the shape that asks is rare."""
    found: list[tuple[str, str]] = []
    for directory, subfolders, files in os.walk(root):
        if not package:
            subfolders.clear()
        for file in files:
            if not file.endswith(".py"):
                continue
            other = os.path.join(directory, file)
            try:
                with open(other, encoding="utf-8", errors="replace") as handle:
                    found.append((other, handle.read()))
            except OSError:
                return None
    return tuple(found)


def reached_only_past_cuda_exit(context: FileContext, line: int, depth: int = 0, path: str | None = None) -> str | None:
    """The private function holding the line, when every use of it in the file is past such an
    exit (directly, or in another such private function).  A use in the script block also needs
    ``path``: no other module of its package may import the function."""
    function = context.innermost_function(line)
    if function is None or depth > _DEPTH or not function.name.startswith("_") or function.name.startswith("__"):
        return None
    if _handed_on(context, function.name):
        return None
    low, high = min([function.lineno] + [d.lineno for d in function.decorator_list]), function.end_lineno or 0
    uses = [n for n in context.loads().get(function.name, ()) if not low <= n.lineno <= high]
    rebound = getattr(context, "_exit_names_rebound", None)
    if rebound is None:
        rebound = _rebound(context.tree)
        context._exit_names_rebound = rebound  # type: ignore[attr-defined]
    if not uses or not all(_past_cuda_exit(context, n.lineno, rebound)
                           or reached_only_past_cuda_exit(context, n.lineno, depth + 1, path) for n in uses):
        return None
    if any(context.innermost_function(n.lineno) is None for n in uses) and _imported_elsewhere(path, function.name):
        return None  # the script block's exit does not hold for another module that imports it
    return function.name


def _same_test(one: ast.expr, other: ast.expr) -> bool:
    return ast.dump(one, annotate_fields=False) == ast.dump(other, annotate_fields=False)


def _branches_without_cuda(statement: ast.stmt) -> list[ast.stmt]:
    """The statements ``statement`` runs where CUDA is absent when it is ``if torch.cuda.is_available():``
    (its else) or ``if not torch.cuda.is_available():`` (its body)."""
    if not isinstance(statement, ast.If):
        return []
    if _availability_call(statement.test):
        return statement.orelse
    if isinstance(statement.test, ast.UnaryOp) and isinstance(statement.test.op, ast.Not) and _availability_call(
            statement.test.operand):
        return statement.body
    return []


def refused_before(context: FileContext, line: int) -> str | None:
    """The line is in the body of ``if REQUEST:`` in a function that earlier, where CUDA is absent, raises under the same ``if REQUEST:``: where CUDA is absent the
    request never reaches the line.  The line of that raise."""
    function = context.innermost_function(line)
    if function is None:
        return None
    for index, statement in enumerate(function.body):
        if not (isinstance(statement, ast.If) and statement.body
                and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)):
            continue
        read = {ast.unparse(n) for n in ast.walk(statement.test) if isinstance(n, (ast.Name, ast.Attribute))}
        for position, earlier in enumerate(function.body[:index]):
            for refusal in _branches_without_cuda(earlier):
                if (isinstance(refusal, ast.If) and not refusal.orelse and _same_test(refusal.test, statement.test)
                        and all(isinstance(s, ast.Raise) for s in refusal.body)
                        and not _stores_any(function.body[position + 1:index], read)):
                    return f"line {refusal.body[0].lineno}"
        return None
    return None


def _stores_any(statements: list[ast.stmt], names: set[str]) -> bool:
    """Whether the statements bind any of ``names`` again (``self.accelerator = "gpu"`` between
    the refusal and the request), or call anything on one of them (``options.update(...)``)."""
    for node in (n for s in statements for n in ast.walk(s)):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)) and (
                ast.unparse(node) in names):
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and ast.unparse(node.func.value) in names):
            return True
    return False
