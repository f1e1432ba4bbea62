"""``torchport fix``: apply the findings' edits to the original text.

Only the rewritten expressions change; every other byte (formatting, comments,
line endings) is kept.  Fixes whose edits overlap are applied in a later round;
rounds repeat until nothing fixable is left, so a second ``torchport fix``
changes nothing.  When a rewrite needs the accelerator device, one line
``ACCELERATOR_DEVICE = ...`` is inserted after the module's imports; when it
rewrites ``.cuda(index)``, the function ``accelerator_device(index)`` follows it.
Rewrites of calls that raise where no accelerator exists carry a guard, except in
code that runs only where CUDA is present.
"""
from __future__ import annotations

import ast
import difflib
import os
import re
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from torchport.errors import OutputError, UserError
from torchport.scan import python
from torchport.scan.config import ScanConfig
from torchport.scan.detectors.shared import CUDA_ONLY, HELPER_NAME
from torchport.scan.detectors.syntax import character_column
from torchport.scan.model import Finding, Fix
from torchport.scan.scanner import analysis_failure, discover, filter_findings, read_source

_NEWLINE = re.compile(r"\r\n|\r|\n")
_MAX_ROUNDS = 5


def device_line(min_torch: str, torch_name: str) -> str:
    t = torch_name
    if python.version_key(min_torch) >= (2, 7):
        return (f"{python.DEVICE_NAME} = {t}.accelerator.current_accelerator(check_available=True)"
                f' or {t}.device("cpu")')
    return (f"{python.DEVICE_NAME} = {t}.accelerator.current_accelerator() "
            f'if {t}.accelerator.is_available() else {t}.device("cpu")')


def helper_lines(torch_name: str) -> list[str]:
    """``accelerator_device(index)``: where ``.cuda(index)`` puts a tensor, on the
    accelerator present; ``index`` may be anything ``.cuda()`` takes."""
    d = python.DEVICE_NAME
    return [f"def {HELPER_NAME}(index=None):",
            '    """The device `.cuda(index)` meant (index: an int, a "cuda:N" string or a',
            '    torch.device), on whichever accelerator is present; the CPU where there is none."""',
            f'    if index is None or {d}.type == "cpu":',
            f"        return {d}",
            "    if not isinstance(index, int):",
            f"        index = {torch_name}.device(index).index",
            f"    return {torch_name}.device({d}.type, index)"]


@dataclass
class FileFix:
    path: str
    display: str
    original: str
    fixed: str
    applied: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    skipped: str | None = None
    internal: bool = False  # torchport's own analysis failed on the file (a bug): left as it is

    @property
    def changed(self) -> bool:
        return self.fixed != self.original

    def diff(self) -> str:
        return "".join(difflib.unified_diff(
            self.original.splitlines(keepends=True), self.fixed.splitlines(keepends=True),
            fromfile=f"a/{self.display.lstrip('/')}", tofile=f"b/{self.display.lstrip('/')}"))


class _Offsets:
    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def __call__(self, position: tuple[int, int]) -> int:
        line, byte_column = position
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        return start + character_column(self.text[start:end], byte_column) - 1


def fix_text(text: str, display: str, config: ScanConfig, min_torch: str) -> tuple[str, list[Finding], list[Finding]]:
    """(fixed text, findings fixed, findings left).  Raises SyntaxError."""
    applied: list[Finding] = []
    for _ in range(_MAX_ROUNDS):
        tree = ast.parse(text)
        findings, _ = filter_findings(python.analyze(tree, text, display), config, min_torch)
        fixable = [f for f in findings if f.fixable and f.fix is not None and _edits_of(f)]
        if not fixable:
            break
        new_text, done = _apply(text, tree, fixable, min_torch)
        if new_text == text:
            break
        ast.parse(new_text)  # a rewrite must never break the file
        text = new_text
        applied.extend(done)
    tree = ast.parse(text)
    remaining, _ = filter_findings(python.analyze(tree, text, display), config, min_torch)
    remaining.sort(key=Finding.sort_key)
    # Findings whose rewrite happens elsewhere (an autocast call fixed by rewriting
    # its device constant) carry no edits of their own; they stay listed.
    return text, applied, remaining


