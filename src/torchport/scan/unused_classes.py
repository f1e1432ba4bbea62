"""Findings in a class its package never uses: the rest of a module it imports one thing from.

A package often ships a whole vendored module and uses one name of it: cnstd imports only
``SigmoidBin`` from YOLOv7's ``loss.py``, and the four ``ComputeLoss*`` training classes beside it
(with their ``.cuda()`` calls) never run.  An error or silent finding is lowered to info when all
of these hold.

Read in the worker, on the whole file:

- the finding lies in the body of a method (not the class body, not a method's header or
  defaults: those run on import) of a public class at the top of a package module: not
  ``__init__.py``, ``__main__.py``, ``setup.py``, ``conftest.py`` or a test file, not ``Test*``;
- the file names the class only inside the class itself (``super(ComputeLossOTA, self)``);
- neither the class nor the method carries a decorator that may register it (``staticmethod``,
  ``property``, ``torch.no_grad()`` and the like only), and the class has no keyword
  (``metaclass=``);
- its bases register no subclass: ``object``, ``torch.nn.Module`` and
  ``torch.autograd.Function`` (resolved through the file's imports, so a local ``Module`` is not
  torch's), or classes of the same file that qualify the same way and define no
  ``__init_subclass__``;
- the file does not look itself up by name (``globals()``, ``vars()``, ``sys.modules``,
  ``getmembers``, ``__subclasses__``, a module ``__getattr__``).

After every file is scanned, over the package scanned whole (the files below the same package
root):

- no other scanned file spells the class's name, nor does a notebook, config or entry-point file
  below the scanned folders;
- no file of the package finds modules or classes at run time (``pkgutil`` walks,
  ``__subclasses__``, ``import_module``, ``__import__`` or ``sys.modules`` of a name not written
  out);
- no file takes the module whole: ``import a.b.loss``, ``from a.b import loss``,
  ``from .loss import *``, an attribute ``b.loss``, or a string naming it (``".loss"``,
  ``"a.b.loss"``, or ``"loss"`` in a file that imports by name);
- a module of the package that is not a test or an ``__init__.py`` imports other names from it
  (``from .loss import SigmoidBin``): the package chose what it uses of the module.

Incomplete evidence keeps the finding: a file that cannot be read or parsed, or is larger than
``max-file-bytes``.  Functions are not read this way: a public function nothing in its package
calls is often what users call (moshi's ``get_default_tts_model``, kilosort's ``load_sorting``,
both judged correct by independent judges).
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from torchport.scan.cross_file_guards import (FINDS_MODULES, ScannedFiles, dotted_module, from_module,
                                              is_test_path, named_in, naming_files)
from torchport.scan.detectors.syntax import import_aliases
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import is_hot, still_hot
from torchport.scan.reachability import mentions_of, package_root, scopes_at

_SPECIAL_FILES = frozenset({"__init__.py", "__main__.py", "setup.py", "conftest.py"})
_LOOKS_ITSELF_UP = re.compile(r"\bglobals\(\)|\bvars\(\)|\bsys\.modules\b|\bgetmembers\(|__subclasses__"
                              r"|^def\s+__getattr__\(", re.MULTILINE)
_CLASS_HEADER = re.compile(r"^class[ \t]+(\w+)", re.MULTILINE)
# Bases that keep no registry of their subclasses, by their full names.
_INERT_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.autograd.Function",
                          "torch.autograd.function.Function"})
# Decorators (by their last name) that change how a method is bound or run, not who reaches it.
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "setter", "getter", "deleter",
                               "abstractmethod", "no_grad", "inference_mode", "enable_grad", "custom_fwd",
                               "custom_bwd", "once_differentiable"})
# A package that finds classes at run time (``nn.Module.__subclasses__()`` reaches every one), or
# modules by a name not written out (``sys.modules[name]``; ``sys.modules[__name__]`` is the file's own).
_FINDS_AT_RUN_TIME = re.compile(rb"__subclasses__")
_BUILT_IMPORT = re.compile(rb"\b(?:import_module|__import__|run_module|sys\.modules\[|sys\.modules\.get\()\s*([^)\]\s,]*)")
_OWN_MODULE = b"__name__"
_WRITTEN_OUT = re.compile(rb"""(['"])[\w.]*\1""")
# A file whose plain strings may name modules to import (a lazy ``__init__``).
_LAZY_IMPORTS = (b"_import_structure", b"LazyModule", b"lazy_loader", b"lazy_import")
# Calls that may fetch a module by a plain name (``getattr(package, "loss")``).
_FETCHES_BY_NAME = frozenset({"getattr", "hasattr", "import_module", "__import__", "find_spec", "run_module"})
_BASE_DEPTH = 4


@dataclass(frozen=True)
class Candidate:
    """A finding lowered if the rest of the package never reaches ``name`` (a class of ``module``)."""
    index: int  # of the finding in its file's list
    name: str
    line: int
    module: tuple[str, ...]


def candidates(text: str, path: str, os_path: str, findings: list[Finding], taken: set[int]) -> list[Candidate]:
    """The file's error/silent findings (other than ``taken``) in methods of classes the file
    itself never uses."""
    hot = [(index, f) for index, f in enumerate(findings)
           if index not in taken and f.severity_cap != "info" and is_hot(f)]
    if not hot or os.path.basename(os_path) in _SPECIAL_FILES or is_test_path(path):
        return []
    if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(os_path)), "__init__.py")):
        return []
    # A cheap look first: the nearest class header above each finding, named nowhere before it.
    headers = [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _CLASS_HEADER.finditer(text)]
    hopeful = []
    for index, finding in hot:
        above = [h for h in headers if h[0] < finding.line]
        if not above or above[-1][1].startswith(("_", "Test")):
            continue
        mentions = mentions_of(text, above[-1][1])
        if mentions is not None and min(mentions.lines) == above[-1][0]:
            hopeful.append((index, finding))
    if not hopeful or _LOOKS_ITSELF_UP.search(text):
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    classes: dict[str, ast.ClassDef | None] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            classes[statement.name] = None if statement.name in classes else statement  # None: defined twice
    aliases = import_aliases(tree.body)
    module = dotted_module(os_path)[0]
    found = []
    for index, finding in hopeful:
        scopes = scopes_at(tree, finding.line)
        if len(scopes) < 2 or not isinstance(scopes[0], ast.ClassDef) or classes.get(scopes[0].name) is None:
            continue
        cls, method = scopes[0], scopes[1]
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.body or (
                finding.line < method.body[0].lineno) or not all(_plain(d) for d in method.decorator_list):
            continue
        mentions = mentions_of(text, cls.name)
        if mentions is None or not all(cls.lineno <= line <= (cls.end_lineno or 0) for line in mentions.lines):
            continue
        if _registers_nothing(cls, classes, aliases):
            found.append(Candidate(index, cls.name, cls.lineno, module))
    return found


