"""Snippets whose lines say what scan must do with them, for the precision tests:
a line ending in ``# quiet`` (a false alarm) must not be error/silent, and a line
ending in ``# kept`` (a true lock-in line) must stay error/silent."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

ALL_TARGETS = ScanConfig().targets


def write_snippet(root: Path, name: str, source: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def _marked(path: Path, mark: str) -> set[int]:
    return {n for n, line in enumerate(path.read_text().splitlines(), 1) if line.endswith(f"# {mark}")}


def check_marked_lines(scanned: list[Path], paths: tuple[Path, ...]) -> None:
    """Scan ``scanned`` (files, or a folder whose layout matters) and hold the
    marked lines of ``paths`` to their marks (a lowered finding is still reported)."""
    result = scan(scanned, ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    by_file = {p.resolve(): p for p in paths}
    serious = set()
    for finding in result.findings:
        path = next((p for full, p in by_file.items() if str(full).endswith(finding.path)), None)
        if path is not None and finding_worst(finding, ALL_TARGETS) in ("error", "silent"):
            serious.add((path.name, finding.line))
    quiet = {(p.name, n) for p in paths for n in _marked(p, "quiet")}
    kept = {(p.name, n) for p in paths for n in _marked(p, "kept")}
    assert quiet and kept
    assert not serious & quiet, sorted(serious)
    assert kept <= serious, sorted(serious)


def worst_by_line(root: Path) -> dict[tuple[str, int, str], tuple[str | None, str]]:
    """Scan ``root``: (file name, line, rule) -> (worst severity over every target, the reason
    given), for the first finding of the line (a repeat in the same statement is folded into it)."""
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    found: dict[tuple[str, int, str], tuple[str | None, str]] = {}
    for f in sorted(result.findings, key=lambda f: f.column):
        found.setdefault((Path(f.path).name, f.line, f.rule_id), (finding_worst(f, ALL_TARGETS), f.cap_reason))
    return found


def kept_lines_stay(path: Path, rule: str | None = None, root: Path | None = None) -> None:
    """Every line of ``path`` ending in ``# kept`` holds a finding (of ``rule``) still at error or
    silent, ``root`` (the file's folder unless given) scanned whole."""
    serious = {line for (name, line, found), (severity, _) in worst_by_line(root or path.parent).items()
               if name == path.name and severity in ("error", "silent") and rule in (None, found)}
    kept = {n for n, text in enumerate(path.read_text().splitlines(), 1) if text.endswith("# kept")}
    assert kept and kept <= serious, sorted(kept - serious)
