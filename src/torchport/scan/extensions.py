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

from torchport.scan.detectors.syntax import call_argument, last_name, string_value, walk_nodes
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
            finding = Finding(CUDA_EXTENSION_IMPORT, path, node.lineno, node.col_offset + 1,
                              node.end_lineno or node.lineno, (node.end_col_offset or 0) + 1,
                              f"import of {found}, a CUDA extension this project builds", snippet)
            if node.lineno in optional:
                finding.severity_cap = "info"
                finding.cap_reason = ("an optional import, in a try whose handler binds a fallback: where the "
                                      "extension is not built the package runs without it")
            findings.append(finding)
    return findings


def _lines_with_a_fallback(tree: ast.Module) -> set[int]:
    """The lines of ``try:`` bodies whose handler catches a failed import and binds a fallback (a
    flag, another implementation) without raising: ``try: from factor_multiply import ...`` /
    ``except ImportError: use_extension = False``."""
    lines: set[int] = set()
    for node in walk_nodes(tree):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            catches = any(n is None or last_name(n) in ("ImportError", "ModuleNotFoundError", "Exception",
                                                        "BaseException") for n in names)
            binds = any(isinstance(s, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom, ast.FunctionDef))
                        for s in handler.body)
            if catches and binds and not any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
                lines.update(range(node.body[0].lineno, (node.body[-1].end_lineno or node.body[-1].lineno) + 1))
                break
    return lines
