"""The result document: the spine every report and command renders from.

One JSON document per evaluation, versioned (``SCHEMA_VERSION``) and described
by ``schemas/result.schema.json``.  It is written atomically after every
backend run, so an interrupted evaluation keeps everything it measured.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from torchport import __version__

SCHEMA_VERSION = "1.2"
# Versions this torchport reads.  1.1 added what renderers used to read from the
# runs to each backend's summary (counter tables, per-run series, counter totals),
# one shape of device memory and the environment's backend plugin problems; a
# 1.0 document is read as is: its summaries are recomputed from its raw samples
# and its memory figures are read under their 1.0 names (torchport.records.DeviceMemory).
# 1.2 added the check status "borderline" and each run's worker.threads; older documents have neither.
READABLE_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2")
SCHEMA_PATH = Path(__file__).parent / "schemas" / "result.schema.json"


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def load_schema() -> dict[str, Any]:
    """The result schema, with the section schema of every registered stage
    (``torchport.stages``) merged in as ``$defs/<key>``, the key it sets."""
    from torchport import stages

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    for key in stages.result_keys():
        schema["$defs"][key] = stages.by_key(key).schema_fragment()
        schema["properties"].setdefault(key, {"$ref": f"#/$defs/{key}"})
    return schema


def validate(document: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when the document does not match."""
    import jsonschema

    jsonschema.validate(document, load_schema())


def new_document(command: list[str], app: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    stamp = now()
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "torchport", "version": __version__},
        "status": "running",
        "status_reason": None,
        "created": stamp,
        "updated": stamp,
        "command": command,
        "environment": environment_record(),
        "app": app,
        "config": config,
        "reference": None,
        "backends": {},
        "trace": None,
        "checks": None,
    }


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


def write_atomic(path: Path, document: dict[str, Any]) -> None:
    document["updated"] = now()
    write_text_atomic(path, json.dumps(strict_json(document), indent=1, default=str, allow_nan=False) + "\n")


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


# Integers beyond this cannot be a count, a size or a time torchport wrote,
# and would overflow the statistics (float range).
LARGEST_NUMBER = 2**63


def read(path: Path) -> dict[str, Any]:
    """A result document from a file, checked against the schema: anything
    that is not one gets one line naming what is wrong (exit status 2)."""
    document = read_json(path)
    check_version(document, str(path))
    check_schema(document, str(path))
    return document


def read_json(path: Path) -> dict[str, Any]:
    """The strict reader every command uses for a result file: UTF-8, strict
    JSON, an object at the top, every number finite and at most
    ``LARGEST_NUMBER``; anything else is one line naming the file (exit 2)."""
    from torchport.errors import UserError

    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"result file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"result path is a folder, not a result.json: {path}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not a JSON result document: not UTF-8 text (byte {exc.start})", location=where) from None
    except OSError as exc:
        raise UserError(f"cannot read result file: {exc.strerror or exc}", location=where) from None
    try:
        document = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise UserError(f"not a JSON result document: {exc.msg}", location=f"{path}:{exc.lineno}") from None
    except RecursionError:
        raise UserError("not a result document: JSON nested too deeply", location=where) from None
    except ValueError as exc:  # NaN/Infinity, 1e999, or an integer of thousands of digits
        raise UserError(f"not a result document: {exc}", location=where) from None
    if not isinstance(document, dict):
        raise UserError(f"not a result document: the top level is a JSON {_json_type(document)}, not an object",
                        location=where)
    _check_numbers(document, where)
    return document


def check_version(document: dict[str, Any], where: str) -> None:
    from torchport.errors import UserError

    if document.get("schema_version") not in READABLE_SCHEMA_VERSIONS:
        raise UserError(
            f"result schema version {str(document.get('schema_version'))[:40]!r} is not one this torchport reads "
            f"({', '.join(map(repr, READABLE_SCHEMA_VERSIONS))})",
            location=where,
        )


def check_schema(document: dict[str, Any], where: str) -> None:
    from torchport.errors import UserError

    try:
        validate(document)
    except RecursionError:
        raise UserError("not a result document: nested too deeply", location=where) from None
    except Exception as exc:  # jsonschema.ValidationError
        at = "/".join(str(p) for p in getattr(exc, "absolute_path", [])) or "(root)"
        message = str(getattr(exc, "message", exc)).splitlines()[0][:300]
        raise UserError(f"does not match the result schema at {at}: {message}", location=where) from None


def _finite_float(text: str) -> float:
    # 1e999 is valid JSON but becomes inf, which no statistic may see.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range (result files hold finite numbers)")
    return value


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON (result files are strict JSON)")


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _check_numbers(value: Any, where: str, path: str = "") -> None:
    from torchport.errors import UserError

    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{at}/{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}/{i}") for i, v in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > LARGEST_NUMBER:
            raise UserError(f"not a result document: the number at {at or '(root)'} has {len(str(abs(item)))} digits",
                            location=where)
        elif isinstance(item, float) and abs(item) > LARGEST_NUMBER:
            raise UserError(f"not a result document: the number at {at or '(root)'} ({item:.3g}) is out of range",
                            location=where)


# --- the environment record --------------------------------------------------------------------


def environment_record() -> dict[str, Any]:
    from torchport.backends import cpu_only_torch, plugin_problems

    cpu_only = cpu_only_torch()
    if cpu_only:  # no GPU runtime to ask about: skip importing torch in the parent
        torch_facts = {"torch": cpu_only, "torch_cuda": None, "torch_hip": None}
    else:
        import torch

        torch_facts = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                       "torch_hip": getattr(torch.version, "hip", None)}
    return {
        "python": platform.python_version(),
        **torch_facts,
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count() or 1,
        "memory_bytes": _memory_bytes(),
        "hostname": socket.gethostname(),
        "executable": sys.executable,
        "accelerators": [] if cpu_only else _accelerators(),
        "driver": _nvidia_driver(),
        # Backend plugins that could not be used: a backend missing from this result is explained here.
        "backend_plugin_problems": [problem.as_dict() for problem in plugin_problems()],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _accelerators() -> list[dict[str, Any]]:
    import torch

    found = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            found.append({"type": "cuda", "index": index, "name": props.name, "memory_bytes": props.total_memory})
    return found


def _nvidia_driver() -> str | None:
    from torchport.backends.cuda import driver_version

    return driver_version()


def git_state(path: Path) -> tuple[str | None, bool | None]:
    """The commit of the git repository holding ``path`` and whether it has
    uncommitted changes; (None, None) outside a repository."""
    folder = path if path.is_dir() else path.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None, None
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", str(path)],
            capture_output=True, text=True, timeout=10,
        )
        return commit.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None
