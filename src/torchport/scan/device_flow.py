"""Where a hard-coded ``"cuda"`` device value goes, across the scanned package (TP001).

Two readings of the code, both made after every file was scanned:

* **falls back**: the value is bound to a name (a parameter default, ``device = "cuda"``) that
  the function remaps to the CPU when CUDA is absent before using it, or hands on (to
  ``super().__init__`` or to a package function called by name) to a parameter that the
  receiving function remaps.  The line then does not raise: the work runs on the CPU, which
  is silent, not an error.
* **dead default**: ``kwargs.get("device", "cuda")`` after ``kwargs["device"] = ...`` in the
  same function, and ``getattr(args, "device", "cuda")`` where an argparse option of the
  package always sets ``args.device``.  ``kwargs.get`` in a function called by name is handed
  to default_callers.py's check of parameter defaults (``Finding.default_of``), which counts a
  ``**mapping`` filled with the key as passing it (:func:`unpacked_keys`).

A pass parses only the files that hold a pending finding and the files their imports name; the
other files are read (not parsed) only to find an argparse option for a ``getattr`` default.
"""
from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePath

from torchport.scan.detectors.syntax import dotted_name, last_name, names_the_cpu, string_value
from torchport.scan.model import FileResult, Finding, default_of_kind
from torchport.scan.rules import CUDA_DEVICE_STRING

_IMPLICITLY_CALLED = ("__call__", "forward")  # torch and Python call these without their name

_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class _Where:
    """The function around a finding, with its class and file."""
    display: str
    tree: ast.Module
    function: _Function
    owner: ast.ClassDef | None  # the class whose method it is
    nested: bool  # a function inside another function


def _locate(tree: ast.Module, line: int, display: str) -> _Where | None:
    """The innermost function whose definition (signature included) spans ``line``."""
    found: _Where | None = None
    stack: list[tuple[ast.AST, ast.ClassDef | None, bool]] = [(tree, None, False)]
    while stack:
        node, owner, in_function = stack.pop()
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt) or not child.lineno <= line <= (child.end_lineno or child.lineno):
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found = _Where(display, tree, child, owner, in_function)
                stack.append((child, None, True))
            elif isinstance(child, ast.ClassDef):
                stack.append((child, child, in_function))
            elif isinstance(child, ast.stmt):
                stack.append((child, owner, in_function))
    return found


