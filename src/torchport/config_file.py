"""Reading a torchport config file: ``torchport.toml`` (torchport's keys at its
top level) or ``pyproject.toml`` (under ``[tool.torchport]``).  The commands'
defaults (``torchport.project_config``) and the scan settings
(``torchport.scan.config``, its ``scan`` table) are read through this one
function, so both report a bad file the same way.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from torchport.errors import UserError


def torchport_table(path: Path) -> tuple[dict[str, Any], str] | None:
    """The torchport table of a config file and its dotted name ('' at top level);
    None for a pyproject.toml without one."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise UserError(f"invalid TOML: {exc}", location=f"{path}:{line.group(1)}" if line else str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read config: {exc}", location=str(path)) from None
    if path.name != "pyproject.toml":
        return data, ""
    table = data.get("tool", {}).get("torchport") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UserError("[tool.torchport] must be a table", location=f"{path}:tool.torchport")
    return table, "tool.torchport."
