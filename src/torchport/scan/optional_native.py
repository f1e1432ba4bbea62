"""CUDA sources a package builds only when the user opts in.

A ``.cu``/``.cpp``/``.cuh`` file is a lock-in where the package builds and loads it on its
default path.  Where every Python line of the package that names the file (its loader: the
``sources=[...]`` of a ``load()`` or an extension) runs only under an opt-in, a user without
CUDA never builds it:

- an environment variable compared with an on value and off by default
  (``if os.environ.get("X_CUDA_ON") == "1":``), that the package never sets on itself;
- a command-line subcommand that only builds (``@cli.command("build-extensions")`` whose
  ``load()`` results are thrown away);
- a ``try`` whose broad ``except`` goes on without the build;
- a setuptools script inside the package (``pkg/kernels/setup_cuda.py``, its folder a package):
  installing the package never runs it.

A header or source no Python file names (``aev.h``, included by ``aev.cu``) follows the
sources of its folder that Python does name.  The loaders are looked for only in the folders
from the source up to the distribution's root (the package's ``__init__.py`` chain and the
folder above it, where ``setup.py`` lives): no package-wide walk.  Nothing here knows a package,
variable or command by name.
"""
from __future__ import annotations

import ast
import functools
import os
import re

from torchport.scan.detectors.syntax import last_name, string_value

NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp")
# How far up a source's folder the loaders are looked for (``pkg/ops/kernels/cuda/x.cu``).
_LEVELS = 6

_ON_WORDS = ("1", "true", "yes", "on")
_OFF_WORDS = ("0", "", "false", "no", "off", "none")


def environment_read(node: ast.expr) -> str | None:
    """The variable of ``os.environ.get("X")``, ``os.getenv("X", "0")`` or ``os.environ["X"]``
    when the stated default, if any, is off."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
        return string_value(node.slice)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and 1 <= len(node.args) <= 2
            and (node.func.attr == "getenv" or (node.func.attr == "get" and isinstance(node.func.value, ast.Attribute)
                                                and node.func.value.attr == "environ"))):
        return None
    default = node.args[1] if len(node.args) == 2 else next((k.value for k in node.keywords if k.arg == "default"), None)
    if default is not None and not (isinstance(default, ast.Constant) and str(default.value).lower() in _OFF_WORDS):
        return None
    return string_value(node.args[0])


def _environment_name(text: str, name: str) -> str | None:
    """The variable a module-level name holds when every assignment to it in ``text`` is an
    environment read (``JIT = os.getenv("PKG_JIT")``)."""
    variables = set()
    # indented too: a reassignment under an `if` makes the name something else there
    for value in re.findall(rf"^[ \t]*{re.escape(name)}\s*=(?!=)\s*(.+?)\s*$", text, re.MULTILINE):
        try:
            variables.add(environment_read(ast.parse(value, mode="eval").body))
        except SyntaxError:
            return None
    return variables.pop() if len(variables) == 1 else None


def environment_opt_in(text: str, test: ast.expr, follow_names: bool = False) -> str | None:
    """``VARIABLE=value`` when ``test`` (or one operand of its ``and``) holds only once the user
    sets an environment variable: ``os.environ.get("X_CUDA_ON") == "1"``, unless the file
    (``text``) sets that variable on itself.  ``follow_names``: also a module-level name that
    holds such a read (``JIT = os.getenv("PKG_JIT")`` then ``if JIT == "True":``)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return next((found for value in test.values if (found := environment_opt_in(text, value, follow_names))),
                    None)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant) and isinstance(test.comparators[0].value, str)
            and test.comparators[0].value.lower() in _ON_WORDS):
        return None
    on_value: str = test.comparators[0].value
    variable = environment_read(test.left)
    if variable is None and follow_names and isinstance(test.left, ast.Name):
        variable = _environment_name(text, test.left.id)
    if variable is None:
        return None
    # `os.environ["X"] = "1"`, `os.environ.setdefault("X", "1")`, `os.putenv("X", "1")`
    sets_on = re.compile(rf"(?:environ\[\s*['\"]{re.escape(variable)}['\"]\s*\]\s*=(?!=)|(?:setdefault|putenv)\(\s*"
                         rf"['\"]{re.escape(variable)}['\"]\s*,)\s*['\"](?i:{'|'.join(_ON_WORDS)})['\"]")
    return None if sets_on.search(text) else f"{variable}={on_value}"


def _raises_nothing(handler: ast.ExceptHandler) -> bool:
    return not any(isinstance(node, ast.Raise) for node in ast.walk(handler))


