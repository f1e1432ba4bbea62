"""CUDA guards that lie in another file than the finding they guard (round 33).

scan reads one file at a time; these two passes run after every file is scanned, over the
packages scanned whole, and lower an error or silent finding to info only where every other
scanned file agrees:

- **a module imported only under a CUDA check**: in the other scanned files (tests aside: they are
  not a user's path), every import of the module, and every other use of its name, lies in the
  body of ``if torch.cuda.is_available():`` (or a test that is false wherever ``is_available()``
  is), and there is at least one such import.  A user without CUDA never imports it (hippynn's
  Triton and CuPy kernel modules).
- **a flag that only CUDA turns on, stored anywhere in the class hierarchy**: ``if self.use_gpu:``
  in a method, where every store of it in the class, its bases and the classes derived from it
  (found by name across the scanned files) keeps it false without CUDA (``self.use_gpu =
  torch.cuda.is_available() and use_gpu``, or a store followed by ``assert not self.use_gpu or
  torch.cuda.is_available()``), and no scanned file stores another object's ``use_gpu`` or holds
  the name in a string (an option, a config key): torchreid's engines, whose base class narrows
  the flag.

Incomplete evidence keeps the finding: a name defined twice, a file that cannot be read or
parsed, attributes set by name (``setattr``, ``__dict__``) in a file of the hierarchy, a mention
of the module outside an import or a CUDA check.
"""
from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path

from torchport.scan.detectors.shared import is_test_file
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import worst_of

# Attributes set by name: ``setattr(self, k, v)``, ``self.__dict__.update(kw)``, ``vars(self)[k] = v``.
_SETS_BY_NAME = re.compile(rb"\bsetattr\(|__dict__\s*(?:\.update|\[[^\]]*\]\s*=[^=])|\bvars\([^)]*\)\s*(?:\.update|\[)")
_CUDA_QUERY = re.compile(r"torch\.cuda\.(?:is_available|device_count)\(\)")
_IF_LINE = re.compile(r"([ \t]*)(?:el)?if\b")
_IMPORT_LINE = re.compile(r"[ \t]*(?:from\s+([\w.]+)\s+)?import\s+([\w., \t]+)")
# ``self.flag = torch.cuda.is_available() ...``, ``... and torch.cuda.is_available()``, or
# ``assert not self.flag or torch.cuda.is_available()``, read on the line of the query.
_CUDA_FLAG = re.compile(r"self\.(\w+)\s*=\s*\(?\s*torch\.cuda\.(?:is_available|device_count)\(\)"
                        r"|self\.(\w+)\s*=.*\band\s+\(?\s*torch\.cuda\.is_available\(\)"
                        r"|not\s+self\.(\w+)\s+or\s+torch\.cuda\.is_available\(\)")
# How many lines under a CUDA check are read for imports.
_BLOCK_LINES = 40
_MAIN_TEST = re.compile(rb"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", re.MULTILINE)


def _source(node: ast.AST) -> str:
    return ast.unparse(node)


