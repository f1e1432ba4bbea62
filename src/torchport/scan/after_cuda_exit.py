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
from typing import TYPE_CHECKING

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


# Calls that end the process: `sys.exit(1)`, `exit()`, `quit()`, `os._exit(1)`.
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def _ends_the_path(statement: ast.stmt) -> bool:
    return isinstance(statement, (ast.Return, ast.Raise)) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
        and ast.unparse(statement.value.func) in _EXIT_CALLS)


def _exits_without_cuda(statement: ast.stmt) -> bool:
    """``if not torch.cuda.is_available(): return``: a body that ends in a return, a raise or an
    exit (after printing why, or anything else: the path ends there)."""
    return (isinstance(statement, ast.If) and not statement.orelse and _unavailable(statement.test)
            and bool(statement.body) and _ends_the_path(statement.body[-1]))


def _script_block(context: FileContext, line: int) -> ast.If | None:
    """The module-level ``if __name__ == "__main__":`` whose body holds the line."""
    for statement in context.tree.body:
        if (isinstance(statement, ast.If) and statement.body
                and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)
                and ast.unparse(statement.test).replace("'", '"') in ('__name__ == "__main__"', '"__main__" == __name__')):
            return statement
    return None


def _past_cuda_exit(context: FileContext, line: int) -> bool:
    """The line follows, in its function or in the module's script block, an early exit where
    CUDA is absent."""
    function = context.innermost_function(line)
    holder = function if function is not None else _script_block(context, line)
    return holder is not None and any(
        _exits_without_cuda(s) and (s.end_lineno or s.lineno) < line for s in holder.body)


def reached_only_past_cuda_exit(context: FileContext, line: int, depth: int = 0) -> str | None:
    """The private function holding the line, when every use of it in the file is past such an
    exit (directly, or in another such private function)."""
    function = context.innermost_function(line)
    if function is None or depth > _DEPTH or not function.name.startswith("_") or function.name.startswith("__"):
        return None
    low, high = min([function.lineno] + [d.lineno for d in function.decorator_list]), function.end_lineno or 0
    uses = [n for n in context.loads().get(function.name, ()) if not low <= n.lineno <= high]
    if uses and all(_past_cuda_exit(context, n.lineno) or reached_only_past_cuda_exit(context, n.lineno, depth + 1)
                    for n in uses):
        return function.name
    return None


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
