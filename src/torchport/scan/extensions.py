"""CUDA extensions a project builds itself, and the Python imports of them.

A compiled module named in ``CUDAExtension(...)`` or built by
``torch.utils.cpp_extension.load(...)`` with CUDA sources exists only where nvcc
built it: every import of it is a blocker off CUDA.  The names come from the
scanned files and from the nearest ``setup.py`` above the scanned path (an import
in ``pkg/ops.py`` is judged by the ``setup.py`` at the repository's root).
"""
from __future__ import annotations

import ast
from pathlib import Path

from torchport.scan.detectors.syntax import (call_argument, catches_a_missing_module, character_column, last_name, string_value,
                                             walk_nodes)
from torchport.scan.model import Finding
from torchport.scan.rules import CUDA_EXTENSION_IMPORT

RULE_IDS = (CUDA_EXTENSION_IMPORT,)
# Words without which a file builds no extension (a plain substring test first).
BUILD_WORDS = ("CUDAExtension", "cpp_extension")
_LOADERS = ("load", "load_inline")


def _has_cuda_sources(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg in ("cuda_sources", "extra_cuda_cflags"):
            return True
        if keyword.arg == "with_cuda" and isinstance(keyword.value, ast.Constant) and keyword.value.value:
            return True
    return any((text := string_value(node)) is not None and text.endswith((".cu", ".cuh"))
               for node in walk_nodes(call))


def built_names(tree: ast.Module) -> list[str]:
    """Module names of the CUDA extensions a file builds: ``CUDAExtension("pkg._C", ...)``,
    ``CUDAExtension(name="amp_C", ...)``, ``load(name="fused", sources=[..."k.cu"])``."""
    names = []
    for node in walk_nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = last_name(node.func)
        if callee == "CUDAExtension" or (callee in _LOADERS and _has_cuda_sources(node)):
            name = string_value(call_argument(node, 0, "name"))
            if name and all(part.isidentifier() for part in name.split(".")):
                names.append(name)
    return names


def setup_file_names(start: Path) -> tuple[list[str], str | None]:
    """The names built by the nearest ``setup.py`` at or above ``start`` (within a
    git repository's root when there is one), and that file's path."""
    folder = start.resolve() if start.is_dir() else start.resolve().parent
    for candidate in (folder, *folder.parents):
        setup = candidate / "setup.py"
        if setup.is_file():
            try:
                text = setup.read_text(encoding="utf-8", errors="replace")
                return (built_names(ast.parse(text)) if any(w in text for w in BUILD_WORDS) else []), str(setup)
            except (OSError, SyntaxError, ValueError, RecursionError):
                return [], None
        if (candidate / ".git").exists():
            break
    return [], None


def mentions(text: str, names: set[str]) -> bool:
    return any(name.rsplit(".", 1)[-1] in text for name in names)


def imports_of(tree: ast.Module, names: set[str], path: str, lines: list[str]) -> list[Finding]:
    """A finding at every import of one of ``names`` (statements, ``importlib.import_module``)."""
    lasts = {name.rsplit(".", 1)[-1]: name for name in names if "." in name}
    findings = []
    optional = _lines_with_a_fallback(tree)
    for node in walk_nodes(tree):
        found = None
        if isinstance(node, ast.Call):
            # `fused_layer_norm_cuda = importlib.import_module("fused_layer_norm_cuda")`
            if last_name(node.func) in ("import_module", "__import__") and node.args:
                found = string_value(node.args[0])
                found = found if found in names else None
        elif not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        elif isinstance(node, ast.Import):
            found = next((a.name for a in node.names
                          if a.name in names or any(a.name.startswith(n + ".") for n in names)), None)
        else:
            module = node.module or ""
            if not node.level and (module in names or any(module.startswith(n + ".") for n in names)):
                found = module
            for alias in node.names:
                full = f"{module}.{alias.name}" if module else alias.name
                if found:
                    break
                if not node.level and full in names:
                    found = full
                elif node.level and alias.name in lasts and lasts[alias.name].endswith(full):
                    # `from . import _C` inside the package that builds `pkg._C`
                    found = lasts[alias.name]
        if found:
            snippet = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
            end_line = node.end_lineno or node.lineno
            end_text = lines[end_line - 1] if end_line <= len(lines) else ""
            finding = Finding(CUDA_EXTENSION_IMPORT, path, node.lineno, character_column(snippet, node.col_offset),
                              end_line, character_column(end_text, node.end_col_offset or 0),
                              f"import of {found}, a CUDA extension this project builds", snippet)
            if node.lineno in optional:
                finding.lower_to_info("an optional import, in a try whose handler binds a fallback: where the "
                                      "extension is not built the package runs without it")
            findings.append(finding)
    return findings


def _lines_with_a_fallback(tree: ast.Module) -> set[int]:
    """The lines of imports that a ``try`` holds directly and whose failure the package survives:
    ``try: from factor_multiply import ...`` / ``except ImportError: use_extension = False``, where
    the first handler that catches a missing module binds a fallback (a flag, a stand-in, another
    import), neither raises nor exits, and the file consults what it binds (``if use_extension``,
    ``X if use_extension else Y``) and does not stop at import time on it (a module-level assert, or
    a raise under a test of it)."""
    lines: set[int] = set()
    for node in walk_nodes(tree):
        if not isinstance(node, ast.Try):
            continue
        imports = [s for s in node.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        handler = next((h for h in node.handlers if catches_a_missing_module(h.type)), None)
        if not imports or handler is None or _stops(handler.body):
            continue
        bound = {name for s in handler.body for name in _stored_names(s)}
        imported = {(a.asname or a.name).split(".")[0] for s in imports for a in s.names}
        if bound and _consulted(tree, bound | imported) and not _stops_at_import(tree.body, bound | imported):
            lines.update(s.lineno for s in imports)
    return lines


_EXITS = ("exit", "quit", "_exit", "abort")


def _stops(statements: list[ast.stmt]) -> bool:
    """A raise or an exit (``sys.exit(1)``, ``os._exit(1)``) among the statements."""
    return any(isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and last_name(n.func) in _EXITS)
               for s in statements for n in ast.walk(s))


def _stored_names(statement: ast.stmt) -> list[str]:
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in statement.names]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _consulted(tree: ast.Module, names: set[str]) -> bool:
    """A condition of the file reads one of ``names``: an ``if``, ``while`` or ``X if c else Y``
    test, or an operand of an ``and``/``or`` before the last."""
    for node in walk_nodes(tree):
        tests = [node.test] if isinstance(node, (ast.If, ast.While, ast.IfExp)) else (
            node.values[:-1] if isinstance(node, ast.BoolOp) else [])
        if any(_names_in(test) & names for test in tests):
            return True
    return False


def _stops_at_import(statements: list[ast.stmt], names: set[str]) -> bool:
    """``assert myext is not None`` or ``if not _ok: raise ImportError(...)`` at module level."""
    for statement in statements:
        if isinstance(statement, ast.Assert) and _names_in(statement.test) & names:
            return True
        if isinstance(statement, ast.If):
            if _names_in(statement.test) & names and (_stops(statement.body) or _stops(statement.orelse)):
                return True
            if _stops_at_import(statement.body + statement.orelse, names):
                return True
        elif isinstance(statement, ast.Try) and _stops_at_import(
                statement.body + statement.orelse + statement.finalbody, names):
            return True
    return False