def _plain(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return name in _PLAIN_DECORATORS


def _registers_nothing(cls: ast.ClassDef, classes: dict[str, ast.ClassDef | None], aliases: dict[str, str],
                       depth: int = 0) -> bool:
    """Whether creating the class (or a subclass of it) registers nothing: no decorator, no
    metaclass, no ``__init_subclass__``, and bases that do the same."""
    if depth > _BASE_DEPTH or cls.decorator_list or cls.keywords:
        return False
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init_subclass__"
           for s in cls.body):
        return False
    for base in cls.bases:
        spelled = ast.unparse(base)
        if spelled == "object":
            continue
        head, _, rest = spelled.partition(".")
        if head in aliases:
            if f"{aliases[head]}.{rest}".rstrip(".") in _INERT_BASES:
                continue
            return False
        local = classes.get(spelled) if isinstance(base, ast.Name) else None
        if local is None or not _registers_nothing(local, classes, aliases, depth + 1):
            return False
    return True


def lower(work: list, results: list[tuple[FileResult, int]], whole_package: Callable[[str], bool],
          roots: list[str], max_bytes: int) -> None:
    """Lower the candidates whose class the rest of their package never reaches."""
    pending = [(result, c) for result, _ in results for c in result.unused_classes]
    if not pending:
        return
    by_display = {job.display: job.path for job in work}
    files = ScannedFiles(list(work), roots)
    reading = _Package(files, roots, max_bytes)
    verdicts: dict[tuple[str, str], str | None] = {}
    for result, candidate in pending:
        os_path = by_display.get(result.path)
        if os_path is None or not whole_package(os_path):
            continue
        key = (os_path, candidate.name)
        if key not in verdicts:
            verdicts[key] = reading.unused(candidate, os_path, result.path)
        finding = result.findings[candidate.index]
        if verdicts[key] is not None and still_hot(finding):
            finding.lower_to_info(verdicts[key])


