"""Find the files, analyse each (in parallel when there are many), filter the findings.

Nothing scanned is imported or run: Python files are parsed with ``ast``, the
rest are read as text.  A file that cannot be read or parsed is reported as
skipped with the reason, and the scan goes on.
"""
from __future__ import annotations

import ast
import codecs
import errno
import gc
import io
import multiprocessing
import os
import re
import stat
import sys
import tokenize
from concurrent.futures import ProcessPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from pathlib import Path

from torchport.errors import UserError
from torchport.scan import (conftest_skips, cross_file_guards, cuda_test_helpers, default_callers, device_flow, extensions, float64_device,
                            import_refusal, policy, python, reachability, removed_torch, textfiles, triton_guards,
                            uncalled_functions, unimported_modules, unused_classes, vendored_imports)
from torchport.scan.ignore import GitignoreRules, GitListing
from torchport.scan.config import (DEFAULT_EXCLUDE, DEFAULT_MIN_TORCH, ExcludeSet, ScanConfig,
                                   config_file_in, detect_min_torch, scan_table)
from torchport.scan.detectors.shared import CUDA_ONLY
from torchport.scan.model import CrossFileHints, FileResult, Finding, Skipped, UnfinishedPass
from torchport.scan.rules import RULES_BY_ID, finding_worst

_SUPPRESSION = re.compile(r"torchport:\s*ignore(?:\[([^\]]*)\])?")
_PARALLEL_FROM = 200  # files; below this, starting workers costs more than it saves
# A file with a longer line is minified or generated: parsing it costs memory out of
# proportion to what a reader could act on, so it is skipped with this reason.
MAX_LINE_BYTES = 100_000


@dataclass
class ScanResult:
    findings: list[Finding]
    skipped: list[Skipped]
    files_scanned: int
    lines_scanned: int
    targets: list[str]
    min_torch: str
    min_torch_source: str
    config: ScanConfig
    suppressed: int = 0
    paths: list[str] = field(default_factory=list)
    unfinished: list[UnfinishedPass] = field(default_factory=list)  # passes over every file that failed


@dataclass(frozen=True)
class _Job:
    path: str  # as the OS should open it
    display: str  # as the report shows it
    kind: str


def display_path(path: Path) -> str:
    text = str(path)
    cwd = _cwd_prefix()
    if os.sep == "/" and text.startswith(cwd) and not _DOT_PART.search(text):
        return text[len(cwd):]  # what relpath gives for a normalised path below the cwd, without its cost
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return Path(relative).as_posix() if not relative.startswith("..") else str(path)


# A "." or ".." part, which relpath would normalise away; a hidden folder (".venv") is no such part.
_DOT_PART = re.compile(r"/\.\.?(/|$)")


def _cwd_prefix() -> str:
    cwd = os.getcwd()
    return cwd if cwd.endswith("/") else cwd + "/"


# -- discovery -----------------------------------------------------------------------------

def discover(paths: list[Path], config: ScanConfig) -> tuple[list[_Job], list[Skipped]]:
    jobs: list[_Job] = []
    skipped: list[Skipped] = []
    seen_folders: set[tuple[int, int]] = set()
    excludes = ExcludeSet().add(config.root or Path.cwd().resolve(), config.exclude)
    for path in paths:
        if not os.path.lexists(path):
            raise UserError("no such file or folder", location=str(path))
        try:
            info = os.stat(path)
        except OSError as exc:
            skipped.append(Skipped(display_path(path), _os_reason(exc, path)))
            continue
        if stat.S_ISDIR(info.st_mode):
            folder = Path(path).resolve()
            ignore: GitListing | GitignoreRules | None = None
            if config.use_gitignore:
                ignore = GitListing.of(folder)
                if ignore is None or ignore.ignores(folder, is_dir=True):
                    # Not in a repository, or a folder git ignores but the user named:
                    # its own .gitignore files still apply.
                    ignore = GitignoreRules().with_file(folder)
            _walk(folder, excludes, jobs, skipped, seen_folders, ancestors=(), ignore=ignore)
        else:
            # An explicit file is scanned whatever its name or the excludes say.
            kind = textfiles.kind_of(Path(path).name) or "python"
            jobs.append(_Job(str(path), display_path(Path(path)), kind))
    return jobs, skipped


