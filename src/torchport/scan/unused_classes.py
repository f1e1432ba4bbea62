"""Findings in a class its package never uses: the rest of a module it imports one thing from.

A package often ships a whole vendored module and uses one name of it: cnstd imports only
``SigmoidBin`` from YOLOv7's ``loss.py``, and the ``ComputeLoss*`` training classes beside it (with
their ``.cuda()`` calls) never run.  An error or silent finding is lowered to info when all of these
hold.  Python can reach a class in more ways than any reading sees; each condition below closes one
that an independent review showed, and what is still open is listed in docs/precision/round44.md.

Read in the worker, on the whole file:

- the finding lies in the body of a method (past the first statement of its body, by column: a
  header's defaults run on import) of a public class at the top of a package module: not
  ``__init__.py``, ``__main__.py``, ``setup.py``, ``conftest.py`` or a test file, not ``Test*``;
- nothing in the class runs when the module is imported: its body holds only methods, a docstring
  and assignments without calls, and no decorator, default or annotation of its methods calls
  anything but binding decorators (``staticmethod``, ``property``, ``torch.no_grad()``, ...);
- the file names the class only inside the class itself (``super(ComputeLossOTA, self)``);
- the class has no decorator and no keyword (``metaclass=``), binds no ``__init_subclass__``, and
  its bases register no subclass: ``object``, ``torch.nn.Module`` or ``torch.autograd.Function``
  (the base's name bound once in the file, by an import of torch's), or a class of the file that
  qualifies the same way;
- the file does not look itself up by name (``globals()``, ``locals()``, ``vars()``, ``dir()``,
  ``eval``, ``exec``, ``sys.modules``, ``getmembers``, ``__subclasses__``, ``__dict__``,
  ``f_globals``, a module ``__getattr__``).

After every file is scanned:

- the package root's parent folder is scanned (a script beside the package may use the class);
- no other scanned file spells the class's name, nor does any text file below the scanned
  folders, scanned or not (``build/``, ignored files, ``README.md``, ``.pyi`` stubs, notebooks,
  configs);
- no scanned Python file finds classes or modules at run time: ``pkgutil`` walks,
  ``__subclasses__``, ``getmembers``, ``getmodule``, ``pydoc.locate``, Hydra's ``instantiate`` or
  ``_target_``, or ``import_module``, ``__import__``, ``run_module`` or ``sys.modules`` of a name
  not written out;
- no Python file takes the module whole: ``import a.b.loss``, ``from a.b import loss``,
  ``from .loss import *``, ``from a.b import *``, an attribute ``loss`` of an imported name or of
  the package (``M.loss``, ``b.loss``), ``getattr`` or ``vars`` of an imported name with a name not
  written out, ``getattr(package, "loss")``, a string ``".loss"`` or ``"a.b.loss"``, a bare
  ``"loss"`` in a lazy ``__init__``; and no text file names ``b.loss`` or ``b/loss``;
- a module of the same package that is not a test or an ``__init__.py`` imports other names from
  it (``from .loss import SigmoidBin``): the package chose what it uses of the module.

Incomplete evidence keeps the finding: a file that cannot be read or parsed, or is larger than
``max-file-bytes``.  Functions are read by uncalled_functions.py (round 63), which asks more: no
file below the scanned folders may name the function, nor take its module whole.  moshi's
``get_default_tts_model`` and kilosort's ``load_sorting``, public functions nothing in their package
calls that independent judges called right, keep their findings there.
"""
from __future__ import annotations

import ast
import bisect
import functools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from torchport.scan.cross_file_guards import (ScannedFiles, dotted_module, finds_at_run_time, from_module,
                                              is_test_path, named_in, naming_files)
from torchport.scan.detectors.syntax import character_column, nested_statements
from torchport.scan.files import Unreadable, regular_file_bytes
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import is_hot, still_hot
from torchport.scan.reachability import mentions_of, package_root, scopes_at
from torchport.scan.unimported_modules import FEW_NAMES

_SPECIAL_FILES = frozenset({"__init__.py", "__main__.py", "setup.py", "conftest.py"})
_TEST_FILE = re.compile(r"(?:^test_.*|.*_test)\.py$")
# Looked for by its literal pieces first (an alternation is tried at every position of the file);
# `model.eval()` is a method, not the builtin.
_LOOKS_ITSELF_UP_NEEDLES = ("globals()", "locals()", "vars()", "dir()", "eval(", "exec(", "sys.modules", "getmembers(",
                            "__subclasses__", "__dict__", "f_globals", "__getattr__")