def _body_nodes(function: _Function) -> Iterable[ast.AST]:
    """Every node of the function's body, not those of functions or classes defined in it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _loads(function: _Function, name: str) -> list[ast.Name]:
    return [n for n in _body_nodes(function) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]


def _asks_cuda_availability(test) -> bool:
    return any(isinstance(n, ast.Call) and dotted_name(n.func).endswith("cuda.is_available") for n in ast.walk(test))


def _reads(node, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _binds(statement, name: str) -> bool:
    return isinstance(statement, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in statement.targets)


def _cpu_remap(statement, name: str) -> bool:
    """``if <test of name> and not torch.cuda.is_available(): name = "cpu"`` (or ``return
    torch.device("cpu")``, or a warning first), and ``name = name if torch.cuda.is_available()
    else "cpu"``."""
    if isinstance(statement, ast.If):
        if not (_asks_cuda_availability(statement.test) and _reads(statement.test, name)):
            return False
        return any(isinstance(s, (ast.Assign, ast.Return)) and names_the_cpu(s.value)
                   and (isinstance(s, ast.Return) or _binds(s, name)) for s in statement.body)
    if _binds(statement, name) and isinstance(statement.value, ast.IfExp):
        choice = statement.value
        return _asks_cuda_availability(choice.test) and (names_the_cpu(choice.orelse) or names_the_cpu(choice.body))
    return False


def _remapped_before_use(function: _Function, name: str, after_line: int = 0) -> ast.stmt | None:
    """The top-level statement of ``function`` that remaps ``name`` to the CPU when CUDA is
    absent, where every earlier statement (after ``after_line``) that reads the name only binds
    it again (``device = torch.device(device)``, ``if device == "auto": device = "cuda"``)."""
    for statement in function.body:
        if statement.end_lineno is not None and statement.end_lineno < after_line:
            continue
        if _cpu_remap(statement, name):
            return statement
        if not _reads(statement, name):
            continue
        if _binds(statement, name):
            continue
        if isinstance(statement, ast.If) and all(_binds(s, name) for s in statement.body + statement.orelse):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and not _reads(
                statement.value.func, name) and "warn" in dotted_name(statement.value.func):
            continue  # a warning that names the device
        return None
    return None


def _bound_name(where: _Where, finding: Finding) -> str | None:
    """The name a ``"cuda"`` value at the finding's line is bound to: a parameter whose default
    it is, or the name of ``name = "cuda"``."""
    line = finding.line
    arguments = where.function.args
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    for argument, default in pairs:
        if default.lineno <= line <= (default.end_lineno or default.lineno):
            return argument.arg
    for node in _body_nodes(where.function):
        if (isinstance(node, ast.Assign) and node.lineno == line and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            return node.targets[0].id
    return None


def _handed_to(function: _Function, name: str) -> list[tuple[ast.Call, str | None, int | None]]:
    """Each call that reads ``name``, with the keyword or position it passes the name at; ``[]``
    when the name is read anywhere else (the value would be used before the callee remaps it)."""
    calls: list[tuple[ast.Call, str | None, int | None]] = []
    handed: set[int] = set()
    for node in _body_nodes(function):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if isinstance(keyword.value, ast.Name) and keyword.value.id == name and keyword.arg:
                calls.append((node, keyword.arg, None))
                handed.add(id(keyword.value))
        for index, argument in enumerate(node.args):
            if isinstance(argument, ast.Name) and argument.id == name:
                calls.append((node, None, index))
                handed.add(id(argument))
    if not calls or any(id(n) not in handed for n in _loads(function, name)):
        return []
    return calls


def _callee_name(call: ast.Call, owner: ast.ClassDef | None) -> tuple[str, bool] | None:
    """(the name of the class or function a call reaches, whether it is a class's ``__init__``
    reached through ``super()``)."""
    func = call.func
    if (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super" and owner is not None):
        bases = [last_name(b) for b in owner.bases]
        return (bases[0], True) if len(bases) == 1 and bases[0] else None
    if isinstance(func, ast.Name):
        return func.id, False
    return None


def _definitions(tree: ast.Module, name: str) -> list[tuple[_Function, bool]]:
    """Module-level ``def name`` and ``class name``'s ``__init__`` (with whether it is a method)."""
    found: list[tuple[_Function, bool]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found.append((node, False))
        elif isinstance(node, ast.ClassDef) and node.name == name:
            found += [(s, True) for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and s.name == "__init__"]
    return found


def _receiving_parameter(function: _Function, method: bool, keyword: str | None, index: int | None) -> str | None:
    if keyword is not None:
        names = [a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
        return keyword if keyword in names else None
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)][int(method):]
    return positional[index] if index is not None and index < len(positional) else None