def _os_reason(exc: OSError, path) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return "broken symlink"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


def _walk(folder: Path, excludes: ExcludeSet, jobs, skipped, seen, ancestors, ignore=None) -> None:
    """Collect the files to scan under ``folder``.  ``ignore`` is the repository's
    git listing, or the .gitignore rules met so far, or None (--no-ignore)."""
    try:
        info = os.stat(folder)
    except OSError as exc:
        skipped.append(Skipped(display_path(folder), _os_reason(exc, folder)))
        return
    key = (info.st_dev, info.st_ino)
    if key in ancestors:
        skipped.append(Skipped(display_path(folder), "symlink loop (links to a folder above it)"))
        return
    if key in seen:
        skipped.append(Skipped(display_path(folder), "already scanned through another path"))
        return
    seen.add(key)
    local_config = config_file_in(folder)
    if local_config is not None:
        excludes = excludes.add(folder, (scan_table(local_config) or {}).get("exclude", []))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        skipped.append(Skipped(display_path(folder), _os_reason(exc, folder)))
        return
    ancestors = (*ancestors, key)
    for entry in entries:
        path = Path(entry.path)
        if _default_excluded(entry.name) or excludes.excludes(path):
            continue
        try:
            is_dir = entry.is_dir()  # follows symlinks
        except OSError as exc:
            skipped.append(Skipped(display_path(path), _os_reason(exc, path)))
            continue
        if ignore is not None and ignore.ignores(path, is_dir):
            continue
        if is_dir:
            inner = ignore
            if isinstance(ignore, GitListing) and ignore.owns_subtree(path):
                inner = None  # a submodule: its own repository, not filtered here
            elif isinstance(ignore, GitignoreRules):
                inner = ignore.with_file(path)
            _walk(path, excludes, jobs, skipped, seen, ancestors, inner)
            continue
        kind = textfiles.kind_of(entry.name)
        if kind is None:
            continue
        if entry.is_symlink() and not os.path.exists(entry.path):
            skipped.append(Skipped(display_path(path), _os_reason(OSError(errno.ENOENT, ""), entry.path)))
            continue
        jobs.append(_Job(entry.path, display_path(path), kind))


def _default_excluded(name: str) -> bool:
    return name in DEFAULT_EXCLUDE or name.endswith(".egg-info")


# -- one file ------------------------------------------------------------------------------

def _has_long_line(data: bytes) -> bool:
    """Whether a line is longer than MAX_LINE_BYTES, found by jumping from the last line
    break of each window to the next (no split of the whole file into lines)."""
    position, end = 0, len(data)
    while end - position > MAX_LINE_BYTES:
        line_break = data.rfind(b"\n", position, position + MAX_LINE_BYTES + 1)
        if line_break == -1:
            return True  # `position` starts a line with no break in the next MAX_LINE_BYTES + 1 bytes
        position = line_break + 1
    return False


