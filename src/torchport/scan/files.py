"""Reading the scanned files again in the passes that run after every file is scanned."""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar


class _Job(Protocol):
    @property
    def path(self) -> str: ...


J = TypeVar("J", bound=_Job)


def read_bytes(jobs: Iterable[J]) -> Iterator[tuple[J, bytes | None]]:
    """Each job with its file's bytes, or None where the file cannot be read: what an unreadable
    file means (a name that may be spelled there, a call that cannot be seen) is each pass's to say."""
    for job in jobs:
        try:
            with open(job.path, "rb") as handle:
                data: bytes | None = handle.read()
        except OSError:
            data = None
        yield job, data


def package_root(os_path: str) -> str:
    """The outermost folder of the file's package (its own folder outside a package)."""
    folder = os.path.dirname(os.path.abspath(os_path))
    while os.path.exists(os.path.join(os.path.dirname(folder), "__init__.py")) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


def any_word(words: Iterable[str | bytes]) -> re.Pattern[bytes]:
    """A pattern for any of ``words`` spelled as a whole word in a file's bytes; the longest tried
    first, so that a word is not matched as the start of a longer one."""
    encoded = sorted((w.encode() if isinstance(w, str) else w for w in words), key=len, reverse=True)
    return re.compile(rb"(?<![\w])(" + b"|".join(map(re.escape, encoded)) + rb")(?![\w])")


class Unreadable(Exception):
    """A file too large to read or that cannot be read: what it says is unknown."""


def regular_file_bytes(path: str, max_bytes: int) -> bytes | None:
    """The bytes of a regular file; None for a pipe, a device or a socket, whose reading may block
    and which hold no source.  Raises Unreadable for a file over ``max_bytes`` or one that cannot
    be read."""
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode):
            return None
        if status.st_size > max_bytes:
            raise Unreadable(path)
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise Unreadable(path) from exc
