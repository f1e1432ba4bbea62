"""A new result document, before anything has run."""
from __future__ import annotations

import datetime as _dt
from typing import Any

from torchport import __version__
from torchport.document.versions import SCHEMA_VERSION
from torchport.environment import environment_record
from torchport.records import AppRecord, DocumentStatus, ResultDocument, ToolRecord


def now() -> str:
    """The document's timestamps (``created``, ``updated``): UTC, to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def new_document(command: list[str], app: AppRecord, config: dict[str, Any]) -> ResultDocument:
    """An evaluation's document before anything ran: every key it starts with is written, null or not."""
    stamp = now()
    return ResultDocument(schema_version=SCHEMA_VERSION, tool=ToolRecord(name="torchport", version=__version__),
                          status=DocumentStatus.RUNNING, status_reason=None, created=stamp, updated=stamp,
                          command=command, environment=environment_record(), app=app, config=config, reference=None,
                          backends={}, trace=None, checks=None, key_order=STARTING_KEYS)


STARTING_KEYS = ("schema_version", "tool", "status", "status_reason", "created", "updated", "command", "environment",
                 "app", "config", "reference", "backends", "trace", "checks")