def read_source(path: str, kind: str, max_bytes: int) -> tuple[str | None, str | None]:
    """(text, None) or (None, reason to skip)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return None, _os_reason(exc, path)
    if not stat.S_ISREG(info.st_mode):
        return None, "not a regular file"
    if info.st_size > max_bytes:
        return None, (f"larger than {max_bytes} bytes ({info.st_size}); generated? "
                      "raise max-file-bytes to scan it")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return None, _os_reason(exc, path)
    if b"\0" in data[:8192]:
        return None, "binary file"
    if _has_long_line(data):
        longest = max(map(len, data.split(b"\n")))
        return None, (f"a line of {longest} bytes (over {MAX_LINE_BYTES}): minified or "
                      "generated? not scanned")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        if kind == "python":
            try:
                encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
                if codecs.lookup(encoding).name != "utf-8":
                    return data.decode(encoding), None
            except (SyntaxError, LookupError, UnicodeDecodeError):
                pass
        return None, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"


def parse_python(text: str, fast: bool, setup_script: bool = False) -> ast.Module | None:
    """The module to analyse; None when nothing in it can match.  Raises SyntaxError."""
    if fast and not setup_script:
        if not python.has_trigger(text):
            return None
        try:
            return python.parse_relevant(text)
        except SyntaxError:
            pass  # a piece was cut in the wrong place; the whole file decides
    return ast.parse(text)


def scan_file(job: _Job, max_bytes: int, debug: bool = False) -> tuple[FileResult, int]:
    text, reason = read_source(job.path, job.kind, max_bytes)
    result = FileResult(job.display)
    if text is None:
        result.skipped = Skipped(job.display, reason or "unreadable")
        return result, 0
    lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    if job.kind != "python":
        result.findings = textfiles.analyze_text(job.kind, text, job.display, job.path)
        policy.apply(None, text, job.display, result.findings)
        return result, lines
    try:
        tree = parse_python(text, fast=True, setup_script=job.path.endswith("setup.py"))
    except SyntaxError as exc:
        result.skipped = Skipped(job.display, f"syntax error at line {exc.lineno}: {exc.msg}")
        return result, lines
    except (ValueError, RecursionError, MemoryError) as exc:
        result.skipped = Skipped(job.display, f"cannot parse: {type(exc).__name__}")
        return result, lines
    try:
        # a file without findings may still import a module only under a CUDA check
        result.hints = cross_file_guards.hints(text)
        if tree is not None:  # a file with no trigger holds no CUDA query
            result.hints.refusal_at_margin, result.hints.opening_checks = import_refusal.refusal_hints(text)
            result.findings, result.cuda_only_tests = python.analyze_with_cuda_tests(tree, text, job.display)
            policy.apply(tree, text, job.display, result.findings, job.path)
            result.unreached = reachability.candidates(tree, text, job.display, job.path, result.findings)
            result.unused_classes = unused_classes.candidates(text, job.display, job.path, result.findings,
                                                              {c.index for c in result.unreached})
            result.flag_guarded = cross_file_guards.flag_guards(tree, text, result.findings)
            result.past_removed = removed_torch.candidates_in(text, result.findings)
            if any(word in text for word in extensions.BUILD_WORDS):
                result.extensions = extensions.built_names(tree)
    except Exception as exc:  # noqa: BLE001  a bug in one detector costs its file, not the scan
        result.findings, result.unreached, result.unused_classes, result.extensions = [], [], [], []
        result.hints, result.flag_guarded, result.past_removed, result.cuda_only_tests = CrossFileHints(), [], [], []
        reason, internal = analysis_failure(exc, debug)
        result.skipped = Skipped(job.display, reason, internal)
    return result, lines


def analysis_failure(exc: Exception, debug: bool) -> tuple[str, bool]:
    """Why a file's analysis (scan's or fix's) raised ``exc``, for its skip, and
    whether that is a bug in torchport: anything but running out of stack or
    memory, raised again under ``debug``."""
    if isinstance(exc, RecursionError):
        return "cannot analyse: nesting too deep", False
    if isinstance(exc, MemoryError):
        return "cannot analyse: out of memory", False
    if debug:
        raise exc
    return internal_error_reason(exc), True


_PACKAGE = Path(__file__).resolve().parent.parent


def internal_error_reason(exc: Exception, what: str = "torchport could not analyse it") -> str:
    """The skip reason for a file torchport's own analysis failed on: what
    failed and the innermost place in torchport it failed, for the report a
    user can file."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    ours = [frame for frame in frames if Path(frame.filename).resolve().is_relative_to(_PACKAGE)]
    chosen = ours or frames
    where = f" at {Path(chosen[-1].filename).name}:{chosen[-1].lineno}" if chosen else ""
    message = " ".join(str(exc).split())
    if len(message) > 200:
        message = message[:199] + "\u2026"
    return (f"{what} ({type(exc).__name__}{where}"
            f"{': ' + message if message else ''}): a bug in torchport, please report it")


