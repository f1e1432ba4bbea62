"""Scan settings: ``[tool.torchport.scan]`` in pyproject.toml or ``[scan]`` in torchport.toml.

The settings that apply are those of the config nearest to the first scanned path
(searching upwards, stopping at the repository root).  While walking folders,
every config found further down adds its ``exclude`` patterns for its own
subtree, so ``examples/torchport.toml`` can keep a deliberately CUDA-written
example out of ``torchport scan .`` while ``torchport scan examples/that_dir``
(an explicit path) still scans it.
"""
from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from torchport.config_file import torchport_table
from torchport.errors import UserError
from torchport.scan.rules import RULES_BY_ID, SEVERITY_RANK, TARGETS

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "node_modules",
    "build", "dist", "site-packages", ".eggs", "*.egg-info", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "_build", ".torchport-cache", "torchport-results",
)
DEFAULT_MIN_TORCH = "2.6"  # the first torch with torch.accelerator
DEFAULT_MAX_FILE_BYTES = 4 * 1024 * 1024
FAIL_ON = ("error", "silent", "perf", "info", "never")

_KEYS = {"select", "ignore", "targets", "exclude", "min-torch", "max-file-bytes", "fail-on"}
VERSION_PATTERN = re.compile(r"\d+\.\d+(\.\d+)?\Z")


@dataclass
class ExcludeSet:
    """Glob patterns, each relative to the folder of the config that declared it."""
    patterns: list[tuple[Path, str]] = field(default_factory=list)

    def add(self, base: Path, patterns) -> ExcludeSet:
        return ExcludeSet(self.patterns + [(base, p.rstrip("/")) for p in patterns])

    def excludes(self, path: Path) -> bool:
        """Whether the walk should skip this file or folder.  The walk asks at every
        level, so only the entry itself is tested: a folder named on the command
        line is never excluded, whatever its parents' patterns say."""
        for base, pattern in self.patterns:
            if "/" not in pattern:
                if fnmatch.fnmatchcase(path.name, pattern):
                    return True
                continue
            try:
                relative = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if fnmatch.fnmatchcase(relative, pattern):
                return True
        return False


@dataclass
class ScanConfig:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    ignore: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=lambda: list(TARGETS))
    exclude: list[str] = field(default_factory=list)
    min_torch: str | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    fail_on: str = "silent"
    use_gitignore: bool = True  # --no-ignore turns it off
    source: Path | None = None  # the config file these settings came from
    root: Path | None = None  # its folder

    def rule_enabled(self, rule_id: str) -> bool:
        from torchport.scan.rules import matches
        return matches(rule_id, self.select) and not matches(rule_id, self.ignore)


def scan_table(path: Path) -> dict | None:
    """The scan settings table of a config file, or None when it has none."""
    found = torchport_table(path)
    if found is None:
        return None
    torchport, prefix = found
    table, where = torchport.get("scan"), f"[{prefix}scan]"
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UserError(f"{where} must be a table", location=str(path))
    return _validated(table, path, where)


