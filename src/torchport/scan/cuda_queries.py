"""CUDA queries that neither raise nor choose a device where CUDA is absent.

Two shapes:

* an availability helper of an optional CUDA kernel library, ``def is_oeq_available(): return
  _OEQ_AVAILABLE and torch.cuda.is_available()``, where the flag is set by ``try: import ...``
  / ``except ImportError``: it says whether the library can be used, and where CUDA is absent it
  answers no, so callers skip the library (or raise their own ImportError);
* a query that answers False or 0 without CUDA (measured with the CPU build of torch 2.13:
  ``is_initialized``, ``memory_allocated``, ``max_memory_allocated``,
  ``len(torch.cuda.default_generators)``, ``torch.backends.cuda.is_built``), read where no "cuda"
  device string is chosen: nothing raises, so it is no error;
* a ``torch.backends.cuda`` setting that raises nothing on the CPU build with the value given
  (``preferred_blas_library("cublas")``; ``"cublaslt"`` raises there): it only picks a CUDA
  library, which other devices ignore.
"""
from __future__ import annotations

import ast
import re

from torchport.scan.old_torch_branch import statements_holding
from torchport.scan.detectors.names import reference_rule
from torchport.scan.detectors.syntax import walk_nodes
from torchport.scan.rules import OTHER_TORCH_CUDA_API

# torch.cuda queries that return False or 0 on a CPU-only torch instead of raising (CPU torch
# 2.13: `synchronize`, `current_device`, `get_device_name`, `ipc_collect` raise instead).
QUIET_QUERIES = frozenset({"torch.cuda.is_initialized", "torch.cuda.memory_allocated",
                           "torch.cuda.max_memory_allocated", "torch.backends.cuda.is_built"})

# torch.backends.cuda settings -> the values with which they raise nothing on the CPU build of torch
# 2.13 (spelled so: "cuBLAS" raises); called with no value they only answer.
QUIET_SETTINGS = {"torch.backends.cuda.preferred_blas_library": frozenset({"cublas", "hipblas", "ck", "default"}),
                  "torch.backends.cuda.preferred_linalg_library": frozenset({"default"}),
                  "torch.backends.cuda.preferred_rocm_fa_library": frozenset({"default", "aotriton", "ck"})}

# torch.cuda sequences whose length is 0 on a CPU-only torch: reading it raises nothing.
QUIET_LENGTHS = frozenset({"torch.cuda.default_generators"})

_DEVICE_STRING = re.compile(r"""['"]cuda(:\d+)?['"]""")
_CUDA_NAME = re.compile(r"\btorch\.(?:backends\.)?cuda(?:\.\w+)+")


def _import_flag(tree: ast.Module, name: str) -> int | None:
    """The line of ``try: import lib; NAME = True`` / ``except ImportError: NAME = False`` at
    module level: ``name`` says whether an optional library imported."""
    def assigns(statements: list[ast.stmt], value: bool) -> bool:
        return any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)
                   and isinstance(s.value, ast.Constant) and s.value.value is value for s in statements)
    for statement in tree.body:
        if not isinstance(statement, ast.Try):
            continue
        imports = any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in statement.body)
        caught = any(h.type is not None and any(
            getattr(n, "id", "") in ("ImportError", "ModuleNotFoundError")
            for n in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])) and assigns(h.body, False)
            for h in statement.handlers)
        if imports and caught and assigns(statement.body, True):
            return statement.lineno
    return None


def _is_cuda_available(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute)
            and node.func.attr == "is_available" and ast.unparse(node.func.value) == "torch.cuda")


