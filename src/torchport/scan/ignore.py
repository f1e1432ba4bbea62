"""Which files ``.gitignore`` leaves out of a scan.

Inside a git repository git itself answers (``git ls-files --cached --others
--exclude-standard``: tracked files plus untracked ones that are not ignored, with
every ignore source git reads).  Outside one, ``.gitignore`` files met during the
walk are applied by a small matcher that follows gitignore(5): last matching
pattern wins, ``!`` re-includes, a trailing ``/`` matches folders only, a pattern
with an inner ``/`` is relative to its ``.gitignore``, ``**`` spans folders.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class GitListing:
    """The files git would show in one repository (tracked or untracked, not ignored)."""

    def __init__(self, top: Path, files: set[str]):
        self.top = top
        self.files = files
        self.folders: set[str] = set()
        for name in files:
            folder = os.path.dirname(name)
            while folder not in self.folders and len(folder) > len(str(top)):
                self.folders.add(folder)
                folder = os.path.dirname(folder)

    @classmethod
    def of(cls, folder: Path) -> GitListing | None:
        try:
            top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                                 capture_output=True, text=True, timeout=60)
            if top.returncode != 0 or not top.stdout.strip():
                return None
            root = Path(top.stdout.strip()).resolve()
            listing = subprocess.run(
                ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if listing.returncode != 0:
            return None
        names = listing.stdout.decode("utf-8", "surrogateescape").split("\0")
        return cls(root, {str(root / name) for name in names if name})

    def ignores(self, path: Path, is_dir: bool) -> bool:
        text = str(path)
        if path == self.top or self.top not in path.parents:
            return False
        if is_dir:
            return text not in self.folders and text not in self.files  # a submodule is listed as a file
        return text not in self.files

    def owns_subtree(self, path: Path) -> bool:
        """A submodule (git lists it as one entry): its files are not filtered."""
        return str(path) in self.files


@dataclass
class _Pattern:
    base: Path
    regex: re.Pattern
    negate: bool
    dir_only: bool


def _translate(glob: str) -> str:
    out, index = [], 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if glob.startswith("/**", index) and index + 3 == len(glob):
            out.append("/.*")
            index += 3
            continue
        if char == "*":
            out.append(".*" if glob.startswith("**", index) else "[^/]*")
            index += 2 if glob.startswith("**", index) else 1
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            end = glob.find("]", index + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = glob[index + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                index = end
        elif char == "\\" and index + 1 < len(glob):
            index += 1
            out.append(re.escape(glob[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


@dataclass
class GitignoreRules:
    patterns: list[_Pattern] = field(default_factory=list)

    def with_file(self, folder: Path) -> GitignoreRules:
        """These rules plus the folder's own .gitignore, if it has one."""
        try:
            text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return self
        added = []
        for line in text.splitlines():
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate or line.startswith("\\!") or line.startswith("\\#"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            regex = _translate(line)
            if not anchored:
                regex = "(?:.*/)?" + regex
            added.append(_Pattern(folder, re.compile(regex + r"\Z", re.S), negate, dir_only))
        return GitignoreRules(self.patterns + added) if added else self

    def ignores(self, path: Path, is_dir: bool) -> bool:
        ignored = False
        for pattern in self.patterns:
            if pattern.dir_only and not is_dir:
                continue
            try:
                relative = path.relative_to(pattern.base).as_posix()
            except ValueError:
                continue
            if pattern.regex.match(relative):
                ignored = not pattern.negate
        return ignored