def cuda_present(test: ast.expr) -> bool:
    """Whether ``test`` is false wherever CUDA is absent: ``torch.cuda.is_available()``,
    ``torch.cuda.device_count() > 0``, or an ``and`` with such an operand."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(cuda_present(value) for value in test.values)
    if isinstance(test, ast.Call) and not test.args and not test.keywords:
        return _source(test.func) == "torch.cuda.is_available"
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call)
            and _source(test.left) == "torch.cuda.device_count()"):
        bound = test.comparators[0]
        if isinstance(bound, ast.Constant) and isinstance(bound.value, int) and not isinstance(bound.value, bool):
            return ((isinstance(test.ops[0], ast.Gt) and bound.value >= 0)
                    or (isinstance(test.ops[0], ast.GtE) and bound.value >= 1))
    return False


def hints(text: str) -> tuple[list[str], list[str]]:
    """What one file may contribute, read in the workers: the words of the imports in the lines
    under its CUDA checks (module names), and the ``self`` attributes it stores from one."""
    imported: set[str] = set()
    flags: set[str] = set()
    lines: list[str] | None = None
    for query in _CUDA_QUERY.finditer(text):
        start = text.rfind("\n", 0, query.start()) + 1
        end = text.find("\n", query.end())
        line = text[start:end if end >= 0 else len(text)]
        flags.update(name for match in _CUDA_FLAG.finditer(line) for name in match.groups() if name)
        opening = _IF_LINE.match(line)
        if opening is None:
            continue
        if lines is None:
            lines = text.splitlines()
        number = text.count("\n", 0, start)
        indent = len(opening.group(1).expandtabs())
        for below in lines[number + 1:number + 1 + _BLOCK_LINES]:
            if below.strip() and len(below) - len(below.lstrip()) <= indent:
                break
            found = _IMPORT_LINE.match(below)
            if found:
                imported.update(re.findall(r"\w+", f"{found.group(1) or ''} {found.group(2)}"))
    return sorted(imported - {"import", "as"}), sorted(flags)


def _hot(finding: Finding) -> bool:
    return finding.severity_cap is None and worst_of(finding) in ("error", "silent")


def _lower(finding: Finding, reason: str) -> None:
    finding.severity_cap = "info"
    finding.cap_reason = reason


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _ancestors(node: ast.AST, parents: dict[int, ast.AST]) -> Iterator[tuple[ast.AST, ast.AST]]:
    """(ancestor, the child of it on the way to ``node``), innermost first."""
    child = node
    while id(child) in parents:
        parent = parents[id(child)]
        yield parent, child
        child = parent


# -- modules imported only under a CUDA check ---------------------------------------------------

def _dotted(os_path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The module's dotted name from its package's root (``("hippynn", "custom_kernels", "env_cupy")``),
    and the package its relative imports start from."""
    folder, name = os.path.split(os.path.abspath(os_path))
    package: list[str] = []
    while os.path.exists(os.path.join(folder, "__init__.py")):
        folder, part = os.path.split(folder)
        if not part:
            break
        package.insert(0, part)
    module = tuple(package) if name == "__init__.py" else (*package, name[:-3])
    return module, tuple(package)