class _Package:
    """The scanned Python files, read and parsed on demand, each at most once."""

    def __init__(self, work, read: Callable[[object], str | None]):
        self.jobs = [job for job in work if job.kind == "python"]
        self.read = read
        self.trees: dict[str, ast.Module | None] = {}
        self._by_path: dict[str, object] | None = None

    @property
    def by_path(self) -> dict:
        if self._by_path is None:  # built on the first import that is followed
            self._by_path = {os.path.normpath(job.path): job for job in self.jobs}
        return self._by_path

    def tree(self, job) -> ast.Module | None:
        if job.display not in self.trees:
            text = self.read(job)
            try:
                self.trees[job.display] = ast.parse(text) if text is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self.trees[job.display] = None
        return self.trees[job.display]

    def naming(self, needles: set[bytes]) -> dict[bytes, list]:
        """For each needle, the files whose bytes hold it (one read of each file)."""
        found: dict[bytes, list] = {needle: [] for needle in needles}
        if not needles:
            return found
        for job in self.jobs:
            try:
                with open(job.path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            for needle in needles:
                if needle in data:
                    found[needle].append(job)
        return found


def _short(display: str) -> str:
    return PurePath(display).name


def _pending(results) -> list[tuple[str, Finding]]:
    return [(result.path, finding) for result, _ in results for finding in result.findings
            if finding.rule_id == CUDA_DEVICE_STRING and finding.severity_cap is None]


def _may_bind(detail: str) -> bool:
    """A finding whose value may be bound to a name (a default, an assignment), not one placed
    on the spot (``device="cuda"`` in a call, ``.to("cuda")``): only those files are parsed."""
    return " default of " in detail or detail.endswith("assigned to a name") or "torch.device(" in detail


def lower_fallbacks(work, results: list[tuple[FileResult, int]], read) -> None:
    """Lower to silent a ``"cuda"`` value that the package remaps to the CPU where CUDA is absent
    before anything is placed (see the module's docstring)."""
    pending = _pending(results)
    if not pending:
        return
    package = _Package(work, read)
    by_display = {job.display: job for job in package.jobs}
    handed: list[tuple[Finding, _Where, list[tuple[ast.Call, str | None, int | None]]]] = []
    for display, finding in pending:
        if not _may_bind(finding.detail):
            continue
        job = by_display.get(display)
        tree = package.tree(job) if job is not None else None
        where = _locate(tree, finding.line, display) if tree is not None else None
        name = _bound_name(where, finding) if where is not None else None
        if where is None or name is None:
            continue
        remap = _remapped_before_use(where.function, name, finding.line)
        if remap is not None:
            finding.severity_cap = "silent"
            finding.cap_reason = (f"falls back to the CPU at line {remap.lineno} when CUDA is absent: no error, but "
                                  "the work silently runs on the CPU instead of another accelerator")
        elif not where.nested and (calls := _handed_to(where.function, name)):
            handed.append((finding, where, calls))
    for finding, where, calls in handed:
        places: list[str] = []
        for call, keyword, index in calls:
            callee = _callee_name(call, where.owner)
            place = _remap_in_callee(package, by_display[where.display], callee, keyword, index) if callee else None
            if place is None:
                places = []
                break
            places.append(place)
        if places:
            finding.severity_cap = "silent"
            finding.cap_reason = (f"falls back to the CPU in {places[0]} when CUDA is absent: no error, but the "
                                  "work silently runs on the CPU instead of another accelerator")


def _defining_file(package: _Package, job, name: str) -> tuple[object, str] | None:
    """The scanned file that defines what ``name`` means in ``job``'s module, with the name it has
    there: the module itself, or the module of ``from .base import name`` (relative or absolute,
    one level: a re-export is not followed)."""
    tree = package.tree(job)
    if tree is None:
        return None
    if _definitions(tree, name):
        return job, name
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        alias = next((a for a in node.names if (a.asname or a.name) == name), None)
        if alias is None:
            continue
        parts = (node.module or "").split(".") if node.module else []
        if node.level:
            folder = os.path.normpath(os.path.join(os.path.dirname(job.path), *[".."] * (node.level - 1)))
            candidates = [os.path.join(folder, *parts) + ".py", os.path.join(folder, *parts, "__init__.py")]
            found = next((package.by_path[c] for c in candidates if c in package.by_path), None)
        else:
            suffixes = ("/" + "/".join(parts) + ".py", "/" + "/".join(parts) + "/__init__.py")
            matches = [j for path, j in package.by_path.items() if path.endswith(suffixes)]
            found = matches[0] if len(matches) == 1 else None
        return (found, alias.name) if found is not None else None
    return None


def _remap_in_callee(package: _Package, job, callee: tuple[str, bool], keyword: str | None,
                     index: int | None) -> str | None:
    """Where the definition of the callee (in the calling file or the file it imports it from)
    remaps the parameter it receives to the CPU."""
    name, through_super = callee
    defined = _defining_file(package, job, name)
    tree = package.tree(defined[0]) if defined is not None else None
    if defined is None or tree is None:
        return None
    home, name = defined
    definitions = [(function, method) for function, method in _definitions(tree, name) if method or not through_super]
    if len(definitions) != 1:
        return None  # none, or several that a call by this name may reach
    function, method = definitions[0]
    parameter = _receiving_parameter(function, method or through_super, keyword, index)
    remap = _remapped_before_use(function, parameter) if parameter else None
    if remap is None:
        return None
    where = f"{name}.__init__" if method else name
    return f"{where} ({_short(home.display)}:{remap.lineno})"  # type: ignore[attr-defined]


# -- dead defaults ---------------------------------------------------------------------------

def unpacked_keys(tree: ast.Module) -> dict[int, set[str]]:
    """For each call that unpacks a mapping (``f(**kw)``), the string keys that the enclosing
    function (or module) put in that mapping before the call, in its top-level statements:
    ``kw["device"] = d``, ``kw = {"device": d}``, ``kw = dict(device=d)``, ``kw.update(device=d)``.
    Keyed by ``id`` of the call."""
    found: dict[int, set[str]] = {}
    bodies: list[list[ast.stmt]] = [tree.body]
    while bodies:
        keys: dict[str, set[str]] = {}
        for statement in bodies.pop():
            for node in _own_nodes(statement, bodies):
                if isinstance(node, ast.Call):
                    unpacked = [kw.value.id for kw in node.keywords if kw.arg is None and isinstance(kw.value, ast.Name)]
                    if unpacked:
                        found[id(node)] = set().union(*(keys.get(n, set()) for n in unpacked))
            _fill(statement, keys)
    return found


def _own_nodes(statement: ast.stmt, nested_bodies: list[list[ast.stmt]]) -> Iterable[ast.AST]:
    """The nodes of a statement outside the functions defined in it, whose bodies are added to
    ``nested_bodies`` (each node is visited once over the whole tree)."""
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested_bodies.append(node.body)
            stack.extend((*node.decorator_list, node.args))
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _fill(statement: ast.stmt, keys: dict[str, set[str]]) -> None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Name):
            keys[target.id] = _literal_keys(value)
        elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
              and (key := string_value(target.slice))):
            keys.setdefault(target.value.id, set()).add(key)
    elif isinstance(statement, ast.Expr) and isinstance(call := statement.value, ast.Call) and isinstance(
            call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
        if call.func.attr == "update":
            added = {kw.arg for kw in call.keywords if kw.arg} | (_literal_keys(call.args[0]) if call.args else set())
            keys.setdefault(call.func.value.id, set()).update(added)
        elif call.func.attr == "setdefault" and call.args and (key := string_value(call.args[0])):
            keys.setdefault(call.func.value.id, set()).add(key)


def _literal_keys(value) -> set[str]:
    if isinstance(value, ast.Dict):
        return {k for k in map(string_value, value.keys) if k}
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return {kw.arg for kw in value.keywords if kw.arg}
    return set()


class UnpackedKeys:
    """Whether a call passes a key through a ``**mapping`` known to hold it (see
    :func:`unpacked_keys`); a file's calls are read only when one is asked about."""

    def __init__(self) -> None:
        self.trees: dict[int, ast.Module] = {}
        self.keys: dict[int, set[str]] = {}
        self.read: set[int] = set()

    def note(self, call: ast.Call, tree: ast.Module) -> None:
        if any(kw.arg is None for kw in call.keywords):
            self.trees[id(call)] = tree

    def holds(self, call: ast.Call, key: str) -> bool:
        tree = self.trees.get(id(call))
        if tree is None:
            return False
        if id(tree) not in self.read:
            self.read.add(id(tree))
            self.keys.update(unpacked_keys(tree))
        return key in self.keys.get(id(call), ())


def _mapping_read(where: _Where, line: int) -> tuple[ast.Call, str] | None:
    """``kwargs.get("device", "cuda")`` (or ``.pop``) at ``line`` on the function's own
    ``**kwargs``: (the call, the key)."""
    kwarg = where.function.args.kwarg
    for node in _body_nodes(where.function):
        if (isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno)
                and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
                and len(node.args) == 2 and (key := string_value(node.args[0]))
                and isinstance(node.func.value, ast.Name) and kwarg is not None
                and node.func.value.id == kwarg.arg):
            return node, key
    return None