def _decides_a_device(tree: ast.Module, lines: list[str], name: str) -> bool:
    """A call of ``name`` in this file on a line that also names a "cuda" device string."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
               and _DEVICE_STRING.search(lines[n.lineno - 1]) for n in walk_nodes(tree))


def kernel_library_helper(tree: ast.Module, lines: list[str], line: int) -> str | None:
    """``flag (line N)`` when ``line`` is the only statement of a function returning import-
    availability flags ``and torch.cuda.is_available()``, and no call in this file turns the
    answer into a device string."""
    found = availability_return(tree, lines, line)
    if found is None:
        return None
    function, flags = found
    places = [(flag, _import_flag(tree, flag)) for flag in flags]
    if any(where is None for _, where in places) or _decides_a_device(tree, lines, function.name):
        return None
    return ", ".join(f"`{flag}` (line {where})" for flag, where in places)


def availability_return(tree: ast.Module, lines: list[str], line: int) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef,
                                                                                   list[str]] | None:
    """The function and its flags when ``line`` is its only statement, ``return FLAG and
    torch.cuda.is_available()``.  A reduced parse that keeps the line answers None only where the
    whole file does too: it keeps the statements around the line and drops only others."""
    if "is_available" not in lines[line - 1]:
        return None
    holding = statements_holding(tree, line)
    for function in holding[-2:-1]:  # the statement at the line is the return; the one around it, the function
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        body = function.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].lineno > line \
                or line > (body[0].end_lineno or 0):
            return None
        value = body[0].value
        if not (isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And)):
            return None
        checks = [v for v in value.values if _is_cuda_available(v)]
        flags = [v for v in value.values if not _is_cuda_available(v)]
        if len(checks) != 1 or not flags or not all(isinstance(f, ast.Name) for f in flags):
            return None
        return function, [f.id for f in flags if isinstance(f, ast.Name)]
    return None


def quiet_query(tree: ast.Module, lines: list[str], line: int) -> str | None:
    """The query, as written, when ``line`` calls one of QUIET_QUERIES or takes the ``len()`` of
    one of QUIET_LENGTHS and neither the line nor, for an ``if``, its body names a "cuda" device
    string."""
    text = lines[line - 1]
    if not any(query.rsplit(".", 1)[1] in text for query in QUIET_QUERIES | QUIET_LENGTHS) \
            or _DEVICE_STRING.search(text):
        return None
    holding = statements_holding(tree, line)
    if not holding:
        return None
    statement = holding[-1]
    header = [statement.test] if isinstance(statement, (ast.If, ast.While)) else [statement]
    calls = [n for h in header for n in walk_nodes(h) if isinstance(n, ast.Call) and n.lineno == line]
    found = sorted({f"{ast.unparse(n.func)}()" for n in calls if ast.unparse(n.func) in QUIET_QUERIES}
                   | {f"len({ast.unparse(n.args[0])})" for n in calls if isinstance(n.func, ast.Name)
                      and n.func.id == "len" and len(n.args) == 1 and ast.unparse(n.args[0]) in QUIET_LENGTHS})
    quiet = [n for n in walk_nodes(header[0]) if isinstance(n, ast.Call) and (
        ast.unparse(n.func) in QUIET_QUERIES or isinstance(n.func, ast.Name) and n.func.id == "len"
        and len(n.args) == 1 and ast.unparse(n.args[0]) in QUIET_LENGTHS)]
    if not found or not _no_other_cuda_name(lines, header[0], [ast.unparse(n.args[0] if isinstance(n.func, ast.Name)
                                                                            else n.func) for n in quiet]):
        return None
    if isinstance(statement, ast.If):
        last = statement.body[-1].end_lineno or statement.body[-1].lineno
        if _DEVICE_STRING.search("".join(lines[statement.body[0].lineno - 1:last])):
            return None
    return found[0]


def quiet_setting(tree: ast.Module, lines: list[str], line: int) -> str | None:
    """The setting, as written, when every call of one of QUIET_SETTINGS at ``line`` passes no
    value or a string that raises nothing without CUDA."""
    holding = statements_holding(tree, line)
    if not holding:
        return None
    calls = [n for n in walk_nodes(holding[-1]) if isinstance(n, ast.Call) and n.lineno == line
             and ast.unparse(n.func) in QUIET_SETTINGS]
    if not calls:
        return None
    for call in calls:
        values = [*call.args, *(k.value for k in call.keywords)]
        if len(values) > 1:
            return None
        if values and not (isinstance(values[0], ast.Constant) and isinstance(values[0].value, str)
                           and values[0].value in QUIET_SETTINGS[ast.unparse(call.func)]):
            return None
    header = holding[-1].test if isinstance(holding[-1], (ast.If, ast.While)) else holding[-1]
    quiet = [n for n in walk_nodes(header) if isinstance(n, ast.Call) and ast.unparse(n.func) in QUIET_SETTINGS]
    if not _no_other_cuda_name(lines, header, [ast.unparse(n.func) for n in quiet]):
        return None
    return ast.unparse(calls[0])


def _no_other_cuda_name(lines: list[str], header: ast.AST, quiet: list[str]) -> bool:
    """The lines of the statement (or of an ``if``'s test) name no more torch.cuda or
    torch.backends.cuda APIs of TP110 than its ``quiet`` names: another such name there
    (``cufft_plan_cache.size`` as a second argument, ``; torch.backends.cuda.cufft_plan_cache.clear()``)
    is folded into the same finding, which the lowering would lower with it."""
    first, last = getattr(header, "lineno", 1), getattr(header, "end_lineno", None) or getattr(header, "lineno", 1)
    named = [name for name in _CUDA_NAME.findall("\n".join(lines[first - 1:last]))
             if reference_rule(name) == OTHER_TORCH_CUDA_API]
    return len(named) <= sum(reference_rule(name) == OTHER_TORCH_CUDA_API for name in quiet)
