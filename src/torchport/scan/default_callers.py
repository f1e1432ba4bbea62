"""A ``"cuda"`` parameter default that no call in its own file reaches is "default only" (info)
where the other scanned files call the function and every call passes the parameter: the
default is never used.  The detectors mark such a default (``Finding.default_of``); this reads
the calls across the scan.

Which calls count:

- ``name(...)``, unless the file imports ``name`` from outside the project (``from
  torch.cuda.amp import GradScaler``);
- ``x.name(...)`` for a method or a class, whatever ``x`` is, unless ``x`` is imported from
  outside the project (``torch.cuda.amp.GradScaler()``, ``np.load(path)``);
- ``x.name(...)`` for a module-level function unless ``x`` is a class of the file, a capitalised
  name imported from the project that names no scanned module (``AutoQuantModel.quantize_model``),
  or a call's result: any other ``x`` may hold the module (``H`` of ``import pkg.helpers as H``,
  ``backend = importlib.import_module(...)``).

A module-level function handed on as a value (``functools.partial(load_model)``, ``fn =
helpers.load_model``), named to ``getattr`` or imported under another name is called where the
scan cannot see: its default stays as it is.  Only files that name a function are read, and only
their imports and the statements around those mentions are parsed (``python.parse_around``), unless
the cut shows fewer calls than the text spells.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import os
import re
from collections.abc import Callable

from torchport.scan import device_flow, files, python
from torchport.scan.detectors.syntax import CallSite, call_site, last_name, passes_a_value, passes_argument, walk_nodes
from torchport.scan.model import DEFAULT_OF_FUNCTION, DEFAULT_OF_METHOD, FileResult, Finding
from torchport.scan.packages import LIBRARY_NAMES

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BUILTINS = frozenset(dir(builtins))
# Builtins that take a class or function without calling it: `super(FAN, self)`, `isinstance(x, A)`.
_NOT_HANDING_ON = frozenset({"super", "isinstance", "issubclass", "type", "id", "repr", "str", "print"})


def project_names(paths: list[str]) -> set[str]:
    """The top-level names under which the scanned files may be imported: the outermost
    package folder of each, every folder above it (a namespace package such as ``autogluon``
    has no ``__init__.py``) and every module's own name (a script imports its sibling modules
    by it).  Not a subpackage's name: ``import torch`` never means ``mypackage/nn/torch/``; nor a
    module's that names a library (``packages.LIBRARY_NAMES``): ``import torch`` in a package with
    a ``backends/torch.py`` means PyTorch (only a script run beside that file would find the file
    first, a shadowing its author would have met)."""
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
    names.update(name for name in (os.path.basename(path).rsplit(".", 1)[0] for path in paths)
                 if name not in LIBRARY_NAMES)
    return names


def _root_name(func: ast.expr) -> str | None:
    """``torch`` of ``torch.cuda.amp.GradScaler``; None for ``load_model()(...)``."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


def _outside(module: str, own: set[str]) -> bool:
    """Whether ``import module`` is of code outside the project: neither its top-level name nor
    its last part names a scanned package or module (``from mypkg.helpers import f`` may be the
    project's ``lib/helpers.py``, installed as ``mypkg``)."""
    parts = module.split(".")
    return parts[0] not in own and parts[-1] not in own


class Reading:
    """What one file shows of the functions spelled ``names``."""

    def __init__(self) -> None:
        # the calls that may reach one: (the call, the name, whether it surely reaches a
        # module-level function of that name when the project has one: `name(...)`, `module.name(...)`)
        self.calls: list[tuple[ast.Call, str, bool]] = []
        self.spelled = 0  # calls that spell one of the names at all
        # names handed on as a value (`partial(load_model)`, `MODELS = {"a": A}`, `class B(A)`),
        # decorated by the project (`@MODELS.register_module()`), named to `getattr` or imported under
        # another name: the file does not show their calls
        self.escaped: set[str] = set()
        # classes subclassed here: a subclass in another file than the class reaches its `__init__`
        # through `super()` or without a call that names it
        self.bases: set[str] = set()


