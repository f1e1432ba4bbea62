"""The ``torchport`` command line.

Only argument parsing and error presentation live here.  Each command group is
a module in ``torchport.commands`` exposing ``register(subparsers)``; a new
module there becomes a new command without editing this file.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from torchport import __version__
from torchport.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchport",
        description="Measure whether a PyTorch app ports to another accelerator.",
    )
    parser.add_argument("--version", action="version", version=f"torchport {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    import torchport.commands as commands_pkg

    for info in sorted(pkgutil.iter_modules(commands_pkg.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"torchport.commands.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, not only before the command.
    debug = "--debug" in argv
    if debug:
        argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(argv)
    args.debug = debug
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        if debug:
            raise
        print(f"torchport: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("torchport: interrupted; results measured so far were kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