def _fix_of(finding: Finding) -> Fix:
    """The rewrite of a finding _apply was given (fix_text passes fixable ones only)."""
    assert finding.fix is not None, finding.rule_id
    return finding.fix


def _edits_of(finding: Finding):
    return _fix_of(finding).chosen(finding.cap_reason in CUDA_ONLY)


def _apply(text: str, tree: ast.Module, findings: list[Finding], min_torch: str) -> tuple[str, list[Finding]]:
    offsets = _Offsets(text)
    accepted: list[tuple[int, int, str]] = []
    done: list[Finding] = []
    for finding in sorted(findings, key=lambda f: min(e.start for e in _edits_of(f))):
        spans = [(offsets(e.start), offsets(e.end), e.text) for e in _edits_of(finding)]
        if any(_overlaps(span, other) for span in spans for other in accepted):
            continue  # next round, on the text this round produces
        accepted.extend(spans)
        done.append(finding)
    header = _device_header(text, tree, done, min_torch, offsets)
    if header is not None:
        position = header[0]
        # A rewrite above the imports (rare) could not see the device line: leave it.
        early = [f for f in done if (_fix_of(f).uses_device or _fix_of(f).uses_torch)
                 and any(offsets(e.start) < position for e in _edits_of(f))]
        if early:
            done = [f for f in done if f not in early]
            accepted = [(offsets(e.start), offsets(e.end), e.text) for f in done for e in _edits_of(f)]
            header = _device_header(text, tree, done, min_torch, offsets)
        if header is not None:
            accepted.append((header[0], header[0], header[1]))
    result = text
    for start, end, replacement in sorted(accepted, key=lambda s: (s[0], s[1]), reverse=True):
        result = result[:start] + replacement + result[end:]
    return result, done


def _overlaps(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    return a[0] == b[0] or (a[0] < b[1] and b[0] < a[1])


def _device_header(text, tree, done, min_torch, offsets) -> tuple[int, str] | None:
    """(offset, text) of the lines to insert: ``import torch`` if torch is not
    imported, and the device line if it is not there yet."""
    needs_device = any(f.fix.uses_device for f in done)
    needs_torch = any(f.fix.uses_torch for f in done)
    needs_helper = any(f.fix.uses_helper for f in done)
    if not needs_device and not needs_torch:
        return None
    torch_name = next((alias.asname or "torch" for node in tree.body if isinstance(node, ast.Import)
                       for alias in node.names if alias.name == "torch" or
                       (alias.name.startswith("torch.") and not alias.asname)), None)
    has_device = any(isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == python.DEVICE_NAME for t in node.targets) for node in tree.body)
    has_helper = any(isinstance(node, ast.FunctionDef) and node.name == HELPER_NAME for node in tree.body)
    newline = "\r\n" if "\r\n" in text[:2000] else "\n"
    lines = []
    if torch_name is None:
        lines.append("import torch")
        torch_name = "torch"
    if needs_device and not has_device:
        lines += ["", device_line(min_torch, torch_name)]
    if needs_helper and not has_helper:
        lines += ["", "", *helper_lines(torch_name), ""]
    if not lines:
        return None
    line = _insertion_line(tree, text)
    position = offsets.starts[line] if line < len(offsets.starts) else len(text)
    prefix = "" if position == 0 or text[:position].endswith(("\n", "\r")) else newline
    body = newline.join(lines)
    suffix = newline if line else newline * 2
    return position, prefix + (body.lstrip() if not line else body) + suffix


def _insertion_line(tree: ast.Module, text: str) -> int:
    """0-based line where the inserted lines go: after the leading run of docstring,
    imports and try-imports; else after the leading comments (shebang, coding)."""
    line = 0
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) or isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Try) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in node.body)):
            line = node.end_lineno or line
        else:
            break
    if line == 0:
        for number, text_line in enumerate(text.splitlines()):
            if not text_line.startswith("#"):
                return number
    return line


# -- files and git ------------------------------------------------------------------------------

