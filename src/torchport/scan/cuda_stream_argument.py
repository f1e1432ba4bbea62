"""Is a CUDA stream or event call reached only with a CUDA stream or event in hand?

``def _hand_over(comm: torch.cuda.Stream | None, ...)`` that starts ``if comm is None: return`` (or
runs its CUDA calls under ``if comm is not None:``): past that test ``comm`` is a CUDA stream, and
one cannot be made where CUDA is absent (``torch.cuda.Stream()`` raises there; where it is made is
reported at its own line).  So the calls after the test run only where CUDA is.  Read on the AST of
the whole file; only a parameter whose annotation names a CUDA stream or event and ``None`` counts,
and only when the function never binds it again.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from torchport.scan.detectors.syntax import walk_nodes

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# `comm: torch.cuda.Stream | None`, `event: Optional[torch.cuda.Event]`: read before the whole file is parsed.
ANNOTATION_HINT = re.compile(r":\s*(Optional\[\s*)?(torch\.)?cuda\.(Stream|Event|ExternalStream)\b")
_CUDA_HANDLE = re.compile(r"\bcuda\.(Stream|Event|ExternalStream)\b")


def _optional_cuda_handles(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    arguments = function.args.posonlyargs + function.args.args + function.args.kwonlyargs
    found = set()
    for argument in arguments:
        if argument.annotation is None:
            continue
        text = ast.unparse(argument.annotation)
        if _CUDA_HANDLE.search(text) and ("None" in text or "Optional" in text):
            found.add(argument.arg)
    rebound = {n.id for n in walk_nodes(function) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    return found - rebound


def _is_none_test(test: ast.expr, names: set[str], negated: bool) -> str | None:
    """``name is None`` (``negated``: ``name is not None`` or plain ``name``): the name, else None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id in names and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        return test.left.id if isinstance(test.ops[0], ast.IsNot if negated else ast.Is) else None
    if negated and isinstance(test, ast.Name) and test.id in names:
        return test.id
    return None


def _exits(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise))


def _contains(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)  # type: ignore[attr-defined]


def reached_with_cuda_handle(context: FileContext, line: int) -> str | None:
    """The parameter and the line of its ``None`` test, when ``line`` runs only once the
    parameter is known to hold a CUDA stream or event; else None."""
    function = context.innermost_function(line)
    if function is None:
        return None
    names = _optional_cuda_handles(function)
    if not names:
        return None
    block: list[ast.stmt] = function.body
    while True:
        statement = next((s for s in block if _contains(s, line)), None)
        if statement is None:
            return None
        for earlier in block[:block.index(statement)]:
            if isinstance(earlier, ast.If) and not earlier.orelse and _exits(earlier.body):
                name = _is_none_test(earlier.test, names, negated=False)
                if name is not None:
                    return f"`{name}` (`if {name} is None:` exits, line {earlier.lineno})"
        if isinstance(statement, ast.If) and not _contains(statement.test, line):
            name = _is_none_test(statement.test, names, negated=True)
            if name is not None and any(_contains(s, line) for s in statement.body):
                return f"`{name}` (`{ast.unparse(statement.test)}`, line {statement.lineno})"
        inner = [b for b in (getattr(statement, "body", None), getattr(statement, "orelse", None),
                             getattr(statement, "finalbody", None)) if isinstance(b, list)]
        inner += [h.body for h in getattr(statement, "handlers", [])]
        block = next((b for b in inner if any(_contains(s, line) for s in b)), [])
        if not block or isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
