"""Code past what torch no longer has.

A module that imports, at its top level, a name current torch lacks
(``from torch.autograd.gradcheck import zero_gradients``, ``from torch._six import inf``) fails to
import, so nothing below that import runs, on CUDA or anywhere else.  A statement that calls a
removed function (``torch.rfft(x, 2)``, ``torch.symeig(a)``) raises, so the statements after it in
the same block never run.  A CUDA call there is not what stops a user on another accelerator: the
removed API stops everyone first, on the current torch that every other accelerator needs.

The table holds only what is absent (or raises when called) on torch 2.13, checked on its CPU
build; an old torch that still had the name is not a porting target.
"""
from __future__ import annotations

import ast
import re

# module -> names it no longer has (absent from torch 2.13)
REMOVED_NAMES: dict[str, frozenset[str]] = {
    "torch": frozenset({"_six", "rfft", "irfft", "ifft", "gels", "gesv", "potrf", "potrs", "potri", "pstrf",
                        "trtrs", "btrifact", "btrisolve", "is_deterministic", "set_deterministic"}),
    "torch.autograd.gradcheck": frozenset({"zero_gradients"}),
    "torch._utils": frozenset({"_accumulate"}),
    "torch.utils.data.dataset": frozenset({"_accumulate"}),
    "torch.utils.data.dataloader": frozenset({"numpy_type_map", "DataLoaderIter", "_DataLoaderIter",
                                              "string_classes", "int_classes", "_use_shared_memory"}),
    "torch.hub": frozenset({"_download_url_to_file"}),
    "torch.utils.model_zoo": frozenset({"_download_url_to_file"}),
}
# Modules torch 2.13 does not have.
REMOVED_MODULES = frozenset({"torch._six", "torch.utils.ffi", "torch.legacy", "torch.nn._functions"})
# ``torch.NAME(...)`` that raises on torch 2.13: the names above that were functions, the linear
# algebra that raises "deprecated since version 1.9 and is now removed", and ``torch.fft(x, n)``,
# a call of what is now a module.
REMOVED_CALLS = (REMOVED_NAMES["torch"] - {"_six"}) | frozenset(
    {"symeig", "eig", "lstsq", "solve", "matrix_rank", "fft"})

# Text a file must hold before its tree is read: an import of a removed name or module, or a
# call ``torch.NAME(`` of a removed function.
_NAMES = "|".join(sorted({name for names in REMOVED_NAMES.values() for name in names}))
_MODULES = "|".join(re.escape(module[len("torch."):]) for module in sorted(REMOVED_MODULES))
HINT = re.compile(rf"\bfrom\s+torch[\w.]*\s+import\s+\(?[\w\s,]*\b(?:{_NAMES})\b"
                  rf"|\b(?:from|import)\s+torch\.(?:{_MODULES})\b"
                  rf"|\btorch\.(?:{'|'.join(sorted(REMOVED_CALLS))})\s*\(")

_BODIES = ("body", "orelse", "finalbody")


def _removed_import(statement: ast.stmt) -> str | None:
    """What a top-level import loads that torch 2.13 lacks, spelled as the user wrote it."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            if any(alias.name == m or alias.name.startswith(m + ".") for m in REMOVED_MODULES):
                return f"import {alias.name}"
    elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
        module = statement.module
        if any(module == m or module.startswith(m + ".") for m in REMOVED_MODULES):
            return f"from {module} import {', '.join(alias.name for alias in statement.names)}"
        for alias in statement.names:
            if alias.name in REMOVED_NAMES.get(module, ()) or f"{module}.{alias.name}" in REMOVED_MODULES:
                return f"from {module} import {alias.name}"
    return None


def _torch_names(tree: ast.Module) -> set[str]:
    """The names the file binds to torch itself (``import torch``, ``import torch as th``), in any
    scope (scripts import it inside ``if __name__ == "__main__":``)."""
    names = set()
    for statement in ast.walk(tree):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == "torch" or (alias.name.startswith("torch.") and not alias.asname):
                    names.add(alias.asname or "torch")
    return names


def _replaced(tree: ast.Module, torch_names: set[str]) -> set[str]:
    """``torch.rfft = ...`` or ``setattr(torch, "rfft", ...)``: a name the file puts back."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in torch_names:
            found.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            found.add(node.args[1].value)
    return found


def _removed_call(statement: ast.stmt, torch_names: set[str], replaced: set[str]) -> str | None:
    """``torch.NAME(...)`` of a removed function, evaluated whenever the simple statement runs
    (not inside a lambda, whose body runs later if ever)."""
    if not isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
        return None
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in torch_names \
                and node.func.attr in REMOVED_CALLS and node.func.attr not in replaced:
            return f"{node.func.value.id}.{node.func.attr}(...)"
        stack.extend(ast.iter_child_nodes(node))
    return None


def past_removed_api(tree: ast.Module, line: int) -> str | None:
    """What stops the code before ``line`` runs, when a top-level import of a removed torch name
    comes before it, or a call of a removed torch function comes before it in its own block."""
    for statement in tree.body:
        if (statement.end_lineno or statement.lineno) >= line:
            break
        found = _removed_import(statement)
        if found:
            return (f"`{found}` (line {statement.lineno}), which current torch no longer has (absent from torch "
                    "2.13): the module cannot be imported")
    torch_names = _torch_names(tree)
    if not torch_names:
        return None
    replaced = _replaced(tree, torch_names)
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for field in _BODIES:
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not (
                    body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)):
                continue  # another branch: what it calls is not on the line's path
            for statement in body:
                if (statement.end_lineno or statement.lineno) < line:
                    found = _removed_call(statement, torch_names, replaced)
                    if found:
                        return (f"`{found}` (line {statement.lineno}), a function current torch no longer has "
                                "(it raises on torch 2.13): the block stops there")
                else:
                    if statement.lineno <= line:
                        stack.append(statement)  # it holds the line: read its own blocks
                    break
        stack.extend(getattr(node, "handlers", ()))
        stack.extend(getattr(node, "cases", ()))
    return None
