"""One output convention for every command, and how much torchport says.

* ``--format FMT`` chooses what a command prints: ``text`` (for people),
  ``json`` (for programs), ``sarif`` and ``md`` (markdown) where the command
  has them.
* ``-o/--output FILE`` writes that output to FILE instead of stdout.  ``-o`` is
  always a file; the one folder torchport writes, evaluate's results, is
  ``--out-dir DIR`` (``evaluate -o DIR`` is its old spelling, kept).
* ``-q/--quiet`` hides progress and notes (errors and the output itself stay);
  ``-v/--verbose`` adds each worker's phase lines.
* Text output fits ``text_width()`` (COLUMNS, else the terminal's, else 120):
  tables fold and leave out low-value columns when narrow, prose folds.

The old spellings keep working: ``--json`` (a flag: ``--format json``) on
backends, env list and info; ``--json FILE`` (also write the JSON to FILE) on
trace and check; ``--format markdown`` on rules.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from torchport.options import output_file

QUIET, NORMAL, VERBOSE = -1, 0, 1
_verbosity = [NORMAL]

# Old format names still accepted, and what they mean now.
FORMAT_ALIASES = {"markdown": "md"}


class GuardedStream:
    """stdout or stderr such that a reader that went away (``| head -1``,
    ``2>&-``) ends only what is printed, never the work: the first failed
    write points the descriptor at /dev/null (children started later
    inherit that) and every later write is dropped."""

    def __init__(self, stream: Any, fd: int):
        self._stream = stream
        self._fd = fd
        self.lost = stream is None

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return int(self._stream.write(text))
            except (OSError, ValueError) as exc:
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._lose(exc)

    def _lose(self, exc: BaseException) -> None:
        import errno
        import os

        # A full disk behind `> file` is an error to report, not a reader gone.
        if isinstance(exc, OSError) and exc.errno not in (errno.EPIPE, errno.EBADF):
            raise exc
        self.lost = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)
        except OSError:
            pass

    def isatty(self) -> bool:
        return not self.lost and bool(self._stream.isatty())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_streams() -> None:
    """Install ``GuardedStream`` on stdout and stderr (once)."""
    if not isinstance(sys.stdout, GuardedStream):
        sys.stdout = GuardedStream(sys.stdout, 1)
    if not isinstance(sys.stderr, GuardedStream):
        sys.stderr = GuardedStream(sys.stderr, 2)


def stdout_lost() -> bool:
    return isinstance(sys.stdout, GuardedStream) and sys.stdout.lost


def set_verbosity(level: int) -> None:
    _verbosity[0] = level


def quiet() -> bool:
    return _verbosity[0] <= QUIET


def verbose() -> bool:
    return _verbosity[0] >= VERBOSE


def note(text: str) -> None:
    """A line for the person watching (stderr), hidden by ``-q``.  Printed
    literally: notes often quote paths and app text."""
    if not quiet():
        from torchport.text import one_line

        print(one_line(text), file=sys.stderr, flush=True)


def add_format(parser: argparse.ArgumentParser, formats: tuple[str, ...], *, default: str = "text",
               aliases: tuple[str, ...] = ()) -> None:
    parser.add_argument("--format", choices=formats + aliases, default=default,
                        help=f"what to print: {', '.join(formats)} (default {default})"
                             + (f"; {', '.join(aliases)} is the old name of "
                                f"{', '.join(FORMAT_ALIASES[a] for a in aliases)}" if aliases else ""))


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=output_file, metavar="FILE",
                        help="write the output to this file instead of stdout (always a file)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """The old ``--json`` flag: the same as ``--format json``."""
    parser.add_argument("--json", dest="format", action="store_const", const="json",
                        help="the same as --format json (old spelling)")


def chosen_format(args: argparse.Namespace) -> str:
    chosen = getattr(args, "format", None) or "text"
    return FORMAT_ALIASES.get(chosen, chosen)


def emit(args: argparse.Namespace, text: str) -> None:
    """The command's output: to ``-o FILE`` when given, else stdout.  The
    text format (for people) is folded to ``text_width()``; json, sarif, md
    and commands without ``--format`` (a schema, a completion script) are
    printed as they are."""
    output: Path | None = getattr(args, "output", None)
    if getattr(args, "format", None) is not None and chosen_format(args) == "text":
        text = fit_lines(text, text_width())
    if text and not text.endswith("\n"):
        text += "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_file(output, text)


def write_file(path: Path, text: str) -> None:
    """Write an output file whole (atomically: a reader never sees half of
    it); a path that cannot be written is one line naming it."""
    from torchport.errors import OutputError, UserError
    from torchport.results import write_text_atomic

    path = Path(path)
    if path.is_dir():
        raise UserError("is a folder; -o names a file", location=str(path))
    if path.exists() and not path.is_file():  # /dev/stdout, a named pipe: write through
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise OutputError(f"cannot write: {exc.strerror or exc}", location=str(path)) from None
        return
    write_text_atomic(path, text)


# Where there is no terminal (a pipe, a file) and COLUMNS is not set: wide
# enough for the tables, narrow enough to read in an editor or a CI log.
UNBOUNDED_WIDTH = 120
# Below this, nothing is laid out in columns any more.
NARROWEST = 40


def text_width() -> int:
    """The width text output must fit: COLUMNS when set (what shells export
    and what tests set), else the terminal's, else ``UNBOUNDED_WIDTH``."""
    import os
    import shutil

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), NARROWEST)
    if sys.stdout.isatty():
        return max(shutil.get_terminal_size((UNBOUNDED_WIDTH, 24)).columns, NARROWEST)
    return UNBOUNDED_WIDTH