def _imported(node: ast.Import | ast.ImportFrom, package: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The modules an import statement may load (each imported name taken as a module), relative
    imports read from ``package``."""
    if isinstance(node, ast.Import):
        return {tuple(alias.name.split(".")) for alias in node.names}
    base: tuple[str, ...] = ()
    if node.level:
        base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
    module = base + tuple(node.module.split(".")) if node.module else base
    return {module} | {module + (alias.name,) for alias in node.names}


def _under_cuda_check(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    return any(isinstance(ancestor, ast.If) and child in ancestor.body and cuda_present(ancestor.test)
               for ancestor, child in _ancestors(node, parents))


def lower_modules_imported_under_cuda(work: list, results: list[tuple[FileResult, int]],
                                      whole_package: Callable[[str], bool]) -> None:
    """Lower the findings of modules the rest of the package imports only under a CUDA check."""
    gated = {word for result, _ in results for word in result.cuda_gated_imports}
    if not gated:
        return
    by_display = {job.display: job.path for job in work}
    files = _Files([job for job in work if job.path.endswith(".py")])
    for result, _ in results:
        os_path = by_display.get(result.path, "")
        if (not os_path.endswith(".py") or os.path.splitext(os.path.basename(os_path))[0] not in gated
                or os.path.basename(os_path) == "__init__.py" or is_test_file(result.path)
                or not whole_package(os_path)):
            continue
        hot = [f for f in result.findings if _hot(f)]
        if not hot:
            continue
        module = _dotted(os_path)[0]
        data = files.data(os_path)
        if len(module) < 2 or data is None or _MAIN_TEST.search(data):
            continue  # outside a package, unreadable, or also run as a script
        found = _guarded_imports(module, os_path, files)
        if not found:
            continue
        where = ", ".join(found[:3]) + (" ..." if len(found) > 3 else "")
        for finding in hot:
            _lower(finding, f"module {'.'.join(module)} is imported only under a CUDA check ({where}): a user "
                            "without CUDA never runs it")


def _word_tokens(data: bytes, stem: str) -> tuple[int, bool] | None:
    """How many name tokens spell ``stem``, and whether a string holds it as a word."""
    word = re.compile(r"(?<![\w])" + re.escape(stem) + r"(?![\w])")
    names, in_string = 0, False
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type == tokenize.NAME and token.string == stem:
                names += 1
            elif token.type == tokenize.STRING and word.search(token.string):
                in_string = True
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return names, in_string


def _guarded_imports(module: tuple[str, ...], os_path: str, files: _Files) -> list[str] | None:
    """Where the package's other files (tests aside) import ``module``, when every mention of its
    name there is an import of it or a use, each under a CUDA check; None otherwise."""
    stem = module[-1]
    needle = re.compile(rb"(?<![\w])" + re.escape(stem.encode()) + rb"(?![\w])")
    checks: list[str] = []
    for job in files.jobs:
        if job.path == os_path or is_test_file(job.display):
            continue  # a test's imports are not a user's path
        data = files.data(job.path)
        if data is None:
            return None
        if not needle.search(data):
            continue
        if b"is_available" not in data and b"device_count" not in data:
            return None  # named there, and nothing there could guard it
        tokens = _word_tokens(data, stem)
        tree = files.tree(job.path)
        if tokens is None or tokens[1] or tree is None:
            return None
        package = _dotted(job.path)[1]
        parents = _parents(tree)
        accounted = 0
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                spelled = _spelled_in_import(node, stem)
                if not spelled:
                    continue
                if module not in _imported(node, package) or not _under_cuda_check(node, parents):
                    return None  # another module of that name, or an import a user without CUDA runs
                accounted += spelled
                checks.append(f"{job.display}:{node.lineno}")
            elif (isinstance(node, ast.Name) and node.id == stem) or (
                    isinstance(node, ast.Attribute) and node.attr == stem):
                if not _under_cuda_check(node, parents):
                    return None
                accounted += 1
        if accounted != tokens[0]:
            return None  # a definition, a keyword, an alias: a mention not accounted for
    return checks or None


def _spelled_in_import(node: ast.Import | ast.ImportFrom, stem: str) -> int:
    """How often the statement spells ``stem`` as a name token (the alias it binds included)."""
    words = [part for alias in node.names for part in alias.name.split(".")]
    words += [alias.asname for alias in node.names if alias.asname]
    if isinstance(node, ast.ImportFrom) and node.module:
        words += node.module.split(".")
    return words.count(stem)


# -- a flag that only CUDA turns on, stored elsewhere in the class hierarchy ---------------------

def _tested_flag(test: ast.expr) -> str | None:
    """``self.use_gpu``, alone or as an operand of an ``and``: the attribute's name."""
    operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for operand in operands:
        if (isinstance(operand, ast.Attribute) and isinstance(operand.value, ast.Name)
                and operand.value.id == "self"):
            return operand.attr
    return None


def _flag_guards(tree: ast.Module, line: int) -> list[tuple[str, ast.ClassDef, int]]:
    """(flag, class, line of the if) for each ``if self.flag:`` whose body holds ``line``, in a
    method of a module-level class."""
    found = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or not cls.lineno <= line <= (cls.end_lineno or cls.lineno):
            continue
        for node in ast.walk(cls):
            if not isinstance(node, ast.If) or not node.body:
                continue
            if node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
                flag = _tested_flag(node.test)
                if flag is not None:
                    found.append((flag, cls, node.lineno))
    return found


def _stores(cls: ast.ClassDef, flag: str) -> Iterator[tuple[ast.AST, ast.expr | None, ast.AST]]:
    """(store statement, the value stored or None when unknown, its function) for ``self.flag``
    in the class's methods and ``flag = ...`` in its body."""
    for statement in cls.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            named = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id == flag for t in named):
                # an annotated field, or any field of a decorated class (a dataclass), is set by
                # whoever builds the object: its value here is only a default
                field = isinstance(statement, ast.AnnAssign) or bool(cls.decorator_list)
                yield statement, None if field else statement.value, cls
    for function in cls.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets, value = [node.target], (node.value if isinstance(node, ast.AnnAssign) else None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)):
                targets = [node.target] if not isinstance(node, (ast.With, ast.AsyncWith)) else [
                    i.optional_vars for i in node.items if i.optional_vars is not None]
            for target in targets:
                for leaf in ast.walk(target):
                    if (isinstance(leaf, ast.Attribute) and leaf.attr == flag and isinstance(leaf.value, ast.Name)
                            and leaf.value.id == "self" and isinstance(leaf.ctx, ast.Store)):
                        yield node, (value if target is leaf else None), function


