"""The ``torchport`` command line.

Only argument parsing and error presentation live here.  Each command group is
a module in ``torchport.commands`` exposing ``register(subparsers)``; a new
module there becomes a new command without editing this file.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import pkgutil
import re
import signal
import sys
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from torchport import __version__, output, project_config
from torchport.errors import Interrupted, UserError, interrupted_by, received
from torchport.text import one_line, visible_name

# The signals that end torchport as Ctrl-C does: workers ended, the partial
# result written with status "interrupted", the report rendered.
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class OneLineParser(argparse.ArgumentParser):
    """Bad options end in one line (``torchport: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == "torchport" else f"{self.prog}: "
        print(f"torchport: error: {where}{one_line(message, 1000)}{self._did_you_mean(message)}", file=sys.stderr)
        sys.exit(2)

    def _did_you_mean(self, message: str) -> str:
        """The nearest command or option to a misspelt one ("evalute", "--repeat")."""
        import difflib

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            known = re.findall(r"'([^']*)'", choice.group(2))
            close = difflib.get_close_matches(choice.group(1), known, n=1)
            return f" (did you mean '{close[0]}'?)" if close else ""
        unknown = re.search(r"unrecognized arguments: (.*)", message)
        if unknown:
            options = _option_strings(self)
            for word in unknown.group(1).split():
                option = word.split("=")[0]
                if option in options:  # spelt right, but another command's option
                    return f" ({option} is not an option of this command: see its --help)"
                close = difflib.get_close_matches(option, options, n=1) if word.startswith("--") else []
                if close:
                    return f" (did you mean {close[0]}?)"
        return ""

    def _get_value(self, action: argparse.Action, arg_string: Any) -> Any:
        # One rule for empty values, for every option and argument: refused,
        # never replaced by a default (Path("") is the current folder, and an
        # empty backend list would mean every backend).
        if isinstance(arg_string, str) and not arg_string.strip() \
                and not isinstance(action, argparse._SubParsersAction):  # the command's own parser checks
            raise argparse.ArgumentError(action, f"empty value {arg_string!r}")
        return super()._get_value(action, arg_string)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option of ``parser`` and of its subcommands' parsers."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _option_strings(sub)
        found += [option for option in action.option_strings if option.startswith("--")]
    return list(dict.fromkeys(found))


def _on_ending_signal(number: int, frame: Any) -> None:
    if received:
        return  # cleanup is under way; a second Ctrl-C must not cut it short
    name = signal.Signals(number).name
    received.append(Interrupted(name, 128 + number))
    raise received[0]


def install_signal_handlers() -> None:
    for number in ENDING_SIGNALS:
        try:
            signal.signal(number, _on_ending_signal)
        except (ValueError, OSError):  # not the main thread, or not allowed here
            pass


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser.  ``only``: register just the commands of the module
    ``torchport.commands.<only>`` (see ``_parser_for``); the others' parsers are built if a
    command asks for them."""
    parser = (_OneModuleParser if only else OneLineParser)(
        prog="torchport",
        description="Measure whether a PyTorch app ports to another accelerator.",
    )
    parser.add_argument("--version", action="version", version=f"torchport {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    _add_verbosity(parser, default=False)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [only] if only else _command_modules():
        module = importlib.import_module(f"torchport.commands.{name}")
        module.register(subparsers)
    for name in project_config.COMMANDS:
        if name in subparsers.choices:
            project_config.prepare(subparsers.choices[name])
    for command in _all_subparsers(parser):
        _add_verbosity(command, default=argparse.SUPPRESS)
    parser.set_defaults(command_parsers=_EveryCommand(subparsers.choices) if only else subparsers.choices)
    return parser


def _command_modules() -> list[str]:
    import torchport.commands as commands_pkg

    return sorted(info.name for info in pkgutil.iter_modules(commands_pkg.__path__))


class _NeedsEveryCommand(Exception):
    """The one-module parser met something only the whole parser can answer (an error,
    whose suggestions name the other commands' options)."""


class _OneModuleParser(OneLineParser):
    def error(self, message: str) -> NoReturn:
        raise _NeedsEveryCommand(message)


class _EveryCommand(Mapping[str, argparse.ArgumentParser]):
    """``args.command_parsers`` after a one-module parse: the parsers of the module's own
    commands, and every command's once something asks for the others (``completion``)."""

    def __init__(self, own: Mapping[str, argparse.ArgumentParser]) -> None:
        self.parsers: dict[str, argparse.ArgumentParser] = dict(own)
        self.complete = False

    def _every(self) -> dict[str, argparse.ArgumentParser]:
        if not self.complete:
            every = build_parser().get_default("command_parsers")  # in the whole parser's order
            self.parsers = {name: self.parsers.get(name, parser) for name, parser in every.items()}
            self.complete = True
        return self.parsers

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        return self.parsers[name] if name in self.parsers else self._every()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._every())


def _whole(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser that lists every command (for the help and the errors printed after parsing)."""
    return build_parser() if isinstance(parser, _OneModuleParser) else parser


def _parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """A parser holding only the commands of the module named like the command being run
    (``scan``): importing every command's module (check, evaluate, trace and what they
    import) costs about 0.25 s of CPU, as much as scanning a few hundred files.  The whole
    parser otherwise: no command, a command whose module has another name, or one whose
    options the project's config file may set."""
    command = next((word for word in argv if not word.startswith("-")), None)
    if command in _command_modules() and command not in project_config.COMMANDS:
        return build_parser(only=command)
    return build_parser()


def _add_verbosity(parser: argparse.ArgumentParser, default: Any) -> None:
    """-q/-v before the command or after it (``torchport -q evaluate``, ``torchport evaluate -q``)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="print only the output and errors: no progress, no notes")
    group.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="also print each worker's phases as they happen")


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found.append(child)
                found += _all_subparsers(child)
    return found


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, not only before the command.
    debug = "--debug" in argv
    if debug:
        argv = [a for a in argv if a != "--debug"]
    # Everything after `--` belongs to the script of `evaluate --script` (its own flags).
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    install_signal_handlers()
    output.guard_streams()
    try:
        parser = _parser_for(argv)
        try:
            args = parser.parse_args(argv)
        except _NeedsEveryCommand:
            parser = build_parser()
            args = parser.parse_args(argv)
        args.debug = debug
        args.passthrough = passthrough
        if args.quiet and args.verbose:
            _whole(parser).error("-q/--quiet and -v/--verbose do not go together")
        output.set_verbosity(output.QUIET if args.quiet else output.VERBOSE if args.verbose else output.NORMAL)
        if not getattr(args, "func", None):
            _whole(parser).print_help()
            return 2
        if args.command in project_config.COMMANDS:
            project_config.apply(args, args.command_parsers[args.command])
        status = int(args.func(args) or 0)
        # The work is done; that its printed output was cut short is still said.
        return 141 if output.stdout_lost() else status
    except UserError as exc:
        if debug:
            _print_traceback()
        print(f"torchport: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        from torchport.launch import cancel_all

        _ignore_ending_signals()
        cancel_all()
        status = exc.exit_status if isinstance(exc, Interrupted) else (received[0].exit_status if received else 130)
        print(f"torchport: interrupted ({interrupted_by()}); results measured so far were kept", file=sys.stderr)
        return status
    except BrokenPipeError:
        # The reader went away (`torchport backends --json | head -1`): end quietly.
        _silence_stdout()
        return 141
    except OSError as exc:
        if debug:
            _print_traceback()
        where = f": {visible_name(exc.filename)}" if exc.filename else ""
        print(f"torchport: error: {one_line(exc.strerror or exc)}{where}", file=sys.stderr)
        # A name the system refuses is bad input, like any other bad path.
        return 2 if exc.errno == errno.ENAMETOOLONG else 1
    except Exception:
        if not debug:
            raise
        _print_traceback()
        return 1


def _print_traceback() -> None:
    """The traceback ``--debug`` shows, with the same sanitiser as every other
    output: exceptions quote app text, file names and paths."""
    import traceback

    exc = sys.exc_info()[1]
    if exc is None:
        return
    # Line by line: a message or a file name with a newline must not make a line of its own.
    frames = [one_line(line) for part in traceback.format_tb(exc.__traceback__) for line in part.splitlines()]
    message = one_line(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")
    sys.stderr.write("\n".join(["Traceback (most recent call last):", *frames, message]) + "\n")


def _ignore_ending_signals() -> None:
    for number in ENDING_SIGNALS:
        try:
            signal.signal(number, signal.SIG_IGN)
        except (ValueError, OSError):
            pass


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