class _Package:
    """What the scanned files say about a class, each file read and parsed at most once."""

    def __init__(self, files: ScannedFiles, roots: list[str], max_bytes: int) -> None:
        self.files = files
        self.roots = roots
        self.max_bytes = max_bytes
        self._naming: list[str] | None = None
        self._dynamic: dict[str, bool] = {}

    def unused(self, candidate: Candidate, os_path: str, display: str) -> str | None:
        """The reason to lower the candidate, or None where anything may reach its class."""
        spelled = self.files.mentioning(candidate.name.encode())
        if spelled is None or any(path != os_path for path in spelled):
            return None
        if self._naming is None:
            self._naming = naming_files(self.roots)
        if named_in(self._naming, candidate.name):
            return None
        root = package_root(os_path)
        if self._finds_at_run_time(root):
            return None
        importer = self._importer(candidate.module, os_path, root)
        if importer is None:
            return None
        return (f"in `{candidate.name}` ({display}:{candidate.line}), a class no other file names, while the "
                f"package imports only other names from its module ({importer}): the package never runs it")

    def _in_package(self, root: str) -> list[str]:
        prefix = root.rstrip(os.sep) + os.sep
        return [job.path for job in self.files.jobs
                if job.path.endswith(".py") and os.path.abspath(job.path).startswith(prefix)]

    def _finds_at_run_time(self, root: str) -> bool:
        if root not in self._dynamic:
            self._dynamic[root] = any(self._dynamic_in(path) for path in self._in_package(root))
        return self._dynamic[root]

    def _dynamic_in(self, path: str) -> bool:
        data = self.files.data(path)
        if data is None:
            return True
        if FINDS_MODULES.search(data) or _FINDS_AT_RUN_TIME.search(data):
            return True
        return any(not _WRITTEN_OUT.fullmatch(m.group(1)) and m.group(1) != _OWN_MODULE
                   for m in _BUILT_IMPORT.finditer(data))

    def _importer(self, module: tuple[str, ...], os_path: str, root: str) -> str | None:
        """"path:line imports a, b" for a module of the package that imports names from
        ``module``; None when none does or when any file takes the module whole."""
        stem = module[-1]
        mentioning = self.files.mentioning(stem.encode())
        if mentioning is None:
            return None
        prefix = root.rstrip(os.sep) + os.sep
        found = None
        for path in mentioning:
            if path == os_path or not path.endswith(".py"):
                continue  # files outside the package may still take the module whole
            try:
                too_large = os.path.getsize(path) > self.max_bytes
            except OSError:
                return None
            tree = None if too_large else self.files.tree(path)
            if tree is None:
                return None
            verdict = _imports_of(tree, module, dotted_module(path)[1], self.files.data(path) or b"")
            if verdict is None:
                return None
            if (verdict and found is None and os.path.abspath(path).startswith(prefix)
                    and os.path.basename(path) != "__init__.py" and not self.files.is_test(path)):
                found = f"{self.files.display.get(path, path)}:{verdict[0]} imports {verdict[1]}"
        return found


def _imports_of(tree: ast.Module, module: tuple[str, ...], package: tuple[str, ...],
                data: bytes) -> tuple[int, str] | tuple[()] | None:
    """(line, names) of the file's first import of names from ``module``, () if it has none, or
    None if it takes the module whole."""
    lazy = any(word in data for word in _LAZY_IMPORTS)
    first: tuple[int, str] | tuple[()] = ()
    for node in ast.walk(tree):
        if _takes_whole(node, module, package, lazy):
            return None
        if isinstance(node, ast.ImportFrom) and not first and from_module(node, package) == module:
            first = (node.lineno, ", ".join(alias.name for alias in node.names))
    return first


def _takes_whole(node: ast.AST, module: tuple[str, ...], package: tuple[str, ...], lazy: bool) -> bool:
    """Whether ``node`` may give its file every name of ``module``."""
    stem = module[-1]
    if isinstance(node, ast.ImportFrom):
        names = [alias.name for alias in node.names]
        source = from_module(node, package)
        return ("*" in names and source[-1:] == (stem,)) or (source == module[:-1] and stem in names)
    if isinstance(node, ast.Import):
        return any(stem in alias.name.split(".") for alias in node.names)
    if isinstance(node, ast.Attribute):
        return node.attr == stem and len(module) > 1 and ast.unparse(node.value).split(".")[-1] == module[-2]
    if isinstance(node, ast.Call):
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return func in _FETCHES_BY_NAME and any(
            isinstance(a, ast.Constant) and a.value == stem for a in [*node.args, *(k.value for k in node.keywords)])
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        # "a.b.loss" or ".loss" names the module anywhere; a bare "loss" only in a lazy __init__
        return (re.fullmatch(r"[\w.]+", node.value) is not None and node.value.split(".")[-1] == stem
                and ("." in node.value or lazy))
    return False
