"""Defaults for evaluate, check and trace from the project's own config.

Read from the nearest ``torchport.toml`` or ``pyproject.toml`` with a
``[tool.torchport]`` table, searching from the current folder upwards to the
repository root (the same files ``scan`` reads its ``[scan]`` settings from)::

    [tool.torchport]             # in torchport.toml: top-level keys
    app = "train.py:app"         # keys here apply to every command that has the option
    backends = ["cpu", "cpu-compile"]
    timeout = 900

    [tool.torchport.evaluate]    # in torchport.toml: [evaluate]
    repeats = 5
    prices = { cpu = 0.10, cuda = 2.50 }   # or prices = "prices.toml"

    [tool.torchport.check]
    only = ["parity", "checkpoint"]

A key is an option's long name without the dashes (``max-warmup``,
``phase-timeout``, ``no-trace = true``); ``backends`` and ``targets`` are the
plural of ``--backend`` and ``--target``.  Options given on the command line
win.  A value that the option would refuse is one line naming ``file:key``,
exit 2.  Relative paths (the app file, a price file, ``work-dir``) are read
relative to the config file's folder.

The defaults are filled in after parsing: every configurable option of these
commands starts as ``UNSET`` (``None`` for repeatable ones), so "not given on
the command line" is known exactly, whatever the spelling used.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from torchport.config_file import torchport_table
from torchport.errors import UserError
from torchport.prices import config_prices

COMMANDS = ("evaluate", "check", "trace")
# Options that name this run's own outputs or the config itself: a config
# setting them would make every run write to one place.
NOT_CONFIGURABLE = {"help", "out", "output", "json", "config", "quiet", "verbose"}
PLURALS = {"backends": "backend", "targets": "target"}
OTHER_TABLES = ("scan",)  # read by torchport.scan.config


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


# --- finding the file --------------------------------------------------------------------------


def find(start: Path | None = None) -> Path | None:
    """The nearest torchport.toml, or pyproject.toml with [tool.torchport]."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        config = candidate / "torchport.toml"
        if config.is_file():
            return config
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            try:
                mentions = "torchport" in pyproject.read_text(encoding="utf-8", errors="replace")
            except OSError:
                mentions = False
            if mentions and torchport_table(pyproject) is not None:
                return pyproject
        if (candidate / ".git").exists():
            return None
    return None


# --- before parsing ----------------------------------------------------------------------------


def _key(action: argparse.Action) -> str | None:
    if not action.option_strings:
        return action.dest if action.dest not in (argparse.SUPPRESS, "help") else None
    long_names = [name for name in action.option_strings if name.startswith("--")]
    return long_names[0][2:] if long_names else None


