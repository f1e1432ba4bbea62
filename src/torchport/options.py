"""Option values checked where they are parsed, the same way for every command.

Each function is an argparse ``type``: it returns the value or raises
``argparse.ArgumentTypeError``, which the CLI prints as one line, exit 2.
"""
from __future__ import annotations

import argparse
import math

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