def _extension_imports(work: list[_Job], results, start: Path, max_bytes: int) -> None:
    """Add a finding at every import of a CUDA extension the project builds (names
    from the scanned files and the nearest setup.py), to the file's results."""
    names = {name for result, _ in results for name in result.extensions}
    names.update(extensions.setup_file_names(start)[0])
    if not names:
        return
    by_display = {job.display: job for job in work}  # results come back in batch order
    for result, _ in results:
        job = by_display[result.path]
        if job.kind != "python" or result.skipped:
            continue
        text, _ = read_source(job.path, job.kind, max_bytes)
        if text is None or not extensions.mentions(text, names):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        result.findings.extend(extensions.imports_of(tree, names, job.display, text.splitlines()))


def _scan_batch(batch: list[_Job], max_bytes: int, debug: bool = False) -> list[tuple[FileResult, int]]:
    # Parsing and analysing allocate millions of short-lived AST nodes, which reference counting
    # frees; the cyclic collector's passes over them found about one cyclic object per file on
    # the transformers tree and cost 6-9% of the scan's CPU.  Off for one batch at a time, so
    # what cycles there are is collected between batches.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [scan_file(job, max_bytes, debug) for job in batch]
    finally:
        if collecting:
            gc.enable()


# -- the whole scan ------------------------------------------------------------------------

def resolve_min_torch(explicit: str | None, config: ScanConfig, start: Path) -> tuple[str, str]:
    if explicit:
        return explicit, "--min-torch"
    if config.min_torch:
        return config.min_torch, str(config.source)
    detected = detect_min_torch(start)
    if detected:
        return detected
    return DEFAULT_MIN_TORCH, "default (no torch constraint found)"


_T = TypeVar("_T")


def _pass_over_every_file(step: Callable[[], _T], name: str, unfinished: list[UnfinishedPass],
                          debug: bool) -> _T | None:
    """Run a pass over every file's results.  Where torchport's own code fails in it, each file's
    findings stand as they are (a pass only adds findings or lowers them) and the pass is recorded
    as unfinished; ``debug`` raises a bug in it."""
    try:
        return step()
    except Exception as exc:  # a bug in one pass must not cost the whole scan
        reason, bug = analysis_failure(exc, debug)
        if bug:
            reason = internal_error_reason(exc, "torchport failed in it")
        unfinished.append(UnfinishedPass(name, reason.replace("cannot analyse", "cannot finish"), bug))
        return None


