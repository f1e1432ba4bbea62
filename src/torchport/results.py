"""The result document: the spine every report and command renders from.

One JSON document per evaluation, versioned (``SCHEMA_VERSION``) and described
by ``schemas/result.schema.json``.  It is written atomically after every
backend run, so an interrupted evaluation keeps everything it measured.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from torchport import __version__

SCHEMA_VERSION = "1.0"
SCHEMA_PATH = Path(__file__).parent / "schemas" / "result.schema.json"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def load_schema() -> dict[str, Any]:
    """The result schema, with the section schemas of the stages merged in
    (``schemas/<section>.schema.json`` replaces ``$defs/<section>``)."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    for section in ("trace", "checks"):
        part = SCHEMA_PATH.parent / f"{section}.schema.json"
        if part.exists():
            schema["$defs"][section] = json.loads(part.read_text(encoding="utf-8"))
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


def write_atomic(path: Path, document: dict[str, Any]) -> None:
    document["updated"] = now()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def read(path: Path) -> dict[str, Any]:
    from torchport.errors import UserError

    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"result file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"not a JSON result document: {exc.msg}", location=f"{path}:{exc.lineno}") from None
    if document.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"result schema version {document.get('schema_version')!r} is not the supported {SCHEMA_VERSION!r}",
            location=str(path),
        )
    return document


# --- the environment record --------------------------------------------------------------------


def environment_record() -> dict[str, Any]:
    from torchport.backends import cpu_only_torch

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
    from torchport.backends.cuda import _driver_version

    return _driver_version()


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