def _set_before(where: _Where, read: ast.Call, key: str) -> int | None:
    """The line of ``kwargs[key] = ...`` among the function's top-level statements before the
    one holding ``read``, with no rebinding of ``kwargs`` to an unknown mapping in between."""
    mapping = read.func.value.id  # type: ignore[attr-defined]
    keys: dict[str, set[str]] = {}
    set_at = None
    for statement in where.function.body:
        if statement.lineno <= read.lineno <= (statement.end_lineno or statement.lineno):
            return set_at
        had = key in keys.get(mapping, ())
        _fill(statement, keys)
        if key not in keys.get(mapping, ()):
            set_at = None
        elif not had or _binds(statement, mapping):
            set_at = statement.lineno
    return None


def mark_dead_defaults(work, results: list[tuple[FileResult, int]], read) -> dict[str, str]:
    """``kwargs.get("device", "cuda")``: lowered where the function set the key before; otherwise
    handed to default_callers.py's check of defaults that every call passes (``Finding.default_of``).
    ``getattr(args, "device", "cuda")``: lowered where an argparse option of the package sets it.
    Returns the names that reach a class's ``__init__`` besides its own: its subclasses in the same
    file that define no ``__init__`` (``{subclass: class}``), whose calls pass the same parameters."""
    pending = _pending(results)
    aliases: dict[str, str] = {}
    if not pending:
        return aliases
    package = _Package(work, read)
    by_display = {job.display: job for job in package.jobs}
    attribute_defaults: list[tuple[Finding, str]] = []
    for display, finding in pending:
        if finding.default_of is not None:
            if (job := by_display.get(display)) is not None:
                aliases.update(_inheriting_without_init(package, job, finding.default_of[0]))
            continue
        if finding.detail.startswith('"') and " getattr default for " in finding.detail:
            if (job := by_display.get(display)) is not None and _reads_a_namespace(package.tree(job), finding.line):
                attribute_defaults.append((finding, finding.detail.rsplit(" ", 1)[1]))
            continue
        if " default for " not in finding.detail or (job := by_display.get(display)) is None:
            continue
        tree = package.tree(job)
        where = _locate(tree, finding.line, display) if tree is not None else None
        read_here = _mapping_read(where, finding.line) if where is not None else None
        if where is None or read_here is None:
            continue
        call, key = read_here
        set_at = _set_before(where, call, key)
        if set_at is not None:
            owner = call.func.value.id  # type: ignore[attr-defined]
            finding.lower_to_info(f"default only: {owner}[{key!r}] is set at line {set_at}, before this")
            continue
        function = where.function
        if where.nested or function.name in _IMPLICITLY_CALLED:
            continue
        method = where.owner is not None
        name = where.owner.name if method and function.name == "__init__" else function.name  # type: ignore[union-attr]
        finding.default_of = (name, key, None, False, default_of_kind(method, function.name))
    if attribute_defaults:
        _lower_option_attributes(package, attribute_defaults)
    return aliases