def _validated(table: dict, path: Path, where: str) -> dict:
    def fail(message: str):
        raise UserError(f"{where}: {message}", location=str(path))

    unknown = sorted(set(table) - _KEYS)
    if unknown:
        fail(f"unknown key '{unknown[0]}' (known: {', '.join(sorted(_KEYS))})")
    for key in ("select", "ignore", "targets", "exclude"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            fail(f"'{key}' must be a list of strings")
    for key in ("select", "ignore"):
        for code in table.get(key, []):
            if code != "ALL" and not any(rule_id.startswith(code) for rule_id in RULES_BY_ID):
                fail(f"'{key}' names no rule: '{code}' (rule ids look like TP101; see torchport rules)")
    for target in table.get("targets", []):
        if target not in TARGETS:
            fail(f"unknown target '{target}' (known: {', '.join(TARGETS)})")
    if "min-torch" in table and not (isinstance(table["min-torch"], str) and VERSION_PATTERN.match(table["min-torch"])):
        fail("'min-torch' must be a version string such as \"2.9\"")
    if "max-file-bytes" in table and not (isinstance(table["max-file-bytes"], int) and table["max-file-bytes"] > 0):
        fail("'max-file-bytes' must be a positive integer")
    if "fail-on" in table and table["fail-on"] not in FAIL_ON:
        fail(f"'fail-on' must be one of {', '.join(FAIL_ON)}")
    return table


def config_file_in(folder: Path) -> Path | None:
    """The config file of this folder that has scan settings, if any."""
    try:
        return _config_file_in(folder)
    except OSError:  # a path too long to open, a folder that vanished: no config there
        return None


def _config_file_in(folder: Path) -> Path | None:
    candidate = folder / "torchport.toml"
    if candidate.is_file():
        return candidate
    candidate = folder / "pyproject.toml"
    if candidate.is_file():
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if "torchport" in text and scan_table(candidate) is not None:
            return candidate
    return None


def find_config(start: Path) -> Path | None:
    folder = start if start.is_dir() else start.parent
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        found = config_file_in(candidate)
        if found:
            return found
        if (candidate / ".git").exists():
            return None
    return None


def load_config(start: Path, explicit: Path | None = None) -> ScanConfig:
    path = explicit or find_config(start)
    if path is None:
        return ScanConfig()
    if explicit is not None and not explicit.is_file():
        raise UserError("config file not found", location=str(explicit))
    table = scan_table(path) or {}
    config = ScanConfig(source=path, root=path.parent.resolve())
    for key in ("select", "ignore", "targets", "exclude"):
        if key in table:
            setattr(config, key, list(table[key]))
    config.min_torch = table.get("min-torch")
    config.max_file_bytes = table.get("max-file-bytes", DEFAULT_MAX_FILE_BYTES)
    config.fail_on = table.get("fail-on", "silent")
    return config


def detect_min_torch(start: Path) -> tuple[str, str] | None:
    """(oldest torch the project supports, where that was read) from the nearest
    pyproject.toml, setup.cfg, setup.py or requirements*.txt that constrains torch,
    searching upwards from ``start`` to the repository root."""
    folder = (start if start.is_dir() else start.parent).resolve()
    for candidate in (folder, *folder.parents):
        found = _torch_constraint_in(candidate)
        if found:
            return found
        if (candidate / ".git").exists():
            return None
    return None


def oldest_torch(specifiers) -> str | None:
    """The oldest torch release line allowed by these requirement strings, read with
    ``packaging`` (``torch<3,>=2.4``, ``torch!=2.5.0,>=2.3``, ``torch (>=2.4)``, markers):
    the highest lower bound within one requirement, the lowest across requirements
    (each may apply to another platform).  None when no requirement bounds torch."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    oldest: Version | None = None
    for text in specifiers:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name.lower() != "torch":
            continue
        bound: Version | None = None
        for specifier in requirement.specifier:
            if specifier.operator not in (">=", ">", "==", "~=", "==="):
                continue
            try:
                version = Version(specifier.version.rstrip(".*"))
            except InvalidVersion:
                continue
            bound = version if bound is None else max(bound, version)
        if bound is not None:
            oldest = bound if oldest is None else min(oldest, bound)
    if oldest is None:
        return None
    return ".".join(str(part) for part in oldest.release[:3])


def _requirement_lines(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            lines.append(line)
    return lines


def _setup_py_requirements(text: str) -> list[str]:
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("install_requires", "requires"):
            found += [n.value for n in ast.walk(node.value)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return found


def _torch_constraint_in(folder: Path) -> tuple[str, str] | None:
    sources: list[tuple[Path, list[str]]] = []
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            data = {}
        project = data["project"] if isinstance(data.get("project"), dict) else {}
        dependencies = project.get("dependencies", []) or []
        sources.append((pyproject, [d for d in dependencies if isinstance(d, str)]))
    setup_cfg = folder / "setup.cfg"
    if setup_cfg.is_file():
        import configparser

        parser = configparser.ConfigParser()
        try:
            parser.read(setup_cfg, encoding="utf-8")
            sources.append((setup_cfg, _requirement_lines(parser.get("options", "install_requires",
                                                                       fallback=""))))
        except (configparser.Error, UnicodeDecodeError):
            pass
    setup_py = folder / "setup.py"
    if setup_py.is_file():
        try:
            sources.append((setup_py, _setup_py_requirements(setup_py.read_text(encoding="utf-8"))))
        except (OSError, UnicodeDecodeError):
            pass
    for requirements in sorted(folder.glob("requirements*.txt")):
        try:
            sources.append((requirements, _requirement_lines(requirements.read_text(encoding="utf-8"))))
        except (OSError, UnicodeDecodeError):
            continue
    for path, specifiers in sources:
        version = oldest_torch(specifiers)
        if version:
            return version, str(path)
    return None


def fail_threshold(fail_on: str) -> int | None:
    return None if fail_on == "never" else SEVERITY_RANK[fail_on]
