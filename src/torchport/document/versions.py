"""The result document's schema versions: the one written and those read."""
from __future__ import annotations

from typing import Any

SCHEMA_VERSION = "1.2"
# Versions this torchport reads.  1.1 added what renderers used to read from the
# runs to each backend's summary (counter tables, per-run series, counter totals),
# one shape of device memory and the environment's backend plugin problems; a
# 1.0 document is read as is: its summaries are recomputed from its raw samples
# and its memory figures are read under their 1.0 names (torchport.records.DeviceMemory).
# 1.2 added the check status "borderline" and each run's worker.threads; older documents have neither.
READABLE_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2")


def readable(document: dict[str, Any]) -> bool:
    """Whether this torchport reads the document's schema version."""
    return document.get("schema_version") in READABLE_SCHEMA_VERSIONS


def check_version(document: dict[str, Any], where: str) -> None:
    """One line naming the version and those read, when it is not one of them."""
    from torchport.errors import UserError

    if not readable(document):
        raise UserError(
            f"result schema version {str(document.get('schema_version'))[:40]!r} is not one this torchport reads "
            f"({', '.join(map(repr, READABLE_SCHEMA_VERSIONS))})",
            location=where,
        )