_LOOKS_ITSELF_UP = re.compile(r"(?<![\w.])(?:globals|locals|vars|dir)\(\)|(?<![\w.])(?:eval|exec)\(|\bsys\.modules\b"
                              r"|\bgetmembers\(|__subclasses__|__dict__|\bf_globals\b|^def\s+__getattr__\(", re.MULTILINE)
_CLASS_HEADER = re.compile(r"^class[ \t]+(\w+)", re.MULTILINE)
# Bases that keep no registry of their subclasses, by their full names.
_INERT_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.autograd.Function",
                          "torch.autograd.function.Function"})
# Decorators (by their last name) that change how a method is bound or run, not who reaches it.
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "setter", "getter", "deleter",
                               "abstractmethod", "no_grad", "inference_mode", "enable_grad", "custom_fwd",
                               "custom_bwd", "once_differentiable"})
# A file whose plain strings may name modules to import (a lazy ``__init__``).
_LAZY_IMPORTS = (b"_import_structure", b"LazyModule", b"lazy_loader", b"lazy_import")
# Calls that may fetch a module by a plain name (``getattr(package, "loss")``).
_FETCHES_BY_NAME = frozenset({"getattr", "hasattr", "import_module", "__import__", "find_spec", "run_module"})
# Text files read for the class's name below the scanned folders, scanned or not.
_TEXT_FILES = (".py", ".pyi", ".pyx", ".md", ".rst", ".txt", ".ipynb", ".yaml", ".yml", ".json", ".toml", ".cfg",
               ".ini", ".sh")
_MAX_TEXT_FILE = 2_000_000
_MAX_TEXT_FILES = 20_000
_BASE_DEPTH = 4
# Not unimported_modules.WORD: this one also yields the name after leading digits (`3DModel` gives
# `DModel`), so more files count as spelling a class's name, and more findings stay, than with `\w+`.
_WORD = re.compile(rb"[A-Za-z_]\w*")
# How many files that may import a module are parsed for it, at most.
_MAX_IMPORTERS_READ = 200


def looks_itself_up(text: str) -> bool:
    """The module may reach its own names by a name not written out: ``globals()``, ``eval``,
    ``sys.modules``, ``getmembers``, ``__dict__``, a module ``__getattr__`` and the like."""
    return any(n in text for n in _LOOKS_ITSELF_UP_NEEDLES) and bool(_LOOKS_ITSELF_UP.search(text))


@dataclass(frozen=True)
class Candidate:
    """A finding lowered if the rest of the package never reaches ``name`` (a class of ``module``)."""
    index: int  # of the finding in its file's list
    name: str
    line: int
    module: tuple[str, ...]


def _test_file(path: str) -> bool:
    return is_test_path(path.replace(os.sep, "/")) or bool(_TEST_FILE.match(os.path.basename(path)))


def candidates(text: str, path: str, os_path: str, findings: list[Finding], taken: set[int]) -> list[Candidate]:
    """The file's error/silent findings (other than ``taken``) in methods of classes the file
    itself never uses."""
    hot = [(index, f) for index, f in enumerate(findings)
           if index not in taken and f.severity_cap != "info" and is_hot(f)]
    if not hot or os.path.basename(os_path) in _SPECIAL_FILES or _test_file(path):
        return []
    if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(os_path)), "__init__.py")):
        return []
    # A cheap look first: the nearest class header above each finding, named nowhere before it.
    headers = [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _CLASS_HEADER.finditer(text)]
    header_lines = [line for line, _ in headers]
    mentions: dict[str, list[int] | None] = {}
    hopeful = []
    for index, finding in hot:
        at = bisect.bisect_left(header_lines, finding.line) - 1
        if at < 0 or headers[at][1].startswith(("_", "Test")):
            continue
        line, name = headers[at]
        if name not in mentions:
            spelled = mentions_of(text, name)
            mentions[name] = spelled.lines if spelled is not None else None
        if mentions[name] and min(mentions[name] or [0]) == line:
            hopeful.append((index, finding))
    if not hopeful or looks_itself_up(text):
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines()
    classes = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    bindings = _bindings(tree, dotted_module(os_path)[1])
    module = dotted_module(os_path)[0]
    verdicts: dict[str, bool] = {}
    found = []
    for index, finding in hopeful:
        scopes = scopes_at(tree, finding.line)
        if len(scopes) < 2 or not isinstance(scopes[0], ast.ClassDef) or classes.get(scopes[0].name) is not scopes[0]:
            continue
        cls, method = scopes[0], scopes[1]
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.body:
            continue
        first = method.body[0]
        if (finding.line, finding.column) < (first.lineno, character_column(lines[first.lineno - 1], first.col_offset)):
            continue  # in the header: its defaults run on import
        if cls.name not in verdicts:
            inside = range(cls.lineno, (cls.end_lineno or cls.lineno) + 1)
            verdicts[cls.name] = (all(line in inside for line in mentions.get(cls.name) or [0])
                                  and _runs_nothing_on_import(cls) and _registers_nothing(cls, classes, bindings))
        if verdicts[cls.name]:
            found.append(Candidate(index, cls.name, cls.lineno, module))
    return found


