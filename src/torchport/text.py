"""The one sanitiser for text that is data (app, file, host, backend, label
names, messages and tails): control characters are shown as ``\\xNN``,
never obeyed by a terminal nor able to break a markdown or HTML line.

``visible`` keeps newlines and tabs, for multi-line text shown as a block;
``one_line`` escapes them too, for names, titles, headings, table cells and
error lines, and caps the length.
"""
from __future__ import annotations

from typing import Any

# C0, DEL and C1 (a terminal obeys U+009B as it does ESC [).
_CONTROL_CODES = [*range(0, 32), 127, *range(0x80, 0xA0)]
_ALL = {code: f"\\x{code:02x}" for code in _CONTROL_CODES}
_BLOCK = {code: text for code, text in _ALL.items() if code not in (9, 10)}

NAME_CHARS = 300


def visible(text: Any) -> str:
    """``text`` with control characters other than newline and tab as ``\\xNN``."""
    return ("" if text is None else str(text)).translate(_BLOCK)


def one_line(text: Any, limit: int | None = None) -> str:
    """``text`` on one line, every control character as ``\\xNN``, at most
    ``limit`` characters (an ellipsis marks the cut)."""
    shown = ("" if text is None else str(text)).translate(_ALL)
    if limit is not None and len(shown) > limit:
        shown = shown[: max(limit - 1, 0)] + "…"
    return shown


def visible_name(text: Any) -> str:
    """A file name, spec or label as one line of at most ``NAME_CHARS``."""
    return one_line(text, NAME_CHARS)
