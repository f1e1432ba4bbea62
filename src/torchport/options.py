"""Option values checked where they are parsed, the same way for every command.

Each function is an argparse ``type``: it returns the value or raises
``argparse.ArgumentTypeError``, which the CLI prints as one line, exit 2.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

# numpy.random.seed takes [0, 2**32); torch.manual_seed takes more.  The seed
# seeds both, so the narrower range is the valid one.
SEED_MAX = 2**32 - 1


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    return value


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer seed") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"seed {text} is outside 0..{SEED_MAX}")
    return value


def count(minimum: int):
    """An integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


# Linux's limits on a path and on one name in it (ENAMETOOLONG beyond them).
NAME_MAX = 255
PATH_MAX = 4096


def output_file(text: str) -> Path:
    """A file torchport will write, checked before any work starts: a name
    the system accepts, not a folder, in a place that can be written (the
    folders that do not exist yet are created when it is written)."""
    from torchport.text import visible_name

    if not text:
        raise argparse.ArgumentTypeError("empty file name")
    path = Path(text)
    shown = visible_name(text)
    absolute = Path(os.path.abspath(text))
    if len(os.fsencode(absolute)) >= PATH_MAX:
        raise argparse.ArgumentTypeError(f"{shown}: file name too long ({len(text)} characters)")
    if any(len(os.fsencode(part)) > NAME_MAX for part in absolute.parts):
        raise argparse.ArgumentTypeError(f"{shown}: file name too long (a part over {NAME_MAX} bytes)")
    if absolute.is_dir():
        raise argparse.ArgumentTypeError(f"{shown}: is a folder; this option names a file")
    if absolute.exists() and not absolute.is_file():  # /dev/stdout, a named pipe: written through
        if not os.access(absolute, os.W_OK):
            raise argparse.ArgumentTypeError(f"{shown}: cannot write there")
        return path
    folder = absolute.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{shown}: {visible_name(str(folder))} is a file, not a folder")
    # access() says yes to root on /proc and the like: only creating a file tells.
    probe = folder / f".torchport-probe.{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{shown}: cannot write in {visible_name(str(folder))} "
                                         f"({exc.strerror or exc})") from None
    try:
        probe.unlink()
    except OSError:
        pass
    return path