def build_only_command(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name of a CLI subcommand (``@main.command("build-extensions")``) whose body throws
    its ``load()`` results away: it builds ahead of time and nothing in it uses the build."""
    command = next((d for d in function.decorator_list if isinstance(d, ast.Call)
                    and isinstance(d.func, ast.Attribute) and d.func.attr == "command"), None)
    if command is None:
        return None
    loads = [n for n in ast.walk(function) if isinstance(n, ast.Call) and last_name(n.func) == "load"]
    kept = [a for a in ast.walk(function) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
            and last_name(a.value.func) == "load" and not all(isinstance(t, ast.Name) and t.id == "_" for t in a.targets)]
    if not loads or kept:
        return None
    named = string_value(command.args[0]) if command.args else None
    return named or function.name.replace("_", "-").strip("-")


class _Loader:
    """One Python file that may name native sources: which lines name which file, and the
    opt-in (or None) under which each line runs."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.tree: ast.Module | None
        try:
            self.tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            self.tree = None
        self.parents: dict[int, ast.AST] = {}
        builds_by_hand = False
        if self.tree is not None:
            for node in ast.walk(self.tree):
                for child in ast.iter_child_nodes(node):
                    self.parents[id(child)] = node
                builds_by_hand = builds_by_hand or (isinstance(node, ast.Call) and last_name(node.func) == "setup"
                                                    and any(k.arg == "ext_modules" for k in node.keywords))
        self.build_script = builds_by_hand and in_package(path)

    def mentions(self, name: str) -> list[ast.Constant]:
        if self.tree is None:
            return []
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and re.search(rf"(?<![\w.-]){re.escape(name)}$", n.value)]

    def opt_in(self, node: ast.AST) -> str | None:
        """Why the line of ``node`` runs only when the user asks for it, or None."""
        caught = None
        child, parent = node, self.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.If) and any(child is s for s in parent.body):
                found = environment_opt_in(self.text, parent.test)
                if found:
                    return f"when {found} is set"
            elif isinstance(parent, ast.Try) and any(child is s for s in parent.body) and parent.handlers \
                    and all(_raises_nothing(h) for h in parent.handlers):
                # an opt-in further out says more than the try: keep looking
                caught = caught or "where it can: its build is in a try whose except goes on without it"
            elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                command = build_only_command(parent)
                if command:
                    return f"by the explicit command `{command}`"
            child, parent = parent, self.parents.get(id(parent))
        if caught is None and self.build_script:
            return f"by hand, with the build script {os.path.basename(self.path)} inside the package"
        return caught


def in_package(path: str) -> bool:
    """A setuptools script inside the package (its folder is a package): installing the
    package never runs it; a user builds with it by hand."""
    return os.path.isfile(os.path.join(os.path.dirname(path), "__init__.py"))


def is_build_script(path: str, text: str) -> bool:
    return "ext_modules" in text and re.search(r"(?<![\w.])setup\(", text) is not None and in_package(path)


@functools.lru_cache(maxsize=256)
def _loaders_in(folder: str) -> tuple[_Loader, ...]:
    """The Python files directly in ``folder`` that name a native source file."""
    found = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
    except OSError:
        return ()
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        if any(suffix + quote in text for suffix in NATIVE_SUFFIXES for quote in ("'", '"')):
            found.append(_Loader(path, text))
    return tuple(found)


def _folders_up(folder: str) -> list[str]:
    """The source's folder and those above it, up to the first folder outside the package
    (where ``setup.py`` sits) or a repository's root."""
    chain: list[str] = []
    inside = False
    for _ in range(_LEVELS):
        chain.append(folder)
        has_init = os.path.isfile(os.path.join(folder, "__init__.py"))
        if (os.path.exists(os.path.join(folder, ".git")) or os.path.isfile(os.path.join(folder, "setup.py"))
                or (inside and not has_init)):
            break
        inside = inside or has_init
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return chain


def _file_verdict(name: str, loaders: tuple[_Loader, ...]) -> tuple[bool, str | None]:
    """(named anywhere, the opt-in when every line naming ``name`` runs under one)."""
    reasons = []
    named = False
    for loader in loaders:
        if name not in loader.text:
            continue
        for mention in loader.mentions(name):
            named = True
            why = loader.opt_in(mention)
            if why is None:
                return True, None
            reasons.append(f"{why} ({os.path.basename(loader.path)}:{mention.lineno})")
    return named, (reasons[0] if reasons else None)


def optional_build(path: str) -> str | None:
    """Why the native source at ``path`` is built only when the user opts in, or None: every
    Python line that names it (for a file no Python names, every line that names a source of
    its folder) runs under an opt-in."""
    folder, name = os.path.split(os.path.abspath(path))
    if not loaders_exist(folder):
        return None
    verdicts = _named_verdicts(folder)
    if name in verdicts:
        return verdicts[name]
    if verdicts and all(verdicts.values()):
        return next(iter(verdicts.values()))
    return None


def loaders_exist(folder: str) -> bool:
    return any(_loaders_in(above) for above in _folders_up(folder))


@functools.lru_cache(maxsize=1024)
def _named_verdicts(folder: str) -> dict[str, str | None]:
    """For each native source of ``folder`` that some loader names: the opt-in when every
    naming line runs under one, else None."""
    loaders = tuple(loader for above in _folders_up(folder) for loader in _loaders_in(above))
    try:
        sources = sorted(n for n in os.listdir(folder) if n.endswith(NATIVE_SUFFIXES))
    except OSError:
        return {}
    verdicts: dict[str, str | None] = {}
    for name in sources:
        named, why = _file_verdict(name, loaders)
        if named:
            verdicts[name] = why
    return verdicts