def fix_paths(paths: list[Path], config: ScanConfig, min_torch: str, debug: bool = False) -> list[FileFix]:
    """Each file's fix; a file torchport's own analysis fails on is left as it
    is and marked (``FileFix.internal``), unless ``debug``, which raises."""
    jobs, skipped = discover(paths, config)
    results = [FileFix(s.path, s.path, "", "", skipped=s.reason) for s in skipped]
    for job in jobs:
        if job.kind != "python":
            continue
        text, reason = read_source(job.path, job.kind, config.max_file_bytes)
        if text is None:
            results.append(FileFix(job.path, job.display, "", "", skipped=reason))
            continue
        try:
            original = Path(job.path).read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError:  # readable through its coding cookie, but kept as it is
            results.append(FileFix(job.path, job.display, text, text, skipped="not UTF-8; not rewritten"))
            continue
        try:
            fixed, applied, remaining = fix_text(original, job.display, config, min_torch)
        except SyntaxError as exc:
            results.append(FileFix(job.path, job.display, original, original,
                                   skipped=f"syntax error at line {exc.lineno}: {exc.msg}"))
            continue
        except Exception as exc:  # noqa: BLE001  a bug in one detector costs its file, not the run
            reason, internal = analysis_failure(exc, debug)
            results.append(FileFix(job.path, job.display, original, original,
                                   skipped=reason + ("; not rewritten" if internal else ""), internal=internal))
            continue
        results.append(FileFix(job.path, job.display, original, fixed, applied, remaining))
    return results


def project_roots(paths: list[Path]) -> list[Path]:
    """The folders ``fix --write`` may write into: for each PATH, the git repository
    holding it, else the folder itself (a file's parent)."""
    roots = []
    for path in paths:
        folder = path if path.is_dir() else path.parent
        try:
            top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                                 capture_output=True, text=True)
        except OSError:
            top = None
        if top is not None and top.returncode == 0 and top.stdout.strip():
            roots.append(Path(top.stdout.strip()).resolve())
        else:
            roots.append(folder.resolve())
    return roots


def write(fixes: list[FileFix], force: bool, roots: list[Path] | None = None) -> list[FileFix]:
    """Write the changed files; returns those refused because they resolve (through
    a symbolic link) to a file outside every root."""
    changed = [f for f in fixes if f.changed]
    refused = []
    if roots is not None:
        inside = []
        for fix in changed:
            real = Path(os.path.realpath(fix.path))
            if any(real == root or root in real.parents for root in roots):
                inside.append(fix)
            else:
                fix.skipped = f"not written: a symbolic link to {real}, outside the project"
                refused.append(fix)
        changed = inside
    if not force:
        # Through a link, the file that changes is the link's target.
        dirty = [f.display for f in changed if not _committed(Path(os.path.realpath(f.path)))]
        if dirty:
            raise UserError(
                f"refusing to write: {len(dirty)} file(s) have uncommitted changes or are not "
                f"tracked by git ({', '.join(dirty[:5])}{', ...' if len(dirty) > 5 else ''}); "
                "commit them first or pass --force", location="torchport fix")
    for fix in changed:
        _write_atomically(Path(os.path.realpath(fix.path)), fix.fixed)
    return refused


def _write_atomically(path: Path, text: str) -> None:
    """Temporary file in the same folder, same mode, then rename over the original:
    an interrupted write never leaves a half-written source file."""
    raw = path.read_bytes()
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".torchport", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(bom + text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        if isinstance(exc, OSError):  # the temporary file's name means nothing to the user: name theirs
            raise OutputError(f"cannot write: {exc.strerror or exc}; the file is unchanged", location=str(path)) from None
        raise


def _committed(path: Path) -> bool:
    """True when git tracks the file and it has no uncommitted changes."""
    folder = str(path.parent)
    try:
        tracked = subprocess.run(["git", "-C", folder, "ls-files", "--error-unmatch", path.name],
                                 capture_output=True, text=True)
        if tracked.returncode != 0:
            return False
        status = subprocess.run(["git", "-C", folder, "status", "--porcelain", "--", path.name],
                                capture_output=True, text=True)
    except OSError:
        return False
    return status.returncode == 0 and not status.stdout.strip()


__all__ = ["FileFix", "device_line", "helper_lines", "fix_paths", "fix_text", "project_roots", "write"]