def fit_lines(text: str, width: int) -> str:
    """Every line longer than ``width`` folded at spaces (a word longer than
    the width is cut), the continuation indented two more than the line."""
    import textwrap

    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip(" "))]
        if len(indent) > width // 2:
            indent = ""
        out.extend(textwrap.wrap(line.strip(" "), width=width, initial_indent=indent,
                                 subsequent_indent=indent + "  ", break_on_hyphens=False) or [""])
    return "\n".join(out)


def console(width: int | None = None, **options: Any) -> Any:
    """A rich console for stdout at the text width (colour only on a terminal)."""
    from rich.console import Console

    return Console(width=width or text_width(), **options)


def print_lines(console: Any, lines: list[str]) -> None:
    """Lines of text (data: never rich markup) folded to the console's width."""
    for line in lines:
        console.print(fit_lines(line, console.width), highlight=False, soft_wrap=True, markup=False)


def fit_table(table: Any, width: int, shown_from: dict[str, int]) -> Any:
    """Leave out the columns that ``shown_from`` maps to a wider width than
    ``width`` (folded into a narrow terminal they would make every row a
    dozen lines tall), and say which in the caption."""
    dropped = [column for column in table.columns if width < shown_from.get(str(column.header), 0)]
    for column in dropped:
        table.columns.remove(column)
    if dropped:
        names = ", ".join(str(column.header) for column in dropped)
        note = f"left out at {width} columns: {names} (a wider terminal or --format json shows them)"
        table.caption = f"{table.caption}\n{note}" if table.caption else note
        table.caption_justify = "left"
    return table


def plain_text(renderable: Any, width: int | None = None) -> str:
    """A rich renderable (a table) as plain text, for ``-o FILE``."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width or text_width(), color_system=None, force_terminal=False,
            highlight=False).print(renderable)
    return buffer.getvalue()


def print_or_emit(args: argparse.Namespace, renderable: Any) -> None:
    """A table: to the terminal with colour, or as plain text to ``-o FILE``;
    either way within ``text_width()``."""
    if getattr(args, "output", None) is not None:
        write_file(args.output, plain_text(renderable))
        return
    console().print(renderable)
