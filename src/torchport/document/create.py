"""A new result document, before anything has run."""
from __future__ import annotations

import datetime as _dt
from typing import Any

from torchport import __version__
from torchport.document.versions import SCHEMA_VERSION
from torchport.environment import environment_record


def now() -> str:
    """The document's timestamps (``created``, ``updated``): UTC, to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


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
        "environment": environment_record().to_dict(),
        "app": app,
        "config": config,
        "reference": None,
        "backends": {},
        "trace": None,
        "checks": None,
    }
