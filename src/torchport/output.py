"""One output convention for every command, and how much torchport says.

* ``--format FMT`` chooses what a command prints: ``text`` (for people),
  ``json`` (for programs), ``sarif`` and ``md`` (markdown) where the command
  has them.
* ``-o/--output FILE`` writes that output to FILE instead of stdout.  ``-o`` is
  always a file; the one folder torchport writes, evaluate's results, is
  ``--out-dir DIR`` (``evaluate -o DIR`` is its old spelling, kept).
* ``-q/--quiet`` hides progress and notes (errors and the output itself stay);
  ``-v/--verbose`` adds each worker's phase lines.

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
        print(text, file=sys.stderr, flush=True)


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
    return FORMAT_ALIASES.get(args.format, args.format)


def emit(args: argparse.Namespace, text: str) -> None:
    """The command's output: to ``-o FILE`` when given, else stdout."""
    output: Path | None = getattr(args, "output", None)
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


def plain_text(renderable: Any, width: int = 160) -> str:
    """A rich renderable (a table) as plain text, for ``-o FILE``."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False, highlight=False).print(renderable)
    return buffer.getvalue()


def print_or_emit(args: argparse.Namespace, renderable: Any, width: int = 160) -> None:
    """A table: to the terminal with colour, or as plain text to ``-o FILE``."""
    if getattr(args, "output", None) is not None:
        write_file(args.output, plain_text(renderable, width))
        return
    from rich.console import Console

    Console(width=max(Console().width, width)).print(renderable)
