"""Writing the result document and holding its output folder.

Every write is atomic: a reader, an interrupted evaluation or a full disk sees
the previous version or the new one, never a part.  An output folder is held by
one run at a time (``OutputFolder``).  What the document is, its versions and
how it is read are in ``torchport.document``.
"""
from __future__ import annotations

import json
import math
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchport.records import ResultDocument


def strict_json(value: Any) -> Any:
    """The document with every non-finite float (NaN, inf) as null: result
    files are strict JSON that any parser reads."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step: a reader (or a full disk)
    sees the old file or the new one, never a part; no temporary file stays."""
    from torchport.errors import OutputError

    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            temporary.unlink()
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}; the previous version is kept") from None
        raise


def write_atomic(path: Path, document: ResultDocument) -> None:
    # imported here: write_text_atomic is what `torchport scan -o` needs, and torchport.document
    # imports every record type (0.1-0.2 s of a scan's start-up where bytecode is not cached)
    from torchport.document import now

    document.put(updated=now())
    write_text_atomic(path, json.dumps(strict_json(document.to_dict()), indent=1, default=str, allow_nan=False) + "\n")


# --- the output folder -------------------------------------------------------------------------

LOCK_NAME = ".torchport.lock"


class OutputFolder:
    """An output folder held by one torchport run: created and checked for
    writing before anything runs, with a lock file naming the holder so that a
    second run cannot overwrite the first one's results."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = path / LOCK_NAME

    @classmethod
    def claim(cls, path: Path, *, explicit: bool) -> OutputFolder:
        """Take ``path``; when another live run holds it, refuse (a folder the
        user named) or take ``path-2``, ``path-3``, ... (the default name)."""
        from torchport.errors import UserError

        for attempt in range(1, 100):
            candidate = path if attempt == 1 else path.with_name(f"{path.name}-{attempt}")
            folder = cls(candidate)
            holder = folder._try_lock()
            if holder is None:
                return folder
            if explicit:
                raise UserError(f"output folder {candidate} is in use by another torchport run ({holder}); "
                                f"choose another -o, or remove {folder.lock} if that run is gone")
        raise UserError(f"no free output folder beside {path}")

    def _try_lock(self) -> str | None:
        """Create the lock; None when taken, else a description of the live holder."""
        from torchport.errors import UserError
        from torchport.processes import identity, is_alive

        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise UserError(f"cannot use output folder {self.path}: a file of that name exists") from None
        except OSError as exc:
            raise UserError(f"cannot create output folder {self.path}: {exc.strerror or exc}") from None
        if not self.path.is_dir():
            raise UserError(f"cannot use output folder {self.path}: not a folder")
        me = f"{identity(os.getpid())} {socket.gethostname()}"
        for _ in range(2):
            try:
                descriptor = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    holder = self.lock.read_text(encoding="utf-8", errors="replace").strip()
                except OSError:
                    holder = ""
                pid_and_start, _, host = holder.partition(" ")
                if host == socket.gethostname() and pid_and_start and not is_alive(pid_and_start):
                    self.lock.unlink(missing_ok=True)  # its holder is gone: a stale lock
                    continue
                return f"pid {pid_and_start.partition(':')[0] or '?'} on {host or 'an unknown host'}"
            except OSError as exc:
                raise UserError(f"cannot write in output folder {self.path}: {exc.strerror or exc}") from None
            try:
                os.write(descriptor, me.encode())
            except OSError as exc:
                os.close(descriptor)
                self.lock.unlink(missing_ok=True)
                raise UserError(f"cannot write in output folder {self.path}: {exc.strerror or exc}") from None
            os.close(descriptor)
            return None
        return "a run that keeps taking it"

    def release(self) -> None:
        try:
            self.lock.unlink(missing_ok=True)
        except OSError:
            pass
