"""Test helpers that only tests running with CUDA call, read across files.

openfold3's ``tests/utils/data_utils.py`` builds inputs with ``.cuda()``; its only callers are
``TestKernels`` (under ``@compare_utils.skip_unless_cuda_available()``) and a method of
``TestLMA`` under the same decorator, in other files.  Where CUDA is absent those tests skip, so
the helper never runs there.  The analyzer already reads a helper its own file calls only from such
tests; this pass reads helpers that other files call.

A finding is lowered to info when it lies in a function at the top of a test module (a file under a
test folder) that is not a test and has no decorator (fixtures have one; pytest calls hooks by a name
no test spells), and:

- its own module names it nowhere but at its ``def``;
- every other scanned file that spells its name uses it (as a name, an attribute or a string) only
  inside a test that runs only where CUDA is present (the spans the analyzer found), apart from
  importing it under its own name; a use in a parameter default or in a pytest hook
  (``pytest_generate_tests`` runs at collection, skip or not) is outside every test, and so is an
  import that renames it;
- no scanned file that names its module reaches attributes by computed names (``getattr`` with a
  name that is not a literal, ``vars()``, ``globals()``, ``__dict__``, ``import_module``);
- and at least one such use exists: a helper nothing uses is another pass's question.

Callers the scan does not read (excluded folders, notebooks) are not seen.
"""
from __future__ import annotations

import ast
import os
import re

from torchport.scan.cross_file_guards import ScannedFiles
from torchport.scan.detectors.syntax import walk_nodes
from torchport.scan.files import any_word
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import is_hot

_Function = ast.FunctionDef | ast.AsyncFunctionDef
# Where a file may reach a module's functions by a name it computes.
_COMPUTED_ACCESS = re.compile(rb"\bgetattr\b|\bvars\b|\bglobals\b|__dict__|\bimport_module\b|__import__")
# A line no test holds: a use at import or collection time, or an import that renames the helper.
_OUTSIDE = 0


def lower_helpers_of_cuda_tests(work: list, results: list[tuple[FileResult, int]], roots: list[str]) -> None:
    by_display = {job.display: job.path for job in work}
    spans = {by_display[r.path]: r.cuda_only_tests for r, _ in results if r.cuda_only_tests and r.path in by_display}
    if not spans:
        return
    files = ScannedFiles(work, roots)
    candidates: list[tuple[str, _Function, list[Finding]]] = []
    for result, _ in results:
        os_path = by_display.get(result.path)
        hot = [f for f in result.findings if is_hot(f)]
        if not hot or os_path is None or not files.is_test(os_path):
            continue
        tree = files.tree(os_path)
        for function in tree.body if tree is not None else []:
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and not function.decorator_list \
                    and not function.name.startswith("test"):
                low, high = function.lineno, function.end_lineno or function.lineno
                inside = [f for f in hot if low <= f.line <= high]
                if inside:
                    candidates.append((os_path, function, inside))
    if not candidates:
        return
    uses = _uses_in_every_file(files, {function.name for _, function, _ in candidates})
    if uses is None:
        return  # a file could not be read: it may call any of them
    computed = _modules_reached_by_computed_names(files, {os_path for os_path, _, _ in candidates})
    for os_path, function, inside in candidates:
        if os_path in computed:
            continue
        callers = _only_cuda_test_callers(files, spans, uses, os_path, function)
        if callers:
            for finding in inside:
                finding.lower_to_info(f"a test helper that only tests running only where CUDA is present use "
                                      f"({callers})")


def _uses_in_every_file(files: ScannedFiles, names: set[str]) -> dict[str, dict[str, list[int]]] | None:
    """file -> name -> the lines where the file uses the name (_OUTSIDE for a use no test holds), for
    every file that spells one of ``names``; each file searched, parsed and walked once."""
    pattern = any_word(names)
    found: dict[str, dict[str, list[int]]] = {}
    for job in files.jobs:
        data = files.data(job.path)
        if data is None:
            return None
        spelled = {match.decode() for match in set(pattern.findall(data))}
        if not spelled:
            continue
        tree = files.tree(job.path)
        found[job.path] = _uses(tree, spelled) if tree is not None else {name: [_OUTSIDE] for name in spelled}
    return found