def _configurable(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    actions = {}
    for action in parser._actions:
        key = _key(action)
        if key and action.dest not in NOT_CONFIGURABLE and key not in NOT_CONFIGURABLE:
            actions[key] = action
    return actions


def prepare(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and mark the defaults of a command's options, so that
    ``apply`` knows which ones the command line did not give."""
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="pyproject.toml or torchport.toml to take defaults from "
                             "(default: the nearest, from the current folder up)")
    command = parser.prog.split()[-1]
    _OPTION_KEYS[command] = set(_configurable(parser))
    for action in _configurable(parser).values():
        action.torchport_default = action.default  # type: ignore[attr-defined]
        action.default = None if isinstance(action, argparse._AppendAction) else UNSET


# --- after parsing -----------------------------------------------------------------------------


def apply(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Path | None:
    """Fill every option the command line did not give: from the config when it
    sets it, else the option's own default.  Returns the config file used, if
    it set anything."""
    from torchport import output

    actions = _configurable(parser)
    path = args.config if getattr(args, "config", None) else find()
    values: dict[str, Any] = {}
    if path is not None:
        if not Path(path).is_file():
            raise UserError("config file not found", location=str(path))
        values = _values_for(args.command, Path(path), actions)
    used = False
    for key, action in actions.items():
        current = getattr(args, action.dest, UNSET)
        if current is not UNSET and not (current is None and isinstance(action, argparse._AppendAction)):
            continue  # given on the command line: it wins
        if key in values:
            setattr(args, action.dest, values[key])
            used = True
        else:
            default = action.torchport_default  # type: ignore[attr-defined]
            if isinstance(default, str) and action.type is not None and callable(action.type):
                default = action.type(default)
            setattr(args, action.dest, list(default) if isinstance(default, list) else default)
    if "config-prices" in values:
        args.config_prices = values["config-prices"]
        used = True
    if used and path is not None:  # only a config file sets anything
        output.note(f"defaults from {path}")
        return Path(path)
    return None


def _values_for(command: str, path: Path, actions: dict[str, argparse.Action]) -> dict[str, Any]:
    found = torchport_table(path)
    if found is None:
        return {}
    table, prefix = found

    shared: dict[str, Any] = {}
    for key, value in table.items():
        if key in COMMANDS or key in OTHER_TABLES:
            if not isinstance(value, dict):
                raise UserError(f"must be a table of {key} options", location=f"{path}:{prefix}{key}")
            continue
        if not any(_known(other, key) for other in COMMANDS):
            raise UserError(f"unknown key {key!r}: not an option of {', '.join(COMMANDS)}",
                            location=f"{path}:{prefix}{key}")
        shared[key] = value
    own = table.get(command, {})
    for key in own:
        if not _known(command, key):
            raise UserError(f"unknown key {key!r}: not an option of torchport {command}",
                            location=f"{path}:{prefix}{command}.{key}")
    values: dict[str, Any] = {}
    for key, value in [(k, v) for k, v in shared.items() if _known(command, k)] + list(own.items()):
        where = f"{path}:{prefix}{command + '.' if key in own else ''}{key}"
        if key == "prices" and command == "evaluate" and isinstance(value, dict):
            values["config-prices"] = config_prices(value, where)
            continue
        flag = PLURALS.get(key, key)
        values[flag] = _convert(actions[flag], value, where, path.parent, key)
    return values


# Each command's configurable keys, recorded by ``prepare``: a key at the top
# of the table must be an option of at least one command.
_OPTION_KEYS: dict[str, set[str]] = {}


def _known(command: str, key: str) -> bool:
    return PLURALS.get(key, key) in _OPTION_KEYS.get(command, set())


def _names(kind: str) -> tuple[str, ...]:
    """The values a name-list option accepts, checked here so that a typo in
    the config is reported at its key (the command line's own checks name
    the flag instead)."""
    if kind == "backend":
        from torchport import backends

        return tuple(backends.registry())
    if kind == "check":
        from torchport.check import CHECK_NAMES

        return CHECK_NAMES
    from torchport.trace.findings import TARGETS

    return tuple(TARGETS)


NAMED = {"backend": "backend", "reference": "backend", "only": "check", "target": "target"}


def _check_names(flag: str, value: Any, where: str) -> None:
    if flag not in NAMED:
        return
    items = value if isinstance(value, list) else [value]
    known = _names(NAMED[flag])
    for item in items:
        for name in str(item).split(","):
            if name.strip() and name.strip() not in known:
                raise UserError(f"unknown {NAMED[flag]} {name.strip()!r} (known: {', '.join(known)})", location=where)


def _convert(action: argparse.Action, value: Any, where: str, folder: Path, key: str) -> Any:
    converted = _convert_value(action, value, where, folder, key)
    _check_names(PLURALS.get(key, key), converted, where)
    return converted


def _convert_value(action: argparse.Action, value: Any, where: str, folder: Path, key: str) -> Any:
    def fail(message: str) -> UserError:
        return UserError(message, location=where)

    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise fail(f"must be true or false, got {value!r}")
        return value if isinstance(action, argparse._StoreTrueAction) else not value
    if isinstance(action, argparse._AppendAction):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise fail("must be a string or a list of strings")
        return [_one(action, item, fail, folder) for item in items]
    if isinstance(value, list):
        if not all(isinstance(item, str) for item in value):
            raise fail("must be a list of strings")
        value = ",".join(value)
    if isinstance(value, (bool, dict)) or value is None:
        raise fail(f"not a valid value: {value!r}")
    if key == "app":
        if not str(value).strip():
            raise fail(f"empty value {value!r}")
        return _app_relative(str(value), folder)
    return _one(action, value, fail, folder)


def _one(action: argparse.Action, value: Any, fail, folder: Path) -> Any:
    from torchport.options import output_file

    text = str(value)
    if not text.strip():  # the command line's rule (cli.OneLineParser): never a default in its place
        raise fail(f"empty value {text!r}")
    if action.type is Path or action.type is output_file:
        path = Path(text).expanduser()
        path = path if path.is_absolute() else folder / path
        if action.type is output_file:
            try:
                output_file(str(path))
            except argparse.ArgumentTypeError as exc:
                raise fail(str(exc)) from None
        return path
    if action.type is not None and callable(action.type):
        try:
            converted = action.type(text)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            raise fail(str(exc) or f"not a valid value: {value!r}") from None
    else:
        converted = text
    if action.choices is not None and converted not in action.choices:
        raise fail(f"{value!r} is not one of {', '.join(map(str, action.choices))}")
    return converted


def _app_relative(spec: str, folder: Path) -> str:
    """``train.py:app`` in a config means the file beside the config."""
    file_part, sep, function = spec.partition(":")
    if file_part.endswith(".py") and not Path(file_part).is_absolute():
        return str(folder / file_part) + sep + function
    return spec