def _off_without_cuda(value: ast.expr | None, statement: ast.AST, function: ast.AST, flag: str) -> bool:
    """Whether the stored value is false wherever CUDA is absent: a CUDA check, ``False``/``None``/``0``,
    or anything the very next statement asserts on (``assert not self.flag or torch.cuda.is_available()``)."""
    if value is not None and (cuda_present(value) or (isinstance(value, ast.Constant) and not value.value)):
        return True
    body = getattr(function, "body", [])
    if statement not in body:
        return False
    following = body[body.index(statement) + 1:body.index(statement) + 2]
    return any(isinstance(s, ast.Assert) and _asserts_cuda_for(s.test, flag) for s in following)


def _asserts_cuda_for(test: ast.expr, flag: str) -> bool:
    """``not self.flag or torch.cuda.is_available()`` (either order)."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) == 2):
        return False
    negated = [v for v in test.values if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)
               and _source(v.operand) == f"self.{flag}"]
    return len(negated) == 1 and any(cuda_present(v) for v in test.values if v is not negated[0])


class _Files:
    """The scanned Python files, each read and parsed at most once, and their module-level classes
    found by name on demand."""

    def __init__(self, jobs: list) -> None:
        self.jobs = jobs
        self._data: dict[str, bytes | None] = {}
        self._trees: dict[str, ast.Module | None] = {}

    def data(self, os_path: str) -> bytes | None:
        if os_path not in self._data:
            try:
                self._data[os_path] = Path(os_path).read_bytes()
            except OSError:
                self._data[os_path] = None
        return self._data[os_path]

    def tree(self, os_path: str) -> ast.Module | None:
        if os_path not in self._trees:
            data = self.data(os_path)
            try:
                self._trees[os_path] = ast.parse(data) if data is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._trees[os_path] = None
        return self._trees[os_path]

    def files_matching(self, pattern: re.Pattern[bytes]) -> list[str] | None:
        found = []
        for job in self.jobs:
            data = self.data(job.path)
            if data is None:
                return None
            if pattern.search(data):
                found.append(job.path)
        return found

    def defined(self, name: str) -> list[tuple[str, ast.ClassDef]] | None:
        files = self.files_matching(re.compile(rb"^class\s+" + re.escape(name.encode()) + rb"\b", re.MULTILINE))
        if files is None:
            return None
        found = []
        for os_path in files:
            tree = self.tree(os_path)
            if tree is None:
                return None
            found += [(os_path, c) for c in tree.body if isinstance(c, ast.ClassDef) and c.name == name]
        return found

    def derived(self, name: str) -> list[tuple[str, ast.ClassDef]] | None:
        files = self.files_matching(re.compile(rb"^class\s+\w+\s*\([^)]*\b" + re.escape(name.encode()) + rb"\b",
                                               re.MULTILINE))
        if files is None:
            return None
        found = []
        for os_path in files:
            tree = self.tree(os_path)
            if tree is None:
                return None
            found += [(os_path, c) for c in tree.body if isinstance(c, ast.ClassDef)
                      and any(_base_name(b) == name for b in c.bases)]
        return found


def _base_name(base: ast.expr) -> str | None:
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def _hierarchy(classes: _Files, os_path: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]] | None:
    """The class, its bases and the classes derived from it, each defined once in the scanned files."""
    members: dict[str, tuple[str, ast.ClassDef]] = {cls.name: (os_path, cls)}
    pending = [(os_path, cls)]
    while pending:
        _, current = pending.pop()
        for base in current.bases:
            name = _base_name(base)
            if name is None or name in members or name in ("object", "Module", "ABC", "Generic"):
                continue
            defined = classes.defined(name)
            if defined is None or len(defined) > 1:
                return None
            if defined:  # a base from outside the scanned files stores nothing we could read
                members[name] = defined[0]
                pending.append(defined[0])
    pending = [(os_path, cls)]
    while pending:
        _, current = pending.pop()
        derived = classes.derived(current.name)
        if derived is None:
            return None
        for found in derived:
            if found[1].name in members and members[found[1].name][1] is not found[1]:
                return None  # two classes of one name
            if found[1].name not in members:
                members[found[1].name] = found
                pending.append(found)
    if len(members) > 40:
        return None
    return list(members.values())


def lower_flags_stored_elsewhere(work: list, results: list[tuple[FileResult, int]],
                                 whole_package: Callable[[str], bool]) -> None:
    """Lower findings under ``if self.flag:`` where only another class of the hierarchy stores the
    flag, always false without CUDA."""
    flags = {flag for result, _ in results for flag in result.cuda_flags}
    if not flags:
        return
    tested = re.compile(rb"\bself\.(?:" + b"|".join(re.escape(f.encode()) for f in sorted(flags)) + rb")\b")
    by_display = {job.display: job.path for job in work}
    classes = _Files([job for job in work if job.path.endswith(".py")])
    decided: dict[tuple[str, str, int], str | None] = {}
    for result, _ in results:
        os_path = by_display.get(result.path, "")
        hot = [f for f in result.findings if _hot(f)]
        if not hot or not os_path.endswith(".py") or not whole_package(os_path):
            continue
        data = classes.data(os_path)
        if data is None or not tested.search(data):
            continue
        tree = classes.tree(os_path)
        if tree is None:
            continue
        for finding in hot:
            for flag, cls, if_line in _flag_guards(tree, finding.line):
                if flag not in flags:
                    continue
                key = (os_path, flag, cls.lineno)
                if key not in decided:
                    decided[key] = _stored_only_off_without_cuda(classes, os_path, cls, flag, result.path)
                where = decided[key]
                if where is not None:
                    _lower(finding, f"under `if self.{flag}:` (line {if_line}), a flag that every store "
                                    f"in the class hierarchy keeps false where CUDA is absent ({where})")
                    break


def _stored_only_off_without_cuda(classes: _Files, os_path: str, cls: ast.ClassDef, flag: str,
                                  display: str) -> str | None:
    """Where the flag is stored (``file:line``) when every store keeps it false without CUDA and one
    is a CUDA check (or asserted on one); None otherwise."""
    members = _hierarchy(classes, os_path, cls)
    if members is None:
        return None
    word = re.escape(flag.encode())
    elsewhere = classes.files_matching(re.compile(rb"(?<![\w])" + word + rb"(?![\w])"))
    if elsewhere is None:
        return None
    if any(_SETS_BY_NAME.search(classes.data(path) or b"") for path in {path for path, _ in members}):
        return None
    for path in elsewhere:
        data = classes.data(path) or b""
        # ``obj.flag = ...`` on anything but self, or the flag named in a string (an option, a setattr)
        if re.search(rb"(?<!self)\." + word + rb"\s*(?:=[^=]|:[^\n=]*=)", data) or re.search(
                rb"""["'](?:--?)?""" + word + rb"""["']""", data):
            return None
    places: list[str] = []
    checked = False
    for path, member in members:
        for statement, value, function in _stores(member, flag):
            if not _off_without_cuda(value, statement, function, flag):
                return None
            checked = checked or not (isinstance(value, ast.Constant) and not value.value)
            places.append(f"{os.path.basename(path)}:{getattr(statement, 'lineno', member.lineno)}")
    if not places or not checked:
        return None
    return ", ".join(places[:3]) + (" ..." if len(places) > 3 else "")