def _uses(tree: ast.Module, names: set[str]) -> dict[str, list[int]]:
    """name -> the lines where ``tree`` uses it: a name, an attribute (``data_utils.name``), a string
    that spells it (``getattr(m, "name")``), or an import that renames it (_OUTSIDE).  A use on the
    lines of a parameter default or of a pytest hook counts as _OUTSIDE: it runs when the module is
    imported or collected, whether or not a test then skips."""
    found: list[tuple[str, int]] = []
    early: list[tuple[int, int]] = []  # line spans that run at import or collection
    for node in walk_nodes(tree):
        if isinstance(node, ast.Name):
            if node.id in names:
                found.append((node.id, node.lineno))
        elif isinstance(node, ast.Attribute):
            if node.attr in names:
                found.append((node.attr, node.lineno))
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                found += [(name, node.lineno) for name in names if name in node.value]
        elif isinstance(node, ast.arguments):
            early += [(d.lineno, d.end_lineno or d.lineno) for d in [*node.defaults, *node.kw_defaults] if d is not None]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("pytest_"):
                early.append((node.lineno, node.end_lineno or node.lineno))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = alias.name.rsplit(".", 1)[-1]
                if name in names and alias.asname not in (None, name):
                    found.append((name, _OUTSIDE))  # `import f as g`: g's uses are not read
    lines: dict[str, list[int]] = {}
    for name, line in found:
        if any(first <= line <= last for first, last in early):
            line = _OUTSIDE
        lines.setdefault(name, []).append(line)
    return lines


def _modules_reached_by_computed_names(files: ScannedFiles, paths: set[str]) -> set[str]:
    """The helper modules among ``paths`` whose stem a file spells that also reaches attributes by a
    computed name (``getattr(data_utils, f"random_{kind}_inputs")``)."""
    stems: dict[str, set[str]] = {}
    for path in paths:
        stems.setdefault(os.path.splitext(os.path.basename(path))[0], set()).add(path)
    pattern = any_word(stems)
    reached: set[str] = set()
    for job in files.jobs:
        data = files.data(job.path)
        if data is None:
            return set(paths)
        if not _COMPUTED_ACCESS.search(data):
            continue
        spelled = {match.decode() for match in set(pattern.findall(data))}
        if job.path in paths:
            spelled.add(os.path.splitext(os.path.basename(job.path))[0])
        if spelled and _computes_names(files.tree(job.path)):
            for stem in spelled:
                reached |= stems.get(stem, set())
    return reached


def _computes_names(tree: ast.Module | None) -> bool:
    if tree is None:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in ("vars", "globals", "__import__")
                or node.func.id == "getattr" and len(node.args) > 1 and not isinstance(node.args[1], ast.Constant)):
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("__dict__", "import_module"):
            return True
    return False


def _only_cuda_test_callers(files: ScannedFiles, spans: dict[str, list[tuple[int, int]]],
                            uses: dict[str, dict[str, list[int]]], os_path: str, function: _Function) -> str | None:
    """The files that use ``function``, when each uses it only inside its CUDA-only tests."""
    name = function.name
    if uses.get(os_path, {}).get(name):
        return None  # its own module names it (its `def` is no use)
    users: list[str] = []
    for other, by_name in uses.items():
        lines = by_name.get(name)
        if other == os_path or not lines:
            continue
        cuda_tests = spans.get(other, [])
        if not all(any(first <= line <= last for first, last in cuda_tests) for line in lines):
            return None
        users.append(files.display.get(other, os.path.basename(other)))
    return ", ".join(sorted(users)[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "") if users else None
