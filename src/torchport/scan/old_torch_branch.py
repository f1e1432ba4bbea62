"""The branch of a torch-version test that only an old torch takes.

``if version.parse(torch.__version__) >= version.parse("2.4"): torch.amp.GradScaler(device=...)
else: torch.cuda.amp.GradScaler(...)``: the else serves torch releases older than the one named.
A user installing the package today gets a torch that takes the other branch, so a CUDA-only
call in the old branch is not on their path, provided the other branch is not itself tied to
CUDA (then the finding stands: the lock-in is on both paths).
"""
from __future__ import annotations

import ast
from torchport.scan.detectors.syntax import walk_nodes
import re

# Text a file must hold before its tree is searched: the version string, or an API probe.
VERSION_TEST_HINT = re.compile(r"__version__|hasattr\(\s*torch\b")

_CUDA = re.compile(r"cuda", re.IGNORECASE)


def _module_assignments(tree: ast.Module) -> dict[str, ast.expr]:
    """``_TORCH_GE_2_4 = version.parse(torch.__version__) >= ...`` at module level (also inside a
    module-level try or if, where such flags are often computed)."""
    found: dict[str, ast.expr] = {}
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        statement = stack.pop()
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            found.setdefault(statement.targets[0].id, statement.value)
        elif isinstance(statement, (ast.Try, ast.If)):
            stack.extend(statement.body)
    return found


def _names_torch_version(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "__version__" and isinstance(n.value, ast.Name)
               and n.value.id == "torch" for n in walk_nodes(node))


def true_on_newer_torch(test: ast.expr, flags: dict[str, ast.expr], depth: int = 0) -> bool | None:
    """True when ``test`` holds on torch releases from some version on, False when it holds only
    before it, None when it is no torch-version test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        answer = true_on_newer_torch(test.operand, flags, depth)
        return None if answer is None else not answer
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        operator = test.ops[0]
        if not isinstance(operator, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            return None
        left, right = _names_torch_version(test.left), _names_torch_version(test.comparators[0])
        if left == right:
            return None
        newer_when_greater = isinstance(operator, (ast.Gt, ast.GtE))
        return newer_when_greater if left else not newer_when_greater
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr" \
            and len(test.args) == 2 and isinstance(test.args[1], ast.Constant) and isinstance(test.args[1].value, str):
        owner = test.args[0]
        while isinstance(owner, ast.Attribute):
            owner = owner.value
        # `hasattr(torch.amp, "GradScaler")`: an API that newer releases add
        return True if isinstance(owner, ast.Name) and owner.id == "torch" else None
    if isinstance(test, ast.Name) and depth == 0 and test.id in flags:
        return true_on_newer_torch(flags[test.id], flags, depth + 1)
    return None


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def statements_holding(tree: ast.Module, line: int) -> list[ast.AST]:
    """The statements (and except handlers, match cases) whose span holds ``line``, outermost
    first, found by descending through bodies only: no expression is walked."""
    found: list[ast.AST] = []
    children: list = list(tree.body)
    while children:
        holder = next((c for c in children if getattr(c, "lineno", 0) <= line <= (getattr(c, "end_lineno", 0) or 0)
                       or isinstance(c, ast.match_case) and c.body and c.body[0].lineno <= line
                       <= (c.body[-1].end_lineno or 0)), None)
        if holder is None:
            break
        found.append(holder)
        children = [child for field in _BODIES for child in getattr(holder, field, None) or ()]
    return found


def _span(statements: list[ast.stmt]) -> tuple[int, int]:
    return statements[0].lineno, statements[-1].end_lineno or statements[-1].lineno


def _mentions_cuda(lines: list[str], statements: list[ast.stmt]) -> bool:
    first, last = _span(statements)
    return bool(_CUDA.search("".join(lines[first - 1:last])))


def in_either_branch(tree: ast.Module, line: int) -> bool:
    """Whether an ``if`` with an ``else`` holds ``line``.  The scanner's reduced parse keeps every
    statement around a finding's line, so this is asked of it before the whole file is parsed."""
    return any(isinstance(node, ast.If) and node.orelse and (
        _span(node.body)[0] <= line <= _span(node.body)[1] or _span(node.orelse)[0] <= line <= _span(node.orelse)[1])
        for node in statements_holding(tree, line))


def only_on_old_torch(tree: ast.Module, lines: list[str], line: int) -> str | None:
    """The version test (its source line) when ``line`` lies in the branch only an older torch
    takes and the other branch, the one a current torch takes, names no CUDA."""
    flags: dict[str, ast.expr] | None = None
    for node in statements_holding(tree, line):
        if not isinstance(node, ast.If) or not node.orelse:
            continue
        body_first, body_last = _span(node.body)
        else_first, else_last = _span(node.orelse)
        in_body, in_else = body_first <= line <= body_last, else_first <= line <= else_last
        if not (in_body or in_else):
            continue
        if flags is None:
            flags = _module_assignments(tree)
        newer = true_on_newer_torch(node.test, flags)
        if newer is None or not (in_else if newer else in_body):
            continue  # no version test, or the line is on the branch a current torch takes
        other = node.body if in_else else node.orelse
        if _mentions_cuda(lines, other):
            continue
        return lines[node.lineno - 1].strip().rstrip(":")
    return None