def calls_in(tree: ast.Module, names: set[str] | dict[str, str], own: set[str]) -> Reading:
    """Read ``tree`` for the calls of a function of the project spelled one of ``names``."""
    foreign: set[str] = set()  # bound by importing from outside the project
    project: set[str] = set()  # bound by importing from the project
    classes: set[str] = set()  # defined here, or imported capitalised and no module name: `AutoQuantModel`
    bound: set[str] = set()  # bound otherwise: assignments, parameters, loops, definitions
    found: list[tuple[ast.Call, str]] = []
    reading = Reading()
    values: list[ast.expr] = []  # expressions handed on as values: arguments, assigned, in a display
    decorators: list[tuple[ast.expr, str]] = []  # around a definition of one of the names
    for node in walk_nodes(tree):  # one pass: the bindings, the calls and the values handed on
        kind = type(node)
        if kind is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
            if name in names:
                found.append((node, name))  # type: ignore[arg-type]
            if name not in _NOT_HANDING_ON:
                values.extend(node.args)  # type: ignore[attr-defined]
                values.extend(keyword.value for keyword in node.keywords)  # type: ignore[attr-defined]
            attribute = node.args[1] if name == "getattr" and len(node.args) > 1 else None  # type: ignore[attr-defined]
            if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str) and attribute.value in names:
                reading.escaped.add(attribute.value)
        elif kind is ast.Name:
            if type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
                bound.add(node.id)  # type: ignore[attr-defined]
        elif kind is ast.Assign or kind is ast.AnnAssign or kind is ast.Return:
            if node.value is not None:  # type: ignore[attr-defined]
                values.append(node.value)  # type: ignore[attr-defined]
        elif kind is ast.List or kind is ast.Tuple or kind is ast.Set:
            values.extend(node.elts)  # type: ignore[attr-defined]
        elif kind is ast.Dict:
            values.extend(value for value in node.values if value is not None)  # type: ignore[attr-defined]
        elif kind is ast.arg:
            bound.add(node.arg)  # type: ignore[attr-defined]
        elif kind is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                top = alias.name.split(".", 1)[0]
                (foreign if _outside(alias.name, own) else project).add(alias.asname or top)
        elif kind is ast.ImportFrom:
            outside = node.level == 0 and _outside(node.module or "", own)  # type: ignore[attr-defined]
            for alias in node.names:  # type: ignore[attr-defined]
                (foreign if outside else project).add(alias.asname or alias.name)
                if alias.name in names and alias.asname and alias.asname != alias.name:
                    reading.escaped.add(alias.name)
                if not outside and alias.name[:1].isupper() and alias.name not in own:
                    classes.add(alias.asname or alias.name)
        elif kind in _DEFINITIONS:
            bound.add(node.name)  # type: ignore[attr-defined]
            if node.name in names:  # type: ignore[attr-defined]
                decorators.extend((decorator, node.name) for decorator in node.decorator_list)  # type: ignore[attr-defined]
            if kind is ast.ClassDef:
                classes.add(node.name)  # type: ignore[attr-defined]
                reading.bases.update(_root_name(base) or "" for base in node.bases)  # type: ignore[attr-defined]
            else:
                values.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)  # type: ignore[attr-defined]
        elif kind is ast.IfExp:
            values.extend((node.body, node.orelse))  # type: ignore[attr-defined]
        elif kind is ast.BoolOp:
            values.extend(node.values)  # type: ignore[attr-defined]
        elif kind is ast.NamedExpr or kind is ast.Lambda:
            values.append(node.value if kind is ast.NamedExpr else node.body)  # type: ignore[attr-defined]
    foreign -= bound | project
    for value in values:  # `partial(load_model)`, `fn = helpers.load_model`; not `torch.load`
        name = last_name(value)
        if name in names and _root_name(value) not in foreign:
            reading.escaped.add(name)
    for decorator, name in decorators:  # `@MODELS.register_module()`: built from a registry, by a string
        root = _root_name(decorator.func if isinstance(decorator, ast.Call) else decorator)
        if root not in foreign and root not in _BUILTINS:  # not `@torch.no_grad()`, `@lru_cache`, `@classmethod`
            reading.escaped.add(name)
    for call, name in found:
        root = _root_name(call.func)
        if type(call.func) is ast.Attribute and root in foreign:
            continue  # `torch.cuda.amp.GradScaler()`, `np.load(path)`
        # `name(...)` surely reaches the project's function of that name, unless the file imports
        # the name from outside; `x.name(...)` does when `x` may be its module, not where `x` is a
        # class of the file or a capitalised import (`AutoQuantModel.quantize_model(...)`), or a
        # call's result or a subscript (`factory().name(...)`), which may still reach it
        sure = (root not in foreign if type(call.func) is ast.Name
                else root is not None and root not in classes)
        reading.calls.append((call, name, sure))
    reading.spelled = len(found)
    return reading


