"""Is a line reached only once a runtime that exists only for NVIDIA GPUs has been used?

NeMo Curator's video decoder imports its libraries under a guard (``try: import cvcuda; import
pycuda.driver as cuda; import PyNvVideoCodec as Nvc`` with ``cvcuda = cuda = Nvc = None`` in the
``except``) and falls back to FFmpeg elsewhere; the decoder's own methods then call ``cvcuda.Stream()``
or ``cuda.Device(device_id)`` before any CUDA line.  Where the runtime is absent, which is every
machine without an NVIDIA GPU, that call raises, so the lines after it are reached only on NVIDIA
hardware: CUDA by design, as in a module that imports such a runtime unguarded (policy.py's
``_nvidia_runtime_module``).  What is read, on the whole file:

- the runtime's names: those the file binds by importing one of ``NVIDIA_ONLY`` (anywhere, a
  ``try`` included), where every other binding of the name in the file is ``name = None``;
- a *use*: a statement of the function's own body (not inside an ``if``, loop, ``try`` or
  ``with``) that imports one of them or reads an attribute of, or calls, one of those names, not
  inside a conditional expression, an ``and``/``or`` past its first operand, a comprehension or a
  lambda (which may not run);
- the line is in a later statement of the same function's body (not its header: defaults and
  decorators run at import), or in a method (not a static or class method) of a module-level class
  whose ``__init__`` makes such a use with no ``return`` before it and touches ``self`` before it
  only to store plain values (a method or property called first runs without the runtime), that
  defines no ``__new__`` and that no class of the file derives from (a subclass may skip the
  parent's ``__init__``): every instance was built with the runtime.

No package of an app is known by name; the runtimes are listed below.  A subclass in another file
whose ``__init__`` skips its parent's would escape the class reading.
"""
from __future__ import annotations

import ast
import collections
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchport.scan.detectors.syntax import walk_nodes

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# Runtimes with no build for any other device: TensorRT (and its torch and LLM front ends), PyCUDA,
# CV-CUDA, NVIDIA's Video Codec SDK bindings.
NVIDIA_ONLY = frozenset({"tensorrt", "tensorrt_llm", "torch_tensorrt", "pycuda", "cvcuda", "PyNvVideoCodec"})

# Any import of one of them, indented or not: whether the file is worth reading.
MAY_IMPORT = re.compile(r"\b(?:import|from)\s+(?:" + "|".join(sorted(NVIDIA_ONLY)) + r")\b")

Function = ast.FunctionDef | ast.AsyncFunctionDef

# Nodes whose parts may not all run: `a if c else b`, `a and b`, comprehensions, lambdas.
_MAY_SKIP = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _runtimes(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None]]:
    """Each name the import binds, with the NVIDIA-only runtime it comes from (or None)."""
    if isinstance(node, ast.ImportFrom):
        top = (node.module or "").split(".")[0] if not node.level else ""
        runtime = top if top in NVIDIA_ONLY else None
        return [(alias.asname or alias.name, runtime) for alias in node.names]
    return [(alias.asname or alias.name.split(".")[0],
             alias.name.split(".")[0] if alias.name.split(".")[0] in NVIDIA_ONLY else None) for alias in node.names]


def runtime_names(tree: ast.Module) -> dict[str, str]:
    """The names the file binds only to an NVIDIA-only runtime or to None, with the runtime."""
    imported: dict[str, str] = {}
    other: set[str] = set()
    stores: collections.Counter[str] = collections.Counter()
    nones: collections.Counter[str] = collections.Counter()
    for node in walk_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, runtime in _runtimes(node):
                if runtime is None:
                    other.add(name)
                else:
                    imported[name] = runtime
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] += 1
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None:
            nones.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            other.update(node.names)
        elif isinstance(node, ast.arg):
            other.add(node.arg)
    return {name: runtime for name, runtime in imported.items() if name not in other and stores[name] == nones[name]}