def _plain(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return name in _PLAIN_DECORATORS


def _calls(nodes: list) -> bool:
    return any(isinstance(n, (ast.Call, ast.Lambda, ast.Await, ast.Yield, ast.NamedExpr))
               for node in nodes if node is not None for n in ast.walk(node))


def _runs_nothing_on_import(cls: ast.ClassDef) -> bool:
    """Whether creating the class runs none of its code: methods (binding decorators only, and
    defaults and annotations without calls), a docstring, and assignments without calls."""
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = statement.args
            if not all(_plain(d) for d in statement.decorator_list) or _calls(
                    [*arguments.defaults, *arguments.kw_defaults, statement.returns,
                     *(a.annotation for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs])]):
                return False
            if any(isinstance(d, ast.Call) and _calls([*d.args, *(k.value for k in d.keywords)])
                   for d in statement.decorator_list):
                return False
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            if _calls([statement.value]):
                return False
        elif not (isinstance(statement, (ast.Pass, ast.Expr)) and (
                isinstance(statement, ast.Pass) or isinstance(statement.value, ast.Constant))):
            return False
    return True


def _bindings(tree: ast.Module, package: tuple[str, ...]) -> dict[str, list[str]]:
    """Each name a statement of the module binds (in ``try``/``if`` blocks, and in the bodies of
    functions and classes too, which makes a base's name bound twice more often than Python would):
    the full dotted names of what imports bind to it, ``"<local>"`` for anything else (a class, a
    function, an assignment)."""
    found: dict[str, list[str]] = {}
    for statement in nested_statements(tree.body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                name = alias.asname or alias.name.split(".")[0]
                found.setdefault(name, []).append(alias.name if alias.asname else name)
        elif isinstance(statement, ast.ImportFrom):
            source = ".".join(from_module(statement, package))
            for alias in statement.names:
                found.setdefault(alias.asname or alias.name, []).append(f"{source}.{alias.name}")
        elif isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(statement.name, []).append("<local>")
        elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        found.setdefault(node.id, []).append("<local>")
    return found


def _registers_nothing(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], bindings: dict[str, list[str]],
                       depth: int = 0) -> bool:
    """Whether creating the class (or a subclass of it) registers nothing: no decorator, no
    metaclass, no ``__init_subclass__``, and bases that do the same."""
    if depth > _BASE_DEPTH or cls.decorator_list or cls.keywords:
        return False
    for statement in cls.body:
        bound = [statement.name] if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) else [
            n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        if "__init_subclass__" in bound:
            return False
    for base in cls.bases:
        spelled = ast.unparse(base)
        if spelled == "object":
            continue
        head, _, rest = spelled.partition(".")
        bound = bindings.get(head, [])
        if len(bound) != 1:
            return False  # unbound, or bound twice (`try: from mmengine... import BaseModule as Module`)
        if bound[0] != "<local>":
            if f"{bound[0]}.{rest}".rstrip(".") in _INERT_BASES:
                continue
            return False
        local = classes.get(spelled) if isinstance(base, ast.Name) else None
        if local is None or not _registers_nothing(local, classes, bindings, depth + 1):
            return False
    return True


def lower(work: list, results: list[tuple[FileResult, int]], whole_package: Callable[[str], bool],
          roots: list[str], max_bytes: int) -> None:
    """Lower the candidates whose class the rest of their package never reaches."""
    pending = [(result, c) for result, _ in results for c in result.unused_classes]
    if not pending:
        return
    by_display = {job.display: job.path for job in work}
    scanned = [os.path.abspath(r) for r in roots]
    scanned += [os.path.realpath(r) for r in scanned]
    reading = _Package(ScannedFiles(list(work), scanned), scanned, max_bytes)
    verdicts: dict[tuple[str, str], str | None] = {}
    pending = [(result, c) for result, c in pending
               if result.path in by_display and whole_package(by_display[result.path])
               and reading.parent_scanned(by_display[result.path])]
    reading.spell({c.name for _, c in pending})
    for result, candidate in pending:
        os_path = by_display[result.path]
        key = (os_path, candidate.name)
        if key not in verdicts:
            verdicts[key] = reading.unused(candidate, os_path, result.path)
    survivors = {name for (_, name), reason in verdicts.items() if reason is not None}
    named_on_disk = reading.named_on_disk(survivors)
    for result, candidate in pending:
        key = (by_display.get(result.path, ""), candidate.name)
        reason = verdicts.get(key)
        finding = result.findings[candidate.index]
        if reason is not None and candidate.name not in named_on_disk and still_hot(finding):
            finding.lower_to_info(reason)


class _Package:
    """What the scanned files (and the text files beside them) say about a class, each file read
    and parsed at most once."""

    def __init__(self, files: ScannedFiles, roots: list[str], max_bytes: int) -> None:
        self.files = files
        self.roots = roots
        self.max_bytes = max_bytes
        self._naming: list[str] | None = None
        self._dynamic: bool | None = None
        self._importers: dict[tuple[str, ...], str | None] = {}
        self._imports: dict[tuple[str, tuple[str, ...]], tuple[int, str] | tuple[()] | None] = {}
        self._spelled: dict[str, set[str] | None] = {}

    def spell(self, names: set[str]) -> None:
        """Find the scanned files that spell each of ``names`` (None for a name where a file cannot
        be read): name by name for a few, else by one reading of each file's words."""
        if len(names) <= FEW_NAMES:
            for name in names:
                paths = self.files.mentioning(name.encode())
                self._spelled[name] = set(paths) if paths is not None else None
            return
        spelled: dict[str, set[str] | None] = {name: set() for name in names}
        wanted = {name.encode(): name for name in names}
        for job in self.files.jobs:
            data = self.files.data(job.path)
            for word in (wanted.keys() if data is None else wanted.keys() & set(_WORD.findall(data))):
                found = spelled[wanted[word]]
                if data is None:
                    spelled[wanted[word]] = None
                elif found is not None:
                    found.add(job.path)
        self._spelled.update(spelled)

    def parent_scanned(self, os_path: str) -> bool:
        """Whether a scanned folder holds the package root's parent: a script beside the package
        may use its classes."""
        parent = os.path.dirname(package_root(os_path))
        return any(parent == root or parent.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots)

    def unused(self, candidate: Candidate, os_path: str, display: str) -> str | None:
        """The reason to lower the candidate, or None where the scanned files may reach its class."""
        spelled = self._spelled.get(candidate.name)
        if spelled is None or any(path != os_path for path in spelled):
            return None
        if self._finds_at_run_time():
            return None
        if self._naming is None:
            self._naming = naming_files(self.roots)
        if named_in(self._naming, candidate.name) or _module_named_in(self._naming, candidate.module):
            return None
        if candidate.module not in self._importers:
            self._importers[candidate.module] = self._importer(candidate.module, os_path)
        importer = self._importers[candidate.module]
        if importer is None:
            return None
        return (f"in `{candidate.name}` ({display}:{candidate.line}), a class no other file names, while the "
                f"package imports only other names from its module ({importer}): the package never runs it")

    def named_on_disk(self, names: set[str]) -> set[str]:
        """Which of ``names`` a text file below the scanned folders spells more than its own
        definition does: any file, scanned or not (``build/``, ignored files, docs, stubs).  Every
        name when the folders hold too many files to read."""
        if not names:
            return set()
        needles = {name: re.compile(rb"(?<![\w])" + re.escape(name.encode()) + rb"(?![\w])") for name in names}
        # a survivor is spelled in its own file only, which may spell it as often as it does
        own: dict[str, tuple[set[str], int]] = {}
        for name in names:
            spelled = self._spelled.get(name) or set()
            count = sum(len(needles[name].findall(self.files.data(p) or b"")) for p in spelled)
            own[name] = ({os.path.realpath(p) for p in spelled}, count)
        found: set[str] = set()
        for count, path in enumerate(_text_files(self.roots)):
            if count >= _MAX_TEXT_FILES:
                return set(names)
            try:
                data = regular_file_bytes(path, _MAX_TEXT_FILE)
            except Unreadable:
                return set(names)
            if data is None:
                continue
            for name, needle in needles.items():
                if name in found or name.encode() not in data:
                    continue
                own_paths, own_count = own[name]
                if len(needle.findall(data)) > (own_count if os.path.realpath(path) in own_paths else 0):
                    found.add(name)
        return found

    def _finds_at_run_time(self) -> bool:
        if self._dynamic is None:
            self._dynamic = any(self._dynamic_in(job.path) for job in self.files.jobs if job.path.endswith(".py"))
        return self._dynamic

    def _dynamic_in(self, path: str) -> bool:
        return finds_at_run_time(self.files.data(path))

    def _importer(self, module: tuple[str, ...], os_path: str) -> str | None:
        """"path:line imports a, b" for a module of the package that imports names from
        ``module``; None when none does or when any scanned Python file takes the module whole."""
        mentioning = self.files.mentioning(module[-1].encode())
        if mentioning is None:
            return None
        prefix = package_root(os_path).rstrip(os.sep) + os.sep
        found = None
        may_name = _may_name_module(module[-1])
        readable = [p for p in mentioning if p != os_path and p.endswith(".py")]
        readable = [p for p in readable if may_name.search(self.files.data(p) or b"import")]
        if len(readable) > _MAX_IMPORTERS_READ:
            return None  # too many to parse: keep the finding rather than slow the scan
        for path in readable:
            verdict = self._imports_of(path, module)
            if verdict is None:
                return None
            if (verdict and found is None and os.path.abspath(path).startswith(prefix)
                    and os.path.basename(path) != "__init__.py" and not self._test(path)):
                found = f"{self.files.display.get(path, path)}:{verdict[0]} imports {verdict[1]}"
        return found

    def _test(self, path: str) -> bool:
        return self.files.is_test(path) or bool(_TEST_FILE.match(os.path.basename(path)))

    def _imports_of(self, path: str, module: tuple[str, ...]) -> tuple[int, str] | tuple[()] | None:
        key = (path, module)
        if key not in self._imports:
            self._imports[key] = None
            try:
                too_large = os.path.getsize(path) > self.max_bytes
            except OSError:
                return None
            data = self.files.data(path) or b""
            plain = None if too_large else _plain_imports_of(data, module, dotted_module(path)[1])
            if plain is not None:
                self._imports[key] = plain
                return plain
            tree = None if too_large else self.files.tree(path)
            if tree is not None:
                try:
                    self._imports[key] = _imports_of(tree, module, dotted_module(path)[1], self.files.data(path) or b"")
                except RecursionError:
                    pass  # nested too deep to read: it may take the module whole
        return self._imports[key]


@functools.lru_cache(maxsize=256)
def _may_name_module(stem: str) -> re.Pattern[bytes]:
    """What a file must hold to import the module or take it whole, read before it is parsed: an
    import line or a parenthesized import naming it, an attribute ``.loss``, a string ending in it,
    or a call that may fetch it by a name not written out."""
    word = re.escape(stem.encode())
    return re.compile(rb"^[^\n#]*\b(?:import|from)\b[^\n]*(?<![\w])" + word + rb"(?![\w])"
                      rb"|\bimport\s*\([^)]*(?<![\w])" + word + rb"(?![\w])"
                      rb"|\\\n[^\n]*(?<![\w])" + word + rb"(?![\w])"
                      rb"|\.\s*" + word + rb"(?![\w])"
                      rb"|['\"][\w.]*(?<![\w])" + word + rb"['\"]"
                      rb"|\b(?:getattr|vars|import_module|__import__|find_spec)\(", re.MULTILINE)


def _text_files(roots: list[str]) -> Iterator[str]:
    seen: set[str] = set()
    for root in roots:
        if root in seen or not os.path.isdir(root):
            continue
        seen.add(root)
        for folder, folders, names in os.walk(root):
            folders[:] = [f for f in folders if not f.startswith(".") and f != "__pycache__"]  # .git, .venv
            yield from (os.path.join(folder, n) for n in names if n.endswith(_TEXT_FILES))


def _module_named_in(paths: list[str], module: tuple[str, ...]) -> bool:
    """Whether a notebook, config or entry point names the module by its path (``yolov7.loss``,
    ``yolov7/loss``), for something to import it whole."""
    if len(module) < 2:
        return False
    return named_in(paths, f"{module[-2]}.{module[-1]}") or named_in(paths, f"{module[-2]}/{module[-1]}")


_FROM_LINE = re.compile(rb"[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+([\w, \t]+?)[ \t]*(?:#[^\n]*)?")
# Anything that may take a module whole without naming it on an import line.
_MAY_FETCH = re.compile(rb"\b(?:getattr|vars|import_module|__import__|find_spec)\(|_import_structure|Lazy|lazy")


def _plain_imports_of(data: bytes, module: tuple[str, ...], package: tuple[str, ...]) -> tuple[int, str] | tuple[()] | None:
    """_imports_of read on the bytes, for the common file that names the module only in comments
    and in one-line imports of names from it (``from .common import SigmoidBin``); None when the
    bytes cannot tell, and the file is parsed."""
    if _MAY_FETCH.search(data):
        return None
    stem = module[-1].encode()
    first: tuple[int, str] | tuple[()] = ()
    for match in re.finditer(rb"(?<![\w])" + re.escape(stem) + rb"(?![\w])", data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.end())
        line = data[start:end if end >= 0 else len(data)]
        hash_at = line.find(b"#")
        if 0 <= hash_at < match.start() - start and not re.search(rb"['\"]", line[:hash_at]):
            continue  # in a comment
        found = _FROM_LINE.fullmatch(line)
        if found is None or found.group(1).split(b".")[-1] != stem:
            return None
        names = [n.strip().decode() for n in found.group(2).split(b",")]
        if stem.decode() in names:
            return None
        node = ast.parse(line.strip().decode()).body[0]
        if isinstance(node, ast.ImportFrom) and from_module(node, package) == module and not first:
            first = (data.count(b"\n", 0, start) + 1, ", ".join(names))
    return first


def _imports_of(tree: ast.Module, module: tuple[str, ...], package: tuple[str, ...],
                data: bytes) -> tuple[int, str] | tuple[()] | None:
    """(line, names) of the file's first import of names from ``module``, () if it has none, or
    None if it takes the module whole."""
    lazy = any(word in data for word in _LAZY_IMPORTS)
    imported = _imported_names(tree, package)
    first: tuple[int, str] | tuple[()] = ()
    for node in ast.walk(tree):
        if _takes_whole(node, module, package, lazy, imported):
            return None
        if isinstance(node, ast.ImportFrom) and not first and from_module(node, package) == module:
            first = (node.lineno, ", ".join(alias.name for alias in node.names))
    return first


def _imported_names(tree: ast.Module, package: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Every name an import binds in the file (anywhere in it), to the dotted name it stands for."""
    found: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = tuple(alias.name.split("."))
                else:
                    found[alias.name.split(".")[0]] = (alias.name.split(".")[0],)
        elif isinstance(node, ast.ImportFrom):
            source = from_module(node, package)
            for alias in node.names:
                found[alias.asname or alias.name] = (*source, alias.name)
    return found


def _dotted(node: ast.expr, imported: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """``M.loss`` with ``from pkg import models as M`` -> ("pkg", "models", "loss"); None unless
    the expression is an attribute chain from an imported name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imported:
        return None
    return (*imported[node.id], *parts)


def _takes_whole(node: ast.AST, module: tuple[str, ...], package: tuple[str, ...], lazy: bool,
                 imported: dict[str, tuple[str, ...]]) -> bool:
    """Whether ``node`` may give its file every name of ``module``."""
    stem = module[-1]
    if isinstance(node, ast.ImportFrom):
        names = [alias.name for alias in node.names]
        source = from_module(node, package)
        return ("*" in names and (source[-1:] == (stem,) or source == module[:-1])) or (
            source == module[:-1] and stem in names)
    if isinstance(node, ast.Import):
        return any(stem in alias.name.split(".") for alias in node.names)
    if isinstance(node, ast.Attribute) and node.attr == stem:
        owner = _dotted(node.value, imported)
        return (owner is not None and module[:len(owner)] == owner) or (
            len(module) > 1 and ast.unparse(node.value).split(".")[-1] == module[-2])
    if isinstance(node, ast.Call):
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if func in _FETCHES_BY_NAME and any(isinstance(a, ast.Constant) and a.value == stem for a in arguments):
            return True
        # getattr(M, name) or vars(M) of an imported name above the module: any of its modules
        if func in ("getattr", "vars") and node.args:
            owner = _dotted(node.args[0], imported)
            fetched = node.args[1] if func == "getattr" and len(node.args) > 1 else None
            return owner is not None and module[:len(owner)] == owner and not (
                isinstance(fetched, ast.Constant) and fetched.value != stem)
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        # "a.b.loss" or ".loss" names the module anywhere; a bare "loss" only in a lazy __init__
        return (re.fullmatch(r"[\w.]+", node.value) is not None and node.value.split(".")[-1] == stem
                and ("." in node.value or lazy))
    return False