def _call_spelling(name: str) -> re.Pattern:
    """``name(``, ``x.name(``, ``name (`` and ``name`` with its ``(`` on the next line."""
    return re.compile(rf"(?<!\w){re.escape(name)}\s*\(")


def _spellings(text: str, names: list[str]) -> int:
    """How many times the text spells a call of one of ``names`` (not ``def name(`` nor ``class name(``)."""
    return sum(1 for name in names for match in _call_spelling(name).finditer(text)
               if not text[max(0, match.start() - len("class ")):match.start()].endswith(("def ", "class ")))


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
    calls: dict[str, list[tuple[ast.Call, bool, CallSite]]] = {name: [] for name in pending}
    # a None that falls back to CUDA: whether a call hands on a None of its own function is read
    # in the whole file, whose functions are kept per call
    falls_back = {name for name, findings in pending.items() if any(f.default_falls_back for f in findings)}
    unpacked = device_flow.UnpackedKeys()  # keys a `**mapping` in a call is known to hold
    reaching = {name: name for name in pending}
    reaching.update({alias: name for alias, name in (aliases or {}).items() if name in pending})
    # the file names the function at all (a call, a value, a string): read it
    needles = {name: (name.encode(), re.compile(rb"(?<!\w)" + re.escape(name.encode()) + rb"(?!\w)")) for name in reaching}
    own = project_names([job.path for job in work])
    escaped: set[str] = set()
    # the files defining each name: their own subclasses are read there (device_flow's aliases)
    defined_in = {name: {finding.path for finding in findings} for name, findings in pending.items()}

    def forget(names: list[str]) -> None:
        """Calls that cannot be read: the default may be used there."""
        for name in names:
            pending.pop(reaching[name], None)
            needles.pop(name, None)

    for job, data in files.read_bytes(job for job in work if job.kind == "python"):
        if data is None:
            pending.clear()  # a file whose calls nobody can read: no default is shown unused
            break
        named = [name for name, (word, spelled) in needles.items() if word in data and spelled.search(data)]
        if not named:
            continue
        text = read(job)
        if text is None:  # unreadable as source
            forget(named)
            continue
        try:
            tree = None
            with contextlib.suppress(SyntaxError):
                tree = python.parse_around(text, named)
                reading = calls_in(tree, reaching, own)
                # the whole file where the cut may have dropped a call (a spelling in a comment or
                # a string counts too), or where what a `**mapping` holds must be read
                if reading.spelled < _spellings(text, named) or any(
                        keyword.arg is None for call, _, _ in reading.calls for keyword in call.keywords) or any(
                        reaching[name] in falls_back for name in named):
                    tree = None
            if tree is None:
                tree = ast.parse(text)
                reading = calls_in(tree, reaching, own)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            forget(named)
            continue
        site = call_site(tree) if any(reaching[name] in falls_back for _, name, _ in reading.calls) else CallSite()
        for call, name, sure in reading.calls:
            calls[reaching[name]].append((call, sure, site))
            unpacked.note(call, tree)
        escaped.update(reaching[name] for name in reading.escaped)
        escaped.update(reaching[name] for name in reading.bases & set(reaching)
                       if job.display not in defined_in.get(reaching[name], ()))
    for name, findings in pending.items():
        for finding in findings:
            _, parameter, position, unpacking_counts, kind = finding.default_of  # type: ignore[misc]
            if kind != DEFAULT_OF_METHOD and name in escaped:
                continue  # not for a method: its name is often a local variable's or a data attribute's too
            reached = [call for call, _, _ in calls[name]]
            # a module-level function needs a call that surely reaches it: a method of the same name
            # (`Engine.quantize_model(..., device=d)`) says nothing of the function's own callers
            reaching_surely = [call for call, surely, _ in calls[name] if surely] if kind == DEFAULT_OF_FUNCTION \
                else reached
            if finding.default_falls_back:
                passed = all(passes_a_value(call, parameter, position, site, finding.default_falls_back)
                             for call, _, site in calls[name])
            else:
                passed = all(passes_argument(call, parameter, position, unpacking_counts)
                             or unpacked.holds(call, parameter) for call in reached)
            if reaching_surely and passed:
                finding.lower_to_info(f"default only: every call in the scanned files passes {parameter}")