def scan(paths: list[Path], config: ScanConfig, *, min_torch: str | None = None,
         jobs: int | None = None, debug: bool = False) -> ScanResult:
    """Scan ``paths``.  A file torchport's own analysis fails on is skipped
    with the failure (``Skipped.internal``), unless ``debug``, which raises it."""
    work, skipped = discover(paths, config)
    version, version_source = resolve_min_torch(min_torch, config, paths[0])
    results = _run(work, config.max_file_bytes, jobs, debug)
    read = lambda job: read_source(job.path, job.kind, config.max_file_bytes)[0]  # noqa: E731

    unfinished: list[UnfinishedPass] = []

    def across_files(step: Callable[[], _T], name: str) -> _T | None:
        return _pass_over_every_file(step, name, unfinished, debug)

    across_files(lambda: _extension_imports(work, results, paths[0], config.max_file_bytes),
                 "imports of the project's own CUDA extensions")
    aliases = across_files(lambda: device_flow.mark_dead_defaults(work, results, read), "unused device defaults")
    across_files(lambda: default_callers.lower_defaults_every_call_passes(work, results, read, aliases or {}),
                 "defaults every caller overrides")
    across_files(lambda: device_flow.lower_fallbacks(work, results, read), "fallbacks to the CPU")
    across_files(lambda: reachability.lower_unreached(work, results, paths), "functions no file calls")
    roots = [os.path.abspath(p) for p in paths if os.path.isdir(p)]
    across_files(lambda: unused_classes.lower(work, results, reachability.whole_package_in(paths), roots,
                                              config.max_file_bytes), "classes the package never uses")
    across_files(lambda: float64_device.lower_modules_refused_on_mps(work, results,
                                                                     reachability.whole_package_in(paths)),
                 "float64 in modules refused on MPS")
    across_files(lambda: cross_file_guards.lower_modules_imported_under_cuda(
        work, results, reachability.whole_package_in(paths), roots), "modules imported only under a CUDA check")
    across_files(lambda: triton_guards.lower_guarded_triton_modules(
        work, results, reachability.whole_package_in(paths), roots), "Triton modules imported only behind a guard")
    across_files(lambda: unimported_modules.lower_unimported_modules(
        work, results, reachability.whole_package_in(paths), roots), "modules nothing imports")
    across_files(lambda: uncalled_functions.lower_uncalled_functions(
        work, results, reachability.whole_package_in(paths), roots), "public functions nothing calls")
    across_files(lambda: cross_file_guards.lower_flags_stored_elsewhere(
        work, results, reachability.whole_package_in(paths), roots), "flags stored in the class hierarchy")
    across_files(lambda: cross_file_guards.lower_checks_in_tests(work, results, [os.path.abspath(p) for p in paths]),
                 "CUDA checks in tests")
    across_files(lambda: conftest_skips.lower_tests_skipped_by_conftest(work, results, roots),
                 "tests a conftest skips without CUDA")
    across_files(lambda: cuda_test_helpers.lower_helpers_of_cuda_tests(work, results, roots),
                 "test helpers only CUDA tests call")
    across_files(lambda: removed_torch.lower_past_removed_api(work, results, read, reachability.whole_package_in(paths)),
                 "code past removed torch APIs")
    across_files(lambda: vendored_imports.lower_vendored_self_imports(work, results, read,
                                                                      reachability.whole_package_in(paths), roots),
                 "vendored code importing itself by a name the package lacks")
    across_files(lambda: import_refusal.lower_behind_refusals(work, results, roots),
                 "code behind a module that refuses to import without CUDA")
    findings: list[Finding] = []
    files = lines = suppressed = 0
    for result, line_count in results:
        if result.skipped:
            skipped.append(result.skipped)
            continue
        files += 1
        lines += line_count
        kept, hidden = filter_findings(result.findings, config, version)
        findings.extend(kept)
        suppressed += hidden
    findings.sort(key=Finding.sort_key)
    skipped.sort(key=lambda s: s.path)
    return ScanResult(findings, skipped, files, lines, list(config.targets), version,
                      version_source, config, suppressed, [str(p) for p in paths], unfinished)


def _run(work: list[_Job], max_bytes: int, jobs: int | None, debug: bool = False):
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers <= 1 or len(work) < _PARALLEL_FROM:
        return _scan_batch(work, max_bytes, debug)
    # Interleaved batches spread the big files (listed together) over the workers.
    batches = [work[i::workers * 8] for i in range(workers * 8)]
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        parts = pool.map(_scan_batch, batches, [max_bytes] * len(batches), [debug] * len(batches))
        return [item for part in parts for item in part]


def filter_findings(findings: list[Finding], config: ScanConfig, min_torch: str) -> tuple[list[Finding], int]:
    """Keep enabled rules that matter on a selected target and are not suppressed;
    mark which findings ``torchport fix`` will rewrite under this torch version."""
    kept: list[Finding] = []
    suppressed = 0
    for finding in findings:
        rule = RULES_BY_ID[finding.rule_id]
        if not config.rule_enabled(rule.id) or finding_worst(finding, config.targets) is None:
            continue
        if is_suppressed(finding):
            suppressed += 1
            continue
        if finding.fix is not None and finding.fix.chosen(finding.cap_reason in CUDA_ONLY):
            if python.version_key(finding.fix.min_torch) <= python.version_key(min_torch):
                finding.fixable = True
            else:
                finding.fix_note = f"fixable once the project needs torch>={finding.fix.min_torch}"
        kept.append(finding)
    return kept, suppressed


def is_suppressed(finding: Finding) -> bool:
    match = _SUPPRESSION.search(finding.snippet)
    if not match:
        return False
    if match.group(1) is None:
        return True
    codes = [c for c in re.split(r"[,\s]+", match.group(1)) if c]
    return any(finding.rule_id.startswith(code) for code in codes)