def _certain_nodes(statement: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a simple statement that run whenever it does."""
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.AnnAssign):  # a local's annotation is never evaluated
            stack.extend(n for n in (node.target, node.value) if n is not None)
        elif isinstance(node, ast.BoolOp):
            stack.append(node.values[0])
        elif isinstance(node, ast.IfExp):
            stack.append(node.test)
        elif not isinstance(node, _MAY_SKIP):
            stack.extend(ast.iter_child_nodes(node))


def _use(statement: ast.stmt, names: dict[str, str]) -> str | None:
    """The runtime a simple statement certainly uses: imports, or reads an attribute of or calls a
    name bound to it (None raises there)."""
    if isinstance(statement, _COMPOUND):
        return None
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return next((runtime for _, runtime in _runtimes(statement) if runtime is not None), None)
    for node in _certain_nodes(statement):
        target = node.value if isinstance(node, ast.Attribute) else node.func if isinstance(node, ast.Call) else None
        if isinstance(target, ast.Name) and target.id in names:
            return names[target.id]
    return None


def _first_use(context: FileContext, function: Function, names: dict[str, str]) -> tuple[ast.stmt, str] | None:
    """The first statement of the function's own body that uses a runtime, read once a function."""
    cache: dict[int, tuple[ast.stmt, str] | None] = context.__dict__.setdefault("_nvidia_runtime_first_use", {})
    if id(function) not in cache:
        cache[id(function)] = next(((s, r) for s in function.body if (r := _use(s, names)) is not None), None)
    return cache[id(function)]


def _self_before(init: Function, use: ast.stmt) -> bool:
    """``__init__`` touches ``self`` before the use otherwise than storing a plain value on it
    (``self.device_id = device_id``): a method or property of the instance may run first."""
    for statement in init.body:
        if statement is use:
            return False
        plain_store = (isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None
                       and not any(isinstance(n, ast.Name) and n.id == "self" for n in walk_nodes(statement.value)))
        if not plain_store and any(isinstance(n, ast.Name) and n.id == "self" for n in walk_nodes(statement)):
            return True
    return False


def reached_after_use(context: FileContext, line: int) -> str | None:
    """What the reason says when ``line`` runs only after its function (or its class's
    ``__init__``) has used an NVIDIA-only runtime; else None."""
    scopes = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    function = next((s for s in reversed(scopes) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None or not function.body or line < function.body[0].lineno:
        return None  # the header, its defaults and decorators run when the module is imported
    names = _names(context)
    statement = next((s for s in function.body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
    used = _first_use(context, function, names)
    if statement is not None and used is not None and used[0].lineno < statement.lineno:
        return f"`{_first_line(used[0])}` (line {used[0].lineno}), which needs {used[1]}"
    owner = scopes[-2] if len(scopes) >= 2 and scopes[-1] is function else None
    if (not isinstance(owner, ast.ClassDef) or owner is not scopes[0] or _dunder(function.name, "__call__")
            or any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in function.decorator_list)):
        return None  # `__del__` runs after a failed `__init__` too, `__new__` before it
    methods = {s.name: s for s in owner.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init = methods.get("__init__")
    if init is None or _INSTANCE_HOOKS & methods.keys() or _subclassed(context, owner.name):
        return None
    used = _first_use(context, init, names)
    if used is None or _self_before(init, used[0]) or any(
            isinstance(n, ast.Return) for s in init.body if s.lineno < used[0].lineno for n in walk_nodes(s)):
        return None
    return f"`{owner.name}.__init__`, whose line {used[0].lineno} needs {used[1]}"


# Methods that run around `__init__`, or on the plain stores `_self_before` allows.
_INSTANCE_HOOKS = frozenset({"__new__", "__setattr__", "__getattr__", "__getattribute__"})


def _dunder(name: str, *allowed: str) -> bool:
    return name.startswith("__") and name.endswith("__") and name not in allowed


def _first_line(statement: ast.stmt) -> str:
    text = ast.unparse(statement).splitlines()[0]
    return text if len(text) <= 100 else text[:97] + "..."


def _subclassed(context: FileContext, name: str) -> bool:
    """A class of the file derives from ``name``: its own ``__init__`` may skip the parent's.  The
    bases are read once a file."""
    bases = context.__dict__.get("_nvidia_runtime_bases")
    if bases is None:
        bases = {b.id if isinstance(b, ast.Name) else b.attr for node in context.statements if isinstance(node, ast.ClassDef)
                 for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))}
        context.__dict__["_nvidia_runtime_bases"] = bases
    return name in bases


def _names(context: FileContext) -> dict[str, str]:
    found = getattr(context, "_nvidia_runtime_names", None)
    if found is None:
        found = runtime_names(context.tree)
        context._nvidia_runtime_names = found  # type: ignore[attr-defined]
    return found
