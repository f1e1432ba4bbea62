"""Test helpers that only tests running with CUDA call, read across files.

openfold3's ``tests/utils/data_utils.py`` builds inputs with ``.cuda()``; its only callers are
``TestKernels`` (under ``@compare_utils.skip_unless_cuda_available()``) and a method of
``TestLMA`` under the same decorator, in other files.  Where CUDA is absent those tests skip, so
the helper never runs there.  The analyzer already reads a helper its own file calls only from such
tests; this pass reads helpers that other files call.

A finding is lowered to info when it lies in a function at the top of a test module (a file under a
test folder) that is not a test itself and has no decorator, and:

- its own module names it nowhere but at its ``def``;
- every other scanned file that spells its name uses it (as a name, an attribute or a string) only
  inside a test that runs only where CUDA is present (the spans the analyzer found), apart from
  importing it;
- and at least one such use exists: a helper nothing uses is another pass's question.
"""
from __future__ import annotations

import ast
import os

from torchport.scan.cross_file_guards import ScannedFiles
from torchport.scan.model import FileResult
from torchport.scan.policy import is_hot

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def lower_helpers_of_cuda_tests(work: list, results: list[tuple[FileResult, int]], roots: list[str]) -> None:
    by_display = {job.display: job.path for job in work}
    spans = {by_display[r.path]: r.cuda_only_tests for r, _ in results if r.cuda_only_tests and r.path in by_display}
    if not spans:
        return
    files = ScannedFiles(work, roots)
    for result, _ in results:
        os_path = by_display.get(result.path)
        hot = [f for f in result.findings if is_hot(f)]
        if not hot or os_path is None or not files.is_test(os_path):
            continue
        tree = files.tree(os_path)
        if tree is None:
            continue
        for function in tree.body:
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.decorator_list \
                    or function.name.startswith("test"):
                continue
            low, high = function.lineno, function.end_lineno or function.lineno
            inside = [f for f in hot if low <= f.line <= high]
            if not inside:
                continue
            callers = _only_cuda_test_callers(files, spans, os_path, tree, function)
            if callers:
                for finding in inside:
                    finding.lower_to_info(f"a test helper that only tests running only where CUDA is present use "
                                          f"({callers})")


def _only_cuda_test_callers(files: ScannedFiles, spans: dict[str, list[tuple[int, int]]], os_path: str,
                            tree: ast.Module, function: _Function) -> str | None:
    """The files that use ``function``, when each uses it only inside its CUDA-only tests."""
    name = function.name
    if _uses(tree, name, skip=function):
        return None
    mentioning = files.mentioning(name.encode())
    if mentioning is None:
        return None
    users: list[str] = []
    for other in mentioning:
        if other == os_path:
            continue
        other_tree = files.tree(other)
        if other_tree is None:
            return None
        lines = _uses(other_tree, name)
        if not lines:
            continue
        cuda_tests = spans.get(other, [])
        if not all(any(first <= line <= last for first, last in cuda_tests) for line in lines):
            return None
        users.append(files.display.get(other, os.path.basename(other)))
    return ", ".join(sorted(users)[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "") if users else None


def _uses(tree: ast.Module, name: str, skip: _Function | None = None) -> list[int]:
    """The lines where ``tree`` uses ``name`` other than by importing it or defining ``skip``: a
    name, an attribute (``data_utils.name``), a string that spells it (``getattr(m, "name")``).  A
    use in a parameter default counts as line 0, in no test: it runs when the module is imported,
    whether or not the test then skips."""
    lines: list[int] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, eager = stack.pop()
        if node is skip:
            continue
        if isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.Attribute) and node.attr == name \
                or isinstance(node, ast.Constant) and isinstance(node.value, str) and name in node.value \
                or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            lines.append(0 if eager else getattr(node, "lineno", 0))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue  # `from tests.utils.data_utils import name`: importing is no use
        run_at_import: set[int] = set()
        if isinstance(node, ast.arguments):  # decorators need nothing: a test's span starts at its `def`
            run_at_import = {id(n) for n in [*node.defaults, *node.kw_defaults] if n is not None}
        stack.extend((child, eager or id(child) in run_at_import) for child in ast.iter_child_nodes(node))
    return lines
