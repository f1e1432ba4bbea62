"""A ``"cuda"`` parameter default that no call in its own file reaches is "default only" (info)
where the other scanned files call the function and every call passes the parameter: the
default is never used.  The detectors mark such a default (``Finding.default_of``); this reads
the calls across the scan.

Which calls count:

- ``name(...)``, unless the file imports ``name`` from outside the project (``from
  torch.cuda.amp import GradScaler``);
- ``x.name(...)`` for a method or a class, whatever ``x`` is, unless ``x`` is imported from
  outside the project (``torch.cuda.amp.GradScaler()``, ``np.load(path)``);
- ``x.name(...)`` for a module-level function only where ``x`` may be a module: not an object
  the file binds (``adapter.load_model(...)``, ``self``, a call's result) nor a class imported
  from the project (``AutoQuantModel.quantize_model(...)``), whose ``name`` is a method.

Where the file does not show how ``x`` is bound, the call counts: a call that is not there can
only keep a finding as it is.  Only files that spell ``name(`` are read, and only their imports
and the statements around those calls are parsed (``python.parse_around``).
"""
from __future__ import annotations

import ast
import contextlib
import os
import re
from collections.abc import Callable

from torchport.scan import device_flow, python
from torchport.scan.detectors.syntax import passes_argument, walk_nodes
from torchport.scan.model import FileResult, Finding

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def project_names(paths: list[str]) -> set[str]:
    """The top-level names under which the scanned files may be imported: the outermost
    package folder of each, every folder above it (a namespace package such as ``autogluon``
    has no ``__init__.py``) and every module's own name (a script imports its sibling modules
    by it).  Not a subpackage's name: ``import torch`` never means ``mypackage/nn/torch/``."""
    names: set[str] = set()
    outside: dict[str, str] = {}  # a folder -> the first folder above it that is not a package

    def outside_of(folder: str) -> str:
        if folder not in outside:
            parent = os.path.dirname(folder)
            package = parent != folder and os.path.exists(os.path.join(folder, "__init__.py"))
            outside[folder] = outside_of(parent) if package else folder
        return outside[folder]

    for folder in {os.path.dirname(path) for path in paths}:
        folder = os.path.abspath(folder)
        above = outside_of(folder)
        inside = folder[len(above):].strip(os.sep).split(os.sep)
        names.update(above.split(os.sep) + inside[:1])
    names.update(os.path.basename(path).rsplit(".", 1)[0] for path in paths)
    return names


def _root_name(func: ast.expr) -> str | None:
    """``torch`` of ``torch.cuda.amp.GradScaler``; None for ``load_model()(...)``."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


def calls_in(tree: ast.Module, names: set[str] | dict[str, str],
             own: set[str]) -> tuple[list[tuple[ast.Call, str, bool]], int]:
    """The calls in ``tree`` that may reach a function of the project spelled one of ``names``:
    (the call, the name, whether it may reach a module-level function of that name); and how
    many calls spell one of ``names`` at all."""
    foreign: set[str] = set()
    project: set[str] = set()
    local: set[str] = set()
    found: list[tuple[ast.Call, str]] = []
    for node in walk_nodes(tree):  # one pass: the bindings and the calls
        kind = type(node)
        if kind is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
            if name in names:
                found.append((node, name))  # type: ignore[arg-type]
        elif kind is ast.Name:
            if type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
                local.add(node.id)  # type: ignore[attr-defined]
        elif kind is ast.arg:
            local.add(node.arg)  # type: ignore[attr-defined]
        elif kind is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                top = alias.name.split(".", 1)[0]
                (project if top in own else foreign).add(alias.asname or top)
        elif kind is ast.ImportFrom:
            outside = node.level == 0 and (node.module or "").split(".", 1)[0] not in own  # type: ignore[attr-defined]
            for alias in node.names:  # type: ignore[attr-defined]
                (foreign if outside else project).add(alias.asname or alias.name)
        elif kind in _DEFINITIONS:
            local.add(node.name)  # type: ignore[attr-defined]
    foreign -= local | project
    reaching: list[tuple[ast.Call, str, bool]] = []
    for call, name in found:
        root = _root_name(call.func)
        if root in foreign:
            continue
        as_function = type(call.func) is ast.Name or (
            root is not None and root not in local and not (root in project and root[:1].isupper()))
        reaching.append((call, name, as_function))
    return reaching, len(found)


def _spellings(text: str, names: list[str]) -> int:
    """How many times the text spells ``name(`` or ``x.name(`` (not ``def name(`` nor ``class name(``)."""
    return sum(1 for name in names for match in re.finditer(rf"(?<!\w){re.escape(name)}\(", text)
               if not text[max(0, match.start() - 6):match.start()].endswith(("def ", "class ")))


def lower_defaults_every_call_passes(work, results: list[tuple[FileResult, int]],
                                     read: Callable[[object], str | None],
                                     aliases: dict[str, str] | None = None) -> None:
    """Lower the marked defaults that every call in the scanned files replaces.  ``aliases`` are
    other names whose calls reach the same function (a subclass that inherits ``__init__``)."""
    pending: dict[str, list[Finding]] = {}
    for result, _ in results:
        for finding in result.findings:
            if finding.default_of is not None and finding.severity_cap is None:
                pending.setdefault(finding.default_of[0], []).append(finding)
    if not pending:
        return
    calls: dict[str, list[tuple[ast.Call, bool]]] = {name: [] for name in pending}
    unpacked = device_flow.UnpackedKeys()  # keys a `**mapping` in a call is known to hold
    reaching = {name: name for name in pending}
    reaching.update({alias: name for alias, name in (aliases or {}).items() if name in pending})
    needles = {name: (name + "(").encode() for name in reaching}
    own = project_names([job.path for job in work])
    for job in work:
        if job.kind != "python":
            continue
        try:
            with open(job.path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        named = [name for name, needle in needles.items() if needle in data]
        if not named:
            continue
        text = read(job) or ""
        try:
            tree = None
            with contextlib.suppress(SyntaxError):
                tree = python.parse_around(text, [name + "(" for name in named])
                found, spelled = calls_in(tree, reaching, own)
                # the whole file where the cut may have dropped a call (a spelling in a comment or
                # a string counts too), or where what a `**mapping` holds must be read
                if spelled < _spellings(text, named) or any(
                        keyword.arg is None for call, _, _ in found for keyword in call.keywords):
                    tree = None
            if tree is None:
                tree = ast.parse(text)
                found, _ = calls_in(tree, reaching, own)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            for name in named:  # calls that cannot be read: the default may be used there
                pending.pop(reaching[name], None)
                needles.pop(name, None)
            continue
        for call, name, as_function in found:
            calls[reaching[name]].append((call, as_function))
            unpacked.note(call, tree)
    for name, findings in pending.items():
        for finding in findings:
            _, parameter, position, unpacking_counts, module_function = finding.default_of  # type: ignore[misc]
            reached = [call for call, as_function in calls[name] if as_function or not module_function]
            if reached and all(passes_argument(call, parameter, position, unpacking_counts)
                               or unpacked.holds(call, parameter) for call in reached):
                finding.severity_cap = "info"
                finding.cap_reason = f"default only: every call in the scanned files passes {parameter}"
