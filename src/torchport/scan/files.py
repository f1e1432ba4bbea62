"""Reading the scanned files again in the passes that run after every file is scanned."""
from __future__ import annotations

import os
import re
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