def _inheriting_without_init(package: _Package, job, name: str) -> dict[str, str]:
    """``{subclass: name}`` for the classes of the file that inherit ``name``'s ``__init__``."""
    text = package.read(job)
    if text is None or f"({name})" not in text:
        return {}
    tree = package.tree(job)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)] if tree is not None else []
    if not any(c.name == name for c in classes):
        return {}
    reaching, found = {name}, {}
    for _ in range(len(classes)):  # a chain of subclasses, in any order in the file
        for node in classes:
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if node.name not in reaching and len(node.bases) == 1 and bases & reaching and not any(
                    isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"
                    for s in node.body):
                reaching.add(node.name)
                found[node.name] = name
    return found


def _reads_a_namespace(tree: ast.Module | None, line: int) -> bool:
    """``getattr(args, "device", "cuda")`` at ``line``: an object held in a plain name other than
    ``self``/``cls`` (an attribute or a method's own object is not an options namespace)."""
    for node in ast.walk(tree) if tree is not None else ():
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and node.lineno <= line <= (node.end_lineno or node.lineno) and len(node.args) == 3):
            holder = node.args[0]
            return isinstance(holder, ast.Name) and holder.id not in ("self", "cls")
    return False


def _lower_option_attributes(package: _Package, defaults: list[tuple[Finding, str]]) -> None:
    options = {f"--{key}" for _, key in defaults}
    needles = {f'"{o}"'.encode() for o in options} | {f"'{o}'".encode() for o in options}
    files = package.naming(needles)
    declared: dict[str, str] = {}
    # files in path order, so the declaration cited does not depend on set order (hash seed)
    naming = {job.display: job for jobs in files.values() for job in jobs}
    for display in sorted(naming):
        job = naming[display]
        tree = package.tree(job)
        for node in ast.walk(tree) if tree is not None else ():
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument"):
                for argument in node.args:
                    option = string_value(argument)
                    if option in options and option not in declared:
                        declared[option] = f"{_short(job.display)}:{node.lineno}"
    for finding, key in defaults:
        if f"--{key}" in declared:
            finding.lower_to_info(f"default only: the package's --{key} option ({declared['--' + key]}) always "
                                  f"sets the attribute")
